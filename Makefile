# The README's two commands: `make lab` (the notebooks) and `make test` (the suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYPROJECT := $(shell cksum < pyproject.toml | cut -d' ' -f1)
# installed: the kit with its notebook extra (JupyterLab, widgets: a lab without test tools)
LAB    := $(VENV)/.installed-lab-$(PYPROJECT)
# installed: the kit with its test extra (the notebook extra, pytest, nbval, playwright...)
TEST   := $(VENV)/.installed-test-$(PYPROJECT)

.PHONY: lab demo notebooks classes test bench browser-deps clean cluster cluster-stop

lab: $(LAB) classes     ## open JupyterLab on notebooks/
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

demo: $(LAB) classes    ## run every notebook headless; HTML copies with charts in build/
	$(BIN)/python -m kit.tools.demo notebooks build
ifeq ($(CLUSTER),1)     # again on a standalone cluster and on Spark Connect: build/standalone, build/connect
	$(BIN)/python -m kit.tools.demo --cluster notebooks build
endif

cluster: $(LAB)         ## a local standalone master, 2 workers and a Spark Connect server (build/cluster)
	$(BIN)/python -m kit.tools.cluster start build/cluster

cluster-stop:           ## stop what `make cluster` started
	$(BIN)/python -m kit.tools.cluster stop build/cluster

notebooks: $(LAB) classes   ## run every notebook and store its outputs, for reading before running
	$(BIN)/python -m kit.tools.demo --store notebooks

classes: $(LAB)         ## the JVM's class archive: Spark sessions start ~2 s sooner (kit.tools.archive)
	$(BIN)/python -m kit.tools.archive

test: $(TEST) browser-deps   ## the whole suite: unit, property, notebooks (nbval), browser
	KIT_DRIVER_JAVA_OPTIONS=-XX:TieredStopAtLevel=1 $(BIN)/python -m pytest tests kit --doctest-modules --nbval notebooks --nbval-current-env -p no:cacheprovider --durations=30

bench: $(TEST) .venv-flink/.installed   ## benchmarks (not tests), real Flink side by side: build/bench.md
	$(BIN)/python -m benchmarks

.venv-flink/.installed:  # real Apache Flink 2.3 (PyFlink from PyPI) for the baselines
	$(PYTHON) -m venv .venv-flink
	.venv-flink/bin/python -m pip install --quiet apache-flink==2.3.0
	touch $@

browser-deps:           ## Debian's Chromium for the browser test (no browser download)
	@sh tests/browser/ensure-chromium.sh

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(LAB): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[notebook]'
	rm -f $(VENV)/.installed-lab-* && touch $@

$(TEST): pyproject.toml | $(BIN)/python   # the test extra includes the notebook extra
	$(BIN)/python -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-test-* $(VENV)/.installed-lab-* && touch $@ $(LAB)

clean:
	rm -rf $(VENV) .venv-flink build
