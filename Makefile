# Two entry points: `make demo` and `make test`. Each creates .venv if missing and installs into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

# editable, as a path in a .pth file (setuptools' "compat" mode) where setuptools still offers it:
# its default mode installs an import hook that imports pathlib, urllib and more at every start
# of Python (a cold `import graphene_py.cli`: -28 ms wall, median of 8 pairs,
# benchmarks/editable_mode_import.json); the default mode where compat is gone
$(STAMP): $(BIN)/python setup.py pyproject.toml $(wildcard csrc/*.c)
	$(BIN)/pip install -q -e '.[test]' --config-settings editable_mode=compat 2>/dev/null \
		|| $(BIN)/pip install -q -e '.[test]'
	$(BIN)/graphene prepare --aot builtin
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python tools/demo.py

test: install
	$(BIN)/python -m pytest tests -x -p no:cacheprovider --timeout=600 --durations=25 -n 2 --dist loadfile

clean:
	rm -rf build *.egg-info graphene_py/*.so
