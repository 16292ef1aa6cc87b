# The few commands everyone uses. `make lab` and `make test` set up a fresh machine on their own.
PY ?= python3

.PHONY: install lab notebooks test bench lint sync weights
install:
	$(PY) -m pip install -q -r requirements.txt -e .

lab: install
	$(PY) -m lab walk

notebooks: install
	$(PY) -m jupyter lab notebooks/00_overview.ipynb

sync:
	$(PY) -m lab.nbsync --write
	$(PY) -m lab.diagrams --write

test: install
	$(PY) -m pytest

bench: install
	$(PY) bench/bench_budgets.py
	$(PY) bench/bench_speculative.py

weights: install
	$(PY) -m lab train all --out lab/weights

lint:
	$(PY) -m ruff check dspark_mini lab tests bench
