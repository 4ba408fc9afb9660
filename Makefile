# Two entry points: `make demo` and `make test`. Each creates .venv if missing and installs into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

$(STAMP): $(BIN)/python setup.py pyproject.toml $(wildcard csrc/*.c)
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/graphene prepare --aot builtin
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python tools/demo.py

test: install
	$(BIN)/python -m pytest tests -x -p no:cacheprovider --timeout=600 --durations=25 -n 2 --dist loadfile

clean:
	rm -rf build *.egg-info graphene_py/*.so
