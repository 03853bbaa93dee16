PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-realworld test-serve bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# the tested set (constraints.txt) within setup.cfg's ranges; dev includes the TVM extra
$(STAMP): $(BIN)/python setup.cfg pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m dycl.demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not slow"

# tests marked slow (over ~30 s each: a fresh virtual environment with an artifact's requirements,
# the long end of the zoo, fuzz and TVM sweeps whose first cases `make test` runs)
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow || [ $$? -eq 5 ]  # 5: no test is marked slow

# the real-world corpus (Hugging Face models, MoE packages, ExportDB) with its extra installed
test-realworld: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[realworld]'
	DYCL_SLOW=1 $(BIN)/python -m pytest -q tests/realworld

# the serve extra (Ray Serve, ~390 MB: not in `make`/`make test`) and its tests (two start Ray: 2-4 min on 2 cores)
test-serve: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[serve]'
	$(BIN)/python -m pytest -q tests/serve

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py --json benchmarks/results.json

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
