"""The pages that quote measured runs say what their committed runs measured, on the weights that ship.

docs/speed.md is rendered by bench/speed_table.py from docs/bench.json (one `make bench` run); the README and
docs/real-scale.md quote docs/flash_cpu.json (one `bench/flash_cpu.py --walk --profile --serve` run) through
prose markers (tests/test_prose.py checks those). A run is never repeated here — these are measurements, not tests of
speed: the tests check that the page is the rendering of the data, that a verdict follows its number, and that the
bench run was made on the weights the repository ships (a retrain leaves no stale page: this fails until it is
measured again).
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_JSON = ROOT / "docs" / "bench.json"
FLASH_JSON = ROOT / "docs" / "flash_cpu.json"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def table():
    return load("speed_table")


@pytest.fixture(scope="module")
def run() -> dict:
    return json.loads(BENCH_JSON.read_text(encoding="utf-8"))


def test_speed_page_is_the_rendering_of_the_committed_run(table, run):
    assert (ROOT / "docs" / "speed.md").read_text(encoding="utf-8") == table.render(run)
    assert set(table.SECTIONS) <= set(run), "the committed run has every section of `make bench`"
    assert not run["conditions"]["quick"], "a --quick run is not for quoting"


def test_the_bench_run_was_made_on_the_shipped_weights(run):
    from lab.weights import file_sha256, weight_file

    for name, stamp in run["conditions"]["weights"].items():
        assert file_sha256(weight_file(name)).startswith(stamp), (
            f"docs/bench.json measured {name} {stamp}, the repository ships another: run `python bench/bench.py "
            "--out docs/bench.json` and `python bench/speed_table.py` again"
        )


def test_a_verdict_follows_its_number(table, run):
    """Move one measured value across its target: the page's verdict for it flips, the others stay."""
    page = table.render(run)
    worse = copy.deepcopy(run)
    ps = worse["generate"]["prompt_sets"]["free_form"]
    ps["gap"] = -(table.GAP_MAX + 0.01)
    line = next(v for v in table.rows(worse)[1] if v.startswith("generate ÷ the loop on short free-form"))
    assert line.endswith("**misses it**") and table.pct(ps["gap"]) in line
    ps["gap"] = table.GAP_MAX - 0.01
    line = next(v for v in table.rows(worse)[1] if v.startswith("generate ÷ the loop on short free-form"))
    assert line.endswith("meets it")
    worse["decode"]["ratio_p50"] = table.DECODE_MAX + 0.5
    assert any(v.startswith("lab ÷ plain decode step") and v.endswith("**misses it**") for v in table.rows(worse)[1])
    assert page == table.render(run)  # rendering does not change its input


def test_generate_section_compares_like_with_like(run):
    """The command and the loop ran the same prompts, as many reps, the ratio from the seconds recorded."""
    g, s = run["generate"], run["speculative"]
    for name, ps in g["prompt_sets"].items():
        assert ps["prompts"] == s["prompt_sets"][name]["prompts"]  # the speculative section's prompt sets
        for who in ("loop", "command"):
            sec = ps["seconds"][who]
            assert ps["ratio"][who] == pytest.approx(sec["plain"] / sec["speculative"], abs=1e-3)
        assert ps["gap"] == pytest.approx(ps["ratio"]["command"] / ps["ratio"]["loop"] - 1, abs=1e-3)


def test_flash_cpu_run_is_whole_and_checked():
    """The run the README quotes: both commands ended well, greedy speculative = plain, the walk's checks passed,
    each peak within 15 % of the placement estimate (bench/flash_cpu.py refuses to write a run that fails these)."""
    r = json.loads(FLASH_JSON.read_text(encoding="utf-8"))
    for name in ("generate", "walk", "profile", "serve"):
        assert r[name]["exit_code"] == 0, name
        assert abs(r["estimate_needed_bytes"] - r[name]["peak_rss_bytes"]) <= 0.15 * r[name]["peak_rss_bytes"], name
        assert r[name]["estimate_over_peak"] == pytest.approx(r["estimate_needed_bytes"] / r[name]["peak_rss_bytes"])
    assert r["generate"]["greedy_identical"] and r["generate"]["max_new_tokens"] == 8
    assert r["serve"]["tokens_equal_generate_plain"], "serve committed what plain decoding produces"
    assert r["walk"]["logits_shape_shown"] and r["walk"]["checks_passed"] >= 4 and r["walk"]["checks_failed"] == 0
    assert r["walk"]["wall_s"] <= 120, "the 6B step at the real widths was asked to take ≤ 2 minutes on 2 cores"


def test_bad_paths_are_one_line_naming_the_option(table, tmp_path, capsys):
    """A folder for the page, a missing run, a file that is not a run: exit 2, one line naming --out / --json, and
    nothing written (the folder stays as it was)."""
    page = tmp_path / "page"
    page.mkdir()
    (page / "keep.md").write_text("mine", encoding="utf-8")
    cases = [
        (["--out", str(page)], f"--out = {str(page)!r}"),
        (["--json", str(tmp_path / "missing.json"), "--out", str(tmp_path / "p.md")], "--json = "),
        (["--json", str(ROOT / "README.md"), "--out", str(tmp_path / "p.md")], "is not a run this page renders"),
    ]
    for argv, want in cases:
        assert table.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and want in err and "\n" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["keep.md", "page"]
    assert (page / "keep.md").read_text(encoding="utf-8") == "mine"
