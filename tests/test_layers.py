"""The kit's layers (ARCHITECTURE.md) as tests: imports run one way, down the layers.

The contract is import-linter's, in ``pyproject.toml``; these tests run it and check what
it cannot see: that every top-level unit of ``kit`` sits in a layer, that modules loaded by
name (``importlib.import_module("kit....")``) obey the layers too, and that no module
imports another module's ``_private`` names.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "kit"


def _layers() -> list[set[str]]:
    """The contract's layers, top first, each the set of its modules (``kit.sql``...)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers"]
    return [set(re.split(r"\s*[|:]\s*", layer.strip("()"))) for layer in contract["layers"]]


def _modules():
    """(module name, path) of every module of the kit."""
    for path in sorted(KIT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _level(module: str, layers) -> int | None:
    """The layer index of ``module`` (0 = top), None for the face (``kit`` itself)."""
    unit = _unit(module)
    return next((i for i, layer in enumerate(layers) if unit in layer), None)


def test_the_import_contract_is_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def test_every_unit_of_the_kit_is_in_a_layer():
    layers = _layers()
    units = {_unit(m) for m, _ in _modules()} - {"kit"}
    placed = set().union(*layers)
    assert units - placed == set(), "put these in a layer of pyproject.toml's contract"
    assert placed - units == set(), "the contract names units that do not exist"


def _named_imports(path: Path, module: str):
    """Modules that ``path`` loads by name: ``import_module("kit.x")`` or ``(".x", __name__)``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__") and node.args:
            arg = node.args[0]
            text = arg.value if isinstance(arg, ast.Constant) else (
                arg.values[0].value if isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant)
                else None)
            if isinstance(text, str) and text.startswith("."):
                text = module + text if path.name == "__init__.py" else module.rsplit(".", 1)[0] + text
            if isinstance(text, str) and text.startswith("kit."):
                yield node.lineno, text.rstrip(".")


def test_modules_loaded_by_name_obey_the_layers():
    layers = _layers()
    wrong = []
    for module, path in _modules():
        mine = _level(module, layers)
        for line, target in _named_imports(path, module):
            theirs = _level(target, layers)
            if mine is not None and theirs is not None and theirs < mine:
                wrong.append(f"{path.relative_to(ROOT)}:{line} loads {target}, a layer above")
    assert wrong == []


def test_the_layers_check_finds_a_module_loaded_by_name(tmp_path):
    source = tmp_path / "__init__.py"
    source.write_text('import importlib\nimportlib.import_module("kit.viz")\nimportlib.import_module(f".x{1}", __name__)\n')
    assert list(_named_imports(source, "kit.spark")) == [(2, "kit.viz"), (3, "kit.spark.x")]


def _private_imports(path: Path, module: str):
    """``from M import _name`` where M is another module (a name shared across modules is public)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
        if not base.startswith("kit"):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                yield node.lineno, f"{base}.{alias.name}"


def test_no_module_imports_another_modules_private_names():
    found = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for module, path in _modules() for line, name in _private_imports(path, module)]
    assert found == []


def test_the_private_check_finds_one(tmp_path):
    source = tmp_path / "rank.py"
    source.write_text("from .aggregate import _replay, group_aggregate\nfrom ..stream import Stream\n")
    assert list(_private_imports(source, "kit.changelog.rank")) == [(1, "kit.changelog.aggregate._replay")]
