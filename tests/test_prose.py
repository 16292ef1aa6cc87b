"""Every number the prose quotes comes from data: `python -m lab.sync.prose --check` passes on the repository, fails
(naming file, key, quoted and data value) on a stale number, knows every marker key, and leaves the markers of a data
file not written yet as they are. The screens that quote data (the 6B note, why k = 5, `train --help`) say what the
shipped report says, in both languages.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

import lab.cli as cli
from lab.lesson.notes import ece_text
from lab.lesson.view_6b import trained_note, why_k
from lab.sync import prose
from lab.text import LANGS

ROOT = Path(__file__).resolve().parents[1]
REPORT = json.loads((ROOT / "lab" / "weights" / "report.json").read_text(encoding="utf-8"))


def run(root: Path, write: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = prose.run(write=write, root=root, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def copy_data(tmp_path: Path) -> Path:
    """A repository root holding only the shipped data files (no prose yet)."""
    for rel in prose.SOURCES.values():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "docs").mkdir(exist_ok=True)
    return tmp_path


def test_check_passes_on_the_repository() -> None:
    code, out, err = run(ROOT)
    assert code == 0, err
    assert err == ""
    n = sum(len(prose.MARK.findall(p.read_text(encoding="utf-8"))) for p in prose.prose_files())
    assert n >= 100 and f"{n} quoted numbers agree" in out  # the docs' tables and the notebooks' prose are marked


def test_every_marker_key_is_known() -> None:
    for path in prose.prose_files():
        for m in prose.MARK.finditer(path.read_text(encoding="utf-8")):
            prose.find_key(m["key"])  # raises ProseError naming the key
    with pytest.raises(prose.ProseError, match="unknown marker key 'tau.nonsense'"):
        prose.find_key("tau.nonsense")


def test_a_stale_number_fails_naming_file_key_quoted_and_data(tmp_path) -> None:
    root = copy_data(tmp_path)
    want = f"{REPORT['summary']['mean_tau']['dspark']['t1']:.2f}"  # what the report says, formatted here
    wrong = f"{float(want) + 0.5:.2f}"
    doc = root / "docs" / "page.md"
    doc.write_text(f"# a page\n\nDSpark's mean τ at T = 1 is <!--n:tau.dspark.mean.t1-->{wrong}<!--/n-->.\n", "utf-8")
    code, _, err = run(root)
    assert code == 1
    assert f"docs/page.md:3: tau.dspark.mean.t1 quotes '{wrong}', the data gives '{want}'" in err
    assert "--write" in err
    code, out, _ = run(root, write=True)  # --write puts the data's value in, and then --check passes
    assert code == 0 and "wrote docs/page.md" in out
    assert doc.read_text("utf-8").endswith(f"is <!--n:tau.dspark.mean.t1-->{want}<!--/n-->.\n")
    assert run(root)[0] == 0


def test_after_a_retrain_one_write_brings_every_page_back(tmp_path) -> None:
    root = copy_data(tmp_path)
    shutil.copy(ROOT / "docs" / "training.md", root / "docs" / "training.md")  # its markers read report.json only
    report = json.loads((root / "lab" / "weights" / "report.json").read_text(encoding="utf-8"))
    report["summary"]["mean_tau"]["dspark"]["t1"] += 0.25  # a retrain moved DSpark's mean τ
    report["drafters"]["dspark"]["heldout_calibration"][4]["ece_sts"] = 0.01  # … and STS now helps at position 5
    (root / "lab" / "weights" / "report.json").write_text(json.dumps(report), encoding="utf-8")
    code, _, err = run(root)
    new_tau = f"{report['summary']['mean_tau']['dspark']['t1']:.2f}"
    assert code == 1 and f"tau.dspark.mean.t1 quotes '{REPORT['summary']['mean_tau']['dspark']['t1']:.2f}'" in err
    assert "ece.dspark.heldout.en" in err and "ratio.dspark/dflash.t1" in err  # what depends on them is stale too
    assert run(root, write=True)[0] == 0 and run(root)[0] == 0
    text = (root / "docs" / "training.md").read_text(encoding="utf-8")
    assert f"<!--n:tau.dspark.mean.t1-->{new_tau}<!--/n-->" in text
    held = report["drafters"]["dspark"]["heldout_calibration"]
    lower = []  # the run of positions where STS now helps that ends at position 5 (the one just changed)
    for h in reversed(held):
        if h["ece_sts"] >= h["ece_raw"]:
            break
        lower.insert(0, h)
    first, last = lower[0]["position"], lower[-1]["position"]
    assert last == 5 and all(h["position"] == first + i for i, h in enumerate(lower))  # one run of positions …
    pairs = ", ".join(f"{100 * h['ece_raw']:.1f} → {100 * h['ece_sts']:.1f}" for h in lower)
    where = f"position {first}" if first == last else f"positions {first}–{last}"
    assert f"lower at {where} ({pairs} %)" in text  # … and the sentence says so, with the new pairs


def test_an_unknown_key_or_value_fails_and_write_leaves_the_file(tmp_path) -> None:
    root = copy_data(tmp_path)
    doc = root / "README.md"
    text = "x <!--n:tau.nonsense-->1<!--/n--> y <!--n:tau.nobody.mean.t1-->2<!--/n-->"
    text += " z <!--n:tau.dspark.mean.t1-->0<!--/n-->\n"
    doc.write_text(text, encoding="utf-8")
    for write in (False, True):
        code, _, err = run(root, write=write)
        assert code == 1
        assert "README.md:1: unknown marker key 'tau.nonsense'" in err
        assert "'tau.nobody.mean.t1' (mean τ): lab/weights/report.json has no such value" in err
        assert doc.read_text(encoding="utf-8") == text  # a file with an error is not half-rewritten


def test_a_missing_optional_source_leaves_its_markers(tmp_path) -> None:
    root = copy_data(tmp_path)
    doc = root / "docs" / "paper.md"
    text = "Table 1: <!--n:paper.table1.dspark.t1-->?<!--/n--> vs <!--n:tau.dspark.mean.t1-->?<!--/n-->\n"
    doc.write_text(text, encoding="utf-8")
    code, out, _ = run(root, write=True)
    assert code == 0 and "1 markers left as they are" in out and "paper.table1.dspark.t1" in out
    filled = doc.read_text(encoding="utf-8")
    assert "<!--n:paper.table1.dspark.t1-->?<!--/n-->" in filled and "-->?<!--/n-->\n" not in filled
    (root / "runs" / "paper").mkdir(parents=True)  # once the run writes it, the marker is filled
    (root / "runs" / "paper" / "table1.json").write_text(json.dumps({"dspark": {"t1": 3.25}}), encoding="utf-8")
    assert run(root, write=True)[0] == 0
    assert "<!--n:paper.table1.dspark.t1-->3.25<!--/n-->" in doc.read_text(encoding="utf-8")
    (root / "runs" / "paper" / "table1.json").write_text("{", encoding="utf-8")  # a broken file: one clear line
    code, _, err = run(root)
    assert code == 1 and "docs/paper.md:1: runs/paper/table1.json is not readable data" in err
    (root / "lab" / "weights" / "report.json").unlink()  # a shipped source is required
    code, _, err = run(root)
    assert code == 1 and "lab/weights/report.json is missing" in err


def test_formats_follow_the_prose() -> None:
    assert prose.FORMATS["f2"](-0.0234) == "−0.02" and prose.FORMATS["f2"](-0.001) == "0.00"
    assert prose.FORMATS["g0"](-0.45) == "0" and prose.FORMATS["int"](2300.4) == "2,300"
    assert prose.FORMATS["lr"](0.006) == "6e-3" and prose.FORMATS["g"](1e-12) == "1e-12"
    assert prose.FORMATS["auto"](1135) == "1,135" and prose.FORMATS["auto"](3.254) == "3.25"
    assert [prose.FORMATS["prob"](p) for p in (0.8399, 0.99456, 0.999969, 1.0)] == ["0.84", "0.99", "0.99997", "1.00"]


def test_measured_values_take_their_format_from_the_key() -> None:
    """`flash_cpu.<path>:<format>`: a wall time as a person says it, bytes in GiB, a ratio as % above."""
    m = prose.MEASURED
    assert [m["min"](s) for s in (48.4, 59.6, 68.2, 125)] == ["48 s", "1 min 0 s", "1 min 8 s", "2 min 5 s"]
    assert m["gib"](11.24 * 2**30) == "11.24" and m["over"](1.055) == "5.5" and m["over"](0.9) == "−10.0"
    row, groups = prose.find_key("flash_cpu.walk.peak_rss_bytes:gib")
    assert row.source == "flash_cpu" and groups == {"path": "walk.peak_rss_bytes", "f": "gib"}
    with pytest.raises(prose.ProseError, match="unknown marker key"):
        prose.find_key("flash_cpu.walk.wall_s:hours")


# ---- the 6B note's STS sentence: from the per-position data, both languages -----------------------------------------
WORDS = {  # how ece_text names each direction, per language
    "en": {"level": "level", "lower": "lower", "higher": "higher"},
    "vi": {"level": "gần như không đổi", "lower": "thấp hơn", "higher": "cao hơn"},
}
CLAUSE = {
    "en": r"(level|lower|higher) at positions? (\d)(?:–(\d))? \(",
    "vi": r"(gần như không đổi|thấp hơn|cao hơn) ở (?:các )?vị trí (\d)(?:–(\d))? \(",
}


def directions(text: str, lang: str) -> dict[int, str]:
    """position → "level" / "lower" / "higher", read back from the sentence."""
    back = {v: k for k, v in WORDS[lang].items()}
    found = {}
    for word, a, b in re.findall(CLAUSE[lang], text.split(";")[0]):
        for p in range(int(a), int(b or a) + 1):
            found[p] = back[word]
    return found


def test_ece_text_on_known_rows() -> None:
    rows = [(0.078, 0.0781), (0.067, 0.061), (0.087, 0.065), (0.074, 0.043), (0.051, 0.061)]
    assert ece_text(rows, "en") == (
        "level at position 1 (7.8 %), lower at positions 2–4 (6.7 → 6.1, 8.7 → 6.5, 7.4 → 4.3 %) and higher at "
        "position 5 (5.1 → 6.1 %); summed over positions 1–5: 35.7 → 30.8 (lower)"
    )
    assert ece_text(rows, "vi") == (
        "gần như không đổi ở vị trí 1 (7.8 %), thấp hơn ở các vị trí 2–4 (6.7 → 6.1, 8.7 → 6.5, 7.4 → 4.3 %) và cao "
        "hơn ở vị trí 5 (5.1 → 6.1 %); tổng trên các vị trí 1–5: 35.7 → 30.8 (thấp hơn)"
    )
    one = ece_text([(0.1, 0.2)], "en")
    assert one == "higher at position 1 (10.0 → 20.0 %); summed over positions 1–1: 10.0 → 20.0 (higher)"
    # the same direction apart is two clauses, never one range over a position that went the other way
    apart = ece_text([(0.1, 0.05), (0.1, 0.2), (0.1, 0.05)], "en")
    assert directions(apart, "en") == {1: "lower", 2: "higher", 3: "lower"}


@pytest.mark.parametrize("lang", LANGS)
def test_the_6b_note_says_what_the_heldout_data_says(lang) -> None:
    rows = REPORT["drafters"]["dspark"]["heldout_calibration"]
    want = {}
    for row in rows:  # the direction per position, reasoned here from the raw numbers (equal at 0.1 %: level)
        raw, sts = round(100 * row["ece_raw"], 1), round(100 * row["ece_sts"], 1)
        want[row["position"]] = "level" if raw == sts else "lower" if sts < raw else "higher"
    note = trained_note(lang)
    assert directions(note, lang) == want
    for row in rows:
        raw, sts = f"{100 * row['ece_raw']:.1f}", f"{100 * row['ece_sts']:.1f}"
        assert (f"{raw} → {sts}" if raw != sts else f"({raw} %)") in note
    total = (sum(r["ece_raw"] for r in rows), sum(r["ece_sts"] for r in rows))
    assert f"{100 * total[0]:.1f} → {100 * total[1]:.1f}" in note
    assert f" {rows[0]['n']} " in note  # the rounds it was judged on


@pytest.mark.parametrize("lang", LANGS)
def test_why_k_quotes_the_shipped_ratio(lang) -> None:
    mean = REPORT["summary"]["mean_tau"]
    text = why_k(lang)
    for t in ("t1", "greedy"):
        assert f"{mean['dspark'][t] / mean['dflash'][t]:.2f}×" in text
    assert "1.30×" not in text


@pytest.mark.parametrize("lang", LANGS)
def test_the_6b_note_names_the_fastest_drafter_from_the_report(lang) -> None:
    from lab.lesson.view_6b import fastest
    from lab.weights import DRAFTER_LABEL

    means = {d: sum(v.values()) / len(v) for d, v in REPORT["summary"]["tokens_per_s_ratio"].items()}
    best = max(means, key=means.get)
    text = fastest(lang)
    assert text.count(DRAFTER_LABEL[best]) == 1 and f"{means[best]:.2f}" in text
    assert f"{means['dspark']:.2f}" in text and "flash-cpu" in text  # and what is (not) measured at real widths


def test_train_help_defaults_are_the_shipped_recipe(capsys) -> None:
    from dspark_mini import get_config
    from lab.training.rebuild import Recipe

    recipe = REPORT["recipe"]  # what built lab/weights; today's Recipe must still say the same
    fields = ("target_lr", "draft_lr", "target_batch", "draft_batch", "target_seq_len", "draft_context")
    assert {f: recipe[f] for f in fields} == {f: getattr(Recipe(), f) for f in fields}
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"target {recipe['target_lr']:g}, every drafter {recipe['draft_lr']:g}" in text
    assert f"target {recipe['target_batch']}, every drafter {recipe['draft_batch']}" in text
    k = get_config("lab").dspark_block_size
    window = recipe["draft_context"] + k + 1  # the target cache's windows (training/rebuild.py's cache_spec)
    rows = {"eagle3": window - k, "mtp1": window - 2}  # the rows each baseline trains, as `train all` passes them
    for what, kind in [("target", None), *(("draft", x) for x in ("dspark", "dspark-rnn", "dflash", *rows))]:
        args = cli.parser().parse_args(["train", what] + (["--kind", kind] if kind else []))
        cli.check_args(args)
        group = "target" if what == "target" else "draft"
        seq = recipe["target_seq_len"] if what == "target" else rows.get(kind, recipe["draft_context"])
        assert (args.lr, args.batch, args.seq_len) == (recipe[f"{group}_lr"], recipe[f"{group}_batch"], seq), kind
    args = cli.parser().parse_args(["train", "draft", "--lr", "0.01", "--batch", "3", "--seq-len", "40"])
    cli.check_args(args)  # what is given is kept
    assert (args.lr, args.batch, args.seq_len) == (0.01, 3, 40)
