# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
PY      = $(BIN)/python

.PHONY: demo test lint bench-generate clean check-java

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

check-java:
	@scripts/check_java.sh

demo: check-java $(VENV)/.installed
	$(BIN)/vpub demo --out out/demo

test: check-java $(VENV)/.installed-dev
	$(BIN)/pytest -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench-generate: check-java $(VENV)/.installed
	rm -rf out/bench-sal-10m
	$(BIN)/vpub datasets generate sal --rows 10000000 --seed 7 --out out/bench-sal-10m

clean:
	rm -rf out .pytest_cache .hypothesis
