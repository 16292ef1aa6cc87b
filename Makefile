# The few commands everyone uses. `make lab` and `make test` set up a fresh machine on their own:
# they make a project virtualenv in .venv (the system Python is never touched: stock Debian/Ubuntu
# refuse `pip install` there), install the CPU build of torch into it, then the lab.
#
# Torch: the CPU wheel comes from PyTorch's CPU index (`TORCH_INDEX`) with a `+cpu` pin, so an ordinary
# machine does not pull the multi-GB CUDA build. Where that index cannot be reached, pip gives up on it at
# once (--retries 0) and takes the same pin from its other sources. GPU users pick their CUDA build instead:
#   make install TORCH_INDEX=https://download.pytorch.org/whl/cu128 TORCH_PIN=torch==2.13.0
# or install any torch ≥ 2.4 into .venv first: an installed torch is kept.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
STAMP := $(VENV)/.installed
# the language of `make lab` (en or vi): make lab LAB_LANG=vi
LAB_LANG ?= en
# JupyterLab refuses to start as root unless told: `make notebooks` tells it only when make runs as root (uid 0)
JUPYTER_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

.PHONY: install install-parity lab notebooks notebook-outputs test bench bench-docs lint sync corpus corpus-check weights paper pictures fonts present handouts clean-venv
install: $(STAMP)

$(PY):
	@echo "making the project virtualenv $(VENV) (python: $(PYTHON))"
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) requirements.txt pyproject.toml
	@$(PY) -c "import importlib.metadata as m; print('torch', m.version('torch'), 'already in $(VENV)')" 2>/dev/null \
	  || $(PY) -m pip install -q --retries 0 --timeout 15 --extra-index-url $(TORCH_INDEX) "$(TORCH_PIN)"
	$(PY) -m pip install -q -r requirements.txt -e .
	@touch $(STAMP)

# transformers, pinned (requirements-parity.txt): the independent DeepseekV4 that tests/test_peer_parity.py checks the
# lab's modules against. Outside CI the test skips without it; .ci/run installs it, so there it always runs.
install-parity: install
	$(PY) -m pip install -q -r requirements-parity.txt

lab: install
	$(PY) -m lab walk --lang $(LAB_LANG)

notebooks: install
	$(PY) -m jupyter lab $(JUPYTER_ROOT) notebooks/00_overview.ipynb

# after a retrain or an edit: the numbers the prose quotes (from report.json, the SPS table, …), the notebooks, the
# diagrams — each regenerated from its source
sync: install
	$(PY) -m lab.sync.prose --write
	$(PY) -m lab.sync.nbsync --write
	$(PY) -m lab.sync.diagrams --write

# the notebooks' committed outputs, so they open with their figures: each notebook run once top to bottom, its figures
# kept as small PNGs (drawn by the system's chromium), long text trimmed; the run times go to docs/notebooks.json and
# docs/notebooks.md quotes them. After editing a notebook's code (nbsync --check fails until then); NB=06 runs one
NB ?=
notebook-outputs: install
	$(PY) -m lab.sync.nboutputs --write $(NB)
	$(PY) -m lab.sync.prose --write

# the suite in TEST_WORKERS processes (pytest-xdist), each test file whole in one of them (their session fixtures
# built once per process); TEST_WORKERS=0 runs it in this process, as a plain `pytest` does. -rs: the summary at the
# end lists every skipped test with its reason (README: "Why some tests skip")
TEST_WORKERS ?= 2
test: install
	@case "$(TEST_WORKERS)" in ''|*[!0-9]*) \
	  echo "TEST_WORKERS = '$(TEST_WORKERS)' is invalid: allowed an integer ≥ 0 (0: one process)" >&2; exit 2;; esac
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -rs

bench: install
	$(PY) bench/bench.py $(BENCH_ARGS)
	$(PY) bench/flash_cpu.py --walk --out runs/flash_cpu.json

# the runs the docs quote, measured again (on a quiet machine: ≈ 20 minutes) and the pages refilled from them:
# docs/speed.md from docs/bench.json, the README's and docs/real-scale.md's real-width times from docs/flash_cpu.json,
# "Lossless, exactly stated" (docs/reliability.md) from docs/bf16_lossless.json
bench-docs: install
	$(PY) bench/bench.py --out docs/bench.json
	$(PY) bench/speed_table.py
	$(PY) bench/flash_cpu.py --walk --profile --serve --out docs/flash_cpu.json
	$(PY) bench/bf16_lossless.py --flash-cpu --lab 300 --narrow 300 --out docs/bf16_lossless.json
	$(PY) -m lab.sync.prose --write

# the README's pictures (docs/img/*.png), drawn by the lab's own pages in the system's chromium (see lab/present/)
pictures: install
	$(PY) -m lab.present.pictures

# the pages' monospace face (lab/present/fonts/): a Vietnamese-complete subset of Debian's fonts-noto-mono and
# fonts-dejavu-core (apt-get install fonts-noto-mono fonts-dejavu-core first); FONT_ROOT: where they are
FONT_ROOT ?= /usr/share/fonts/truetype
fonts: install
	$(PY) -m lab.present.fonts --write --root $(FONT_ROOT)

# presenter mode for a projector: serves one page on 127.0.0.1 and prints its URL (`dspark-lab present`)
present: install
	$(PY) -m lab.present

# the printable handouts, Vietnamese and English (A4 PDFs, printed by the system's chromium): a page per column of the
# map and the 6B worksheet with its answer key, from one walk of the trained lab model; HANDOUTS_LANG: vi, en or both
HANDOUTS_LANG ?= both
handouts: install
	$(PY) -m lab.handouts --lang $(HANDOUTS_LANG) --out build/handouts

# the real-text corpus (lab/realtext/data/) from its sources, byte for byte: two Debian packages (apt-get download), the
# project's own Python at a pinned commit, generated sums, the lesson sentences; then the tokenizer trained on it.
# corpus-check rebuilds both into a temporary folder and compares (CORPUS_DEBS=DIR: .deb files already downloaded)
CORPUS_DEBS ?=
corpus: install
	$(PY) -m lab.realtext.build $(if $(CORPUS_DEBS),--debs $(CORPUS_DEBS))
	$(PY) -m lab.realtext.bpe

corpus-check: install
	$(PY) -m lab.realtext.build --check $(if $(CORPUS_DEBS),--debs $(CORPUS_DEBS))
	$(PY) -m lab.realtext.bpe --check

# the whole shipped set from scratch (≈ 90 min on 2 quiet cores), then what the docs say the model can and cannot do
# (docs/model_card.json: perplexities, sums, sample continuations) and every number the prose quotes
weights: install
	$(PY) -m lab train all --out lab/weights --force
	$(PY) bench/model_card.py --out docs/model_card.json
	$(PY) -m lab.sync.prose --write

# the DSpark paper in miniature from the set in lab/weights: runs/paper/*.json and PNGs, docs/paper.md and
# docs/paper.vi.md (≤ 60 min on 2 cores; `dspark-lab paper --quick` runs every figure's code path in a minute)
paper: install
	$(PY) -m lab paper --force

lint: install
	$(PY) -m ruff check dspark_mini lab tests bench

clean-venv:
	rm -rf $(VENV)
