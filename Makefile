# The README's two commands: `make lab` (the notebooks) and `make test` (the suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: lab demo test bench browser-deps clean

lab: $(STAMP)           ## open JupyterLab on notebooks/
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

demo: $(STAMP)          ## run every notebook headless; HTML copies with charts in build/
	$(BIN)/python -m kit.demo notebooks build

test: $(STAMP) browser-deps   ## the whole suite: unit, property, notebooks (nbval), browser
	$(BIN)/python -m pytest tests kit --doctest-modules --nbval notebooks --nbval-current-env -p no:cacheprovider

bench: $(STAMP) .venv-flink/.installed   ## benchmarks (not tests), real Flink side by side: build/bench.md
	$(BIN)/python -m benchmarks

.venv-flink/.installed:  # real Apache Flink 2.3 (PyFlink from PyPI) for the baselines
	$(PYTHON) -m venv .venv-flink
	.venv-flink/bin/python -m pip install --quiet apache-flink==2.3.0
	touch $@

browser-deps:           ## Debian's Chromium for the browser test (no browser download)
	@sh tests/browser/ensure-chromium.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

clean:
	rm -rf $(VENV) .venv-flink build
