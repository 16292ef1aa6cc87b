"""The notebooks: in sync with their py:percent sources (and their committed outputs made from the current code),
executed top to bottom headless, deterministic. They are executed in memory: the committed files are never written.

Each notebook asserts its own key numbers in probe cells (an `assert` that fails the execution), so
running it is a test of what it teaches. Wall time per notebook is recorded for the ≤ 60 s budget.

Every notebook is executed once, top to bottom, in its own fresh kernel (`test_notebook_runs_top_to_bottom`).
Determinism (same seed → the same printed numbers) is then checked against that run's output without executing
any notebook a second time on its own:
- the cheap notebooks (all but 06 and 07) run a second time together, back to back in ONE other fresh kernel
  (one kernel start and one set of imports instead of seven; every cell that prints is re-executed). What makes
  a notebook print different numbers under the same seed is a property of the process, not of the amount of
  work: an unseeded generator (Python's, NumPy's and torch's global generators are seeded from the OS in every
  new process), hash order (another PYTHONHASHSEED), the clock or the machine. A second process sees all of
  them; sharing it with the other notebooks only adds state they leave behind (a used global generator);
- 06 and 07 spend 90 % of their time in a few seeded computations; those are re-computed here, in this process
  (another process again: other hash seed, other global generator state), with the notebook's settings, and
  the numbers must equal what the notebook printed. Everything else they print comes from the config or from
  files (the shipped report), or is pinned inside the notebook by a probe against the report — see
  `RECOMPUTED` for what each re-computation covers and why the rest needs no second run.
Comparisons are on what the student reads: each code cell's stdout joined into one text, never on how the
kernel chunked it.
"""

from __future__ import annotations

import re
import time

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from lab.sync.nbsync import NOTEBOOKS, check_all, problems, sources

NB_TIMEOUT_S = 240  # per cell; the budget for a whole notebook is 60 s on 2 cores (measured, reported)


# the right answer of each notebook's exercise, injected in place of `answer = None`
ANSWERS = {
    "00_overview": '"4A"',
    "01_input_engram_mhc": "24",
    "02_ced_csa2": "18",
    "03_mla_kv": "712",
    "04_moe": "1.5",
    "05_step_6B": "3",
    "06_lossless": "0.25",
    "07_train_and_compare": "2.7",
    "08_scheduler": "[2, 1]",
    "09_real_scale": "1968",
    "10_paper": "1.134",
}


def prepare(path, lang: str | None = None, answer: str | None = None) -> nbformat.NotebookNode:
    """The notebook as a reader runs it: the exercise answered (`answer`), the language switched (`lang`)."""
    nb = nbformat.read(path, as_version=4)
    if answer is not None:
        cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("answer = None"))
        cell.source = f"answer = {answer}"
    if lang is not None:  # the language switch at the top of every notebook
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert 'LANG = "en"' in first.source, f"{path.name}: the first code cell must hold the LANG switch"
        first.source = first.source.replace('LANG = "en"', f'LANG = "{lang}"', 1)
    return nb


def run(nb: nbformat.NotebookNode) -> float:
    """Execute `nb` in place in a fresh kernel (working directory: notebooks/); → seconds."""
    t = time.perf_counter()
    NotebookClient(
        nb, timeout=NB_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    return time.perf_counter() - t


def execute(path, lang: str | None = None, answer: str | None = None) -> tuple[nbformat.NotebookNode, float]:
    nb = prepare(path, lang, answer)
    return nb, run(nb)


def printed(nb) -> list[str]:
    """Everything the notebook printed (stream outputs), in order, as the kernel chunked it.

    How a kernel splits its output into chunks depends on timing: compare `read(nb)`, not these chunks."""
    return [
        o["text"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    ]


def read_cells(cells) -> list[str]:
    """Each code cell's stdout joined into one text (chunking does not matter)."""
    return [
        "".join(
            o["text"] for o in c.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        for c in cells
        if c.cell_type == "code"
    ]


def read(nb) -> list[str]:
    """What the student reads: each code cell's stdout joined into one text (chunking does not matter)."""
    return read_cells(nb.cells)


def numbers(text: str) -> list[str]:
    """The numbers in a printed text, as printed (ASCII digits: χ² and ℓ₀ are not numbers)."""
    return re.findall(r"-?[0-9]+(?:\.[0-9]+)?", text)


def test_notebooks_exist_and_are_in_sync() -> None:
    names = [p.stem for p in sources()]
    assert names, "no notebooks found"
    assert check_all() == [], (
        f"{problems()}: run python -m lab.sync.nbsync --write, then make notebook-outputs for a notebook whose code "
        "changed"
    )


def test_every_notebook_has_an_answer_key() -> None:
    assert sorted(ANSWERS) == [p.stem for p in sources()]


RUNS: dict[str, nbformat.NotebookNode] = {}  # notebook → its one executed copy (shared with the determinism tests)


def first_run(source) -> nbformat.NotebookNode:
    """The notebook executed once with the right answer (cached: each notebook runs once per session)."""
    if source.stem not in RUNS:
        nb, seconds = execute(source.with_suffix(".ipynb"), answer=ANSWERS[source.stem])
        print(f"{source.stem}: {seconds:.1f} s")
        RUNS[source.stem] = nb
    return RUNS[source.stem]


@pytest.mark.parametrize("source", sources(), ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(source) -> None:
    """Runs with the exercise answered correctly: every probe holds and the check says ✓."""
    nb = first_run(source)
    said = [t for t in read(nb) if t]
    assert "Traceback" not in "".join(said)
    last_code = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert "check(" in last_code.source, "every notebook ends with an exercise checked by code"
    assert said[-1].startswith("✓"), f"{source.stem}: the exercise check did not accept the right answer"
    assert len(nb.cells) >= 6


# ---- determinism -----------------------------------------------------------------------------------------------
def cell_printing(nb, marker: str) -> str:
    """The joined stdout of the one code cell whose source contains `marker`."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    hits = [t for c, t in zip(code, read(nb), strict=True) if marker in c.source]
    assert len(hits) == 1, f"expected one code cell containing {marker!r}, found {len(hits)}: update the test"
    return hits[0]


def recompute_06(nb) -> list[tuple[str, str, list[str]]]:
    """06's residual cell, re-computed with the notebook's settings: the lab model from SEED, the prompts from a
    generator seeded with SEED, the sharpened head's p_t after anchor 7, 20 000 drafts from p_d ∝ p_t³ and
    verify_block with and without the residual, all from one generator seeded with SEED.

    It re-draws every seeded input the notebook's other numbers rest on (the model and the prompts: the greedy
    race that prints "rounds" uses nothing else, greedy draws no random number) and the seeded sampling of
    verify; the χ² of the 2000-copy DSpark round (13 of the notebook's 28 s) is the same verify with the same
    seeded generator after a seeded draft (tests/test_dspark.py::test_seeded_sampling_is_deterministic)."""
    from dspark_mini import build_model, get_config
    from dspark_mini.speculative import token_distribution, verify_block
    from lab.evaluation.profiling import chi_square_test

    seed, anchor, n_drafts = 0, 7, 20000
    cfg = get_config("lab", dspark_block_size=5)
    model = build_model(cfg, seed=seed)
    prompts = torch.randint(4, cfg.vocab_size, (12, 10), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        model.head.weight.mul_(4.0)
        p_t = token_distribution(model(torch.cat([prompts[:1], torch.tensor([[anchor]])], 1)).logits[0, -1], 1.0)
    p_d = p_t**3 / (p_t**3).sum()
    rows = torch.stack([p_t, p_t])
    g = torch.Generator().manual_seed(seed)
    drafts = torch.multinomial(p_d, n_drafts, replacement=True, generator=g)

    def committed(residual: bool) -> torch.Tensor:
        out = []
        for x in drafts:
            v = verify_block(x.view(1), p_d.view(1, -1), rows, g, residual=residual)
            out.append(int(x) if v.n_accepted == 1 else v.next_token)
        return torch.tensor(out)

    good, broken = chi_square_test(committed(True), p_t), chi_square_test(committed(False), p_t)
    want = [f"{t[k]:.1f}" for t in (good, broken) for k in ("statistic", "critical")]
    return [("def committed(", cell_printing(nb, "def committed("), want)]


def recompute_07(nb) -> list[tuple[str, str, list[str]]]:
    """07's live part (b), re-computed with the notebook's settings: DSpark and DFlash, greedy, the first FEW of the
    report's held-out prompts of the notebook's DOMAIN (both read from its `DOMAIN, FEW = …` line), one at a time
    and in a lockstep batch of FEW → τ and commits per round.

    Its line (a) (DSpark, all the report's prompts of that domain, one at a time) is compared inside the notebook by
    a probe with the report (τ to 1e-9, the same number of rounds, every conditional acceptance): a run that printed
    other numbers there fails already. Every other number 07 prints is read from the shipped report.json."""
    from lab.evaluation.quality import collect_rounds, eval_prompts, summarize
    from lab.weights import load_drafter, report

    r = report()["recipe"]
    code = next(c.source for c in nb.cells if c.cell_type == "code" and "DOMAIN, FEW" in c.source)
    setting = re.search(r'^DOMAIN, FEW = "([a-z]+)", (\d+)$', code, re.M)
    assert setting, '07 should set `DOMAIN, FEW = "<domain>", <n>` on one line: update the test'
    domain, few = setting.group(1), int(setting.group(2))
    prompts = eval_prompts(domain, r["eval_prompts"], seed=r["seed"])[:few]  # the first FEW of the report's prompts
    out = []
    for name in ("dspark", "dflash"):
        model, drafter = load_drafter(name)
        want = []
        for batch in (1, few):
            rounds = collect_rounds(model, drafter, prompts, r["max_new_tokens"], 0.0, r["seed"], batch=batch)
            commits = sum(len(x.committed) for x in rounds) / len(rounds)
            want += [str(few), f"{summarize(rounds)['tau']:.2f}", f"{commits:.2f}"]
        lines = [ln for ln in cell_printing(nb, "DOMAIN, FEW").splitlines() if ln.startswith(f"(b) {name} ")]
        assert len(lines) == 1, f"07 should print one '(b) {name}' line: update the test"
        out.append((f"(b) {name}", lines[0], want))
    return out


# notebook → the re-computation of its expensive seeded cells: [(what, printed text, the numbers it must hold)]
RECOMPUTED = {"06_lossless": recompute_06, "07_train_and_compare": recompute_07}
SHARED = [s for s in sources() if s.stem not in RECOMPUTED]  # the notebooks re-run together in one kernel
VI = "00_overview · vi, unanswered"  # the language switch, run in the same second kernel


@pytest.fixture(scope="module")
def second_kernel() -> dict[str, list[str]]:
    """Every cheap notebook (and 00 in Vietnamese with the exercise unanswered) executed back to back in one fresh
    kernel; → per notebook, what each of its code cells printed (the first runs are separate kernels)."""
    parts = [(s.stem, prepare(s.with_suffix(".ipynb"), answer=ANSWERS[s.stem])) for s in SHARED]
    parts.append((VI, prepare(NOTEBOOKS / "00_overview.ipynb", lang="vi")))
    cells, spans = [], {}
    for name, nb in parts:
        code = [c for c in nb.cells if c.cell_type == "code"]
        spans[name] = (len(cells), len(cells) + len(code))
        cells += code
    for i, cell in enumerate(cells):
        cell["id"] = f"second-{i:03d}"  # 00 runs twice in it: cell ids must stay unique
    together = nbformat.v4.new_notebook(cells=cells, metadata=parts[0][1].metadata)
    seconds = run(together)
    print(f"{len(parts)} notebooks in one kernel: {seconds:.1f} s")
    said = read(together)
    return {name: said[a:b] for name, (a, b) in spans.items()}


def test_unanswered_exercise_asks_for_an_answer_in_vietnamese(second_kernel) -> None:
    """00 with LANG = "vi" and no answer, run in the shared second kernel (its own cells, top to bottom, with LANG
    and SEED set again by its first cell). Can still fail: a label or the exercise prompt not switched to
    Vietnamese, or any cell raising, fails it as a kernel of its own would."""
    said = [t for t in second_kernel[VI] if t]
    assert said[-1].startswith("… hãy viết câu trả lời")
    assert "Đầu vào, Engram & mHC" in "".join(said)  # the column labels follow the language switch


@pytest.mark.parametrize("source", sources(), ids=lambda p: p.stem)
def test_same_seed_prints_the_same_numbers(source, request) -> None:
    """A second run prints exactly what the first printed (same seed, same numbers): the whole notebook again in
    another fresh kernel, or, for 06 and 07, their seeded computations again in this process.
    Can still fail: any printed number that depends on more than the notebook's seed and files (an unseeded
    generator, hash order, the clock) differs between the two processes; 06/07's re-computed cells draw all of
    their randomness again from the seeds."""
    first = first_run(source)
    assert sum(bool(t) for t in read(first)) >= 2, f"{source.stem}: too little printed to compare"
    if source.stem in RECOMPUTED:
        checks = RECOMPUTED[source.stem](first)
        assert checks
        for what, text, want in checks:
            assert numbers(text) == want, (source.stem, what, text)
    else:
        assert request.getfixturevalue("second_kernel")[source.stem] == read(first)
