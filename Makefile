# tms-hbase developer commands. Everything runs in a virtualenv (.venv) made on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install demo test lint hbase-start hbase-stop clean

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed  ## the package, its CLI and the test tools, into .venv

demo: install  ## start a local HBase and show topics working end to end
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/demo.sh

test: install  ## the whole test suite against a real HBase (started if needed)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install  ## style, formatting, and the layer rule of docs/architecture.md (import-linter contracts)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

hbase-start: install
	$(VENV)/bin/tms-admin hbase start

hbase-stop: install
	$(VENV)/bin/tms-admin hbase stop

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
