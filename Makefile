# Two entry points a new user needs: `make demo` and `make test`.
# Both create the virtual environment and install what they need first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: demo test lint bench venv graphviz

$(VENV)/.core:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.test: $(VENV)/.core pyproject.toml
	# torch first and pinned: an open range would pull the CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	touch $@

$(VENV)/.examples: $(VENV)/.core
	$(PIP) install -q -e '.[examples]'
	touch $@

venv: $(VENV)/.test

# Graphviz's `dot` program renders `nnefx draw` pictures (.svg/.png); the tests that need it
# skip without it. Installed here where apt-get can (as root or through sudo without a password).
graphviz:
	@command -v dot >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
	  { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); $$SUDO apt-get update -qq && \
	    $$SUDO apt-get install -y -qq graphviz >/dev/null; } ; } || \
	  echo "note: Graphviz's dot program is not installed; the draw tests writing .svg/.png are skipped"

demo: $(VENV)/.examples
	$(PY) examples/digits/demo.py

test: $(VENV)/.test graphviz
	$(VENV)/bin/ruff check src tests $(wildcard benchmarks examples)
	$(PY) -m pytest -q -n 2 -p no:cacheprovider

bench: $(VENV)/.test
	$(PY) benchmarks/run_all.py
