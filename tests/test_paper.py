"""`dspark-lab paper`: --quick runs every item's code path; each record's structure and invariants, checked against
independent reasoning (Appendix A's numbers by hand, τ bounds, the threshold sweep's monotone counts, the load
simulation's identities); the lab's domains (en, vi, code, sums) and the paper's (math, code, chat) each under their
own names, set side by side only through the one stated correspondence; the committed docs/paper.md and paper.vi.md
are what the generator writes from the committed runs/paper JSON; `--help` imports no torch; bad options are one
line and exit code 2.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dspark_mini import get_config
from lab.cli import main
from lab.paper import docs
from lab.paper.run import ITEMS, dflash_depth, paper_values
from lab.paper.texts import PAPER_DOMAIN_OF, lab_domain, paper_domain
from lab.realtext import DOMAINS
from lab.weights import DRAFTERS

ROOT = Path(__file__).resolve().parent.parent
K = 5  # the lab's trained block (lab preset dspark_block_size)
PAPER_DOMAINS = ("math", "code", "chat")  # the paper's own: means over its benchmarks (paper_values.json)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Path:
    """One --quick run (one process, no PNGs) into a temporary folder, its pages beside it."""
    out = tmp_path_factory.mktemp("paper")
    rc = main(["paper", "--quick", "--out", str(out), "--docs", str(out / "docs"), "--jobs", "1", "--no-pictures"])
    assert rc == 0
    return out


def item(folder: Path, name: str) -> dict:
    return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))


def test_every_item_is_written_with_the_papers_section_and_the_run_conditions(quick) -> None:
    values = paper_values()
    for name in ITEMS:
        it = item(quick, name)
        assert it["item"] == name
        assert it["section"] == values[name]["section"] and it["paper"]["section"] == values[name]["section"]
        c = it["conditions"]
        assert c["seed"] == 0 and c["budget"]["name"] == "quick" and c["threads_per_job"] == 1
        assert "target.safetensors" in c["weights_sha256"] and c["run_seconds"] > 0


def test_table1_has_every_drafter_in_every_domain(quick) -> None:
    it = item(quick, "table1")
    tau = it["lab"]["tau"]
    assert set(tau) == set(DRAFTERS)
    for name, by in tau.items():
        most = 2 if name == "mtp1" else K + 1  # kept drafts + the target's own token
        for d in DOMAINS:
            for t in ("t1", "greedy"):
                assert 1.0 <= by[d][t] <= most, (name, d, t)
        assert list(by) == [*DOMAINS, "mean"]  # the lab's own domains, never the paper's
        assert by["mean"]["t1"] == pytest.approx(sum(by[d]["t1"] for d in DOMAINS) / len(DOMAINS))
    r = it["lab"]["ratios"]["dspark/dflash"]["t1"]
    assert r == pytest.approx(tau["dspark"]["mean"]["t1"] / tau["dflash"]["mean"]["t1"])
    # the paper's domain means, computed from its table: Qwen3-4B DSpark math = (6.11 + 5.70 + 4.89) / 3
    assert it["paper"]["domain_means"]["Qwen3-4B"]["dspark"]["math"] == pytest.approx(5.5667, abs=1e-4)
    for by in it["paper"]["domain_means"].values():  # the paper's own domains, never the lab's
        assert all(list(m) == [*PAPER_DOMAINS, "mean"] for m in by.values())
    assert it["paper"]["ratios"]["Qwen3-4B"]["dspark/dflash"] == pytest.approx(1.163, abs=1e-3)  # "+16.3 %"


def test_fig2_conditional_acceptance_is_a_probability_per_position(quick) -> None:
    lab = item(quick, "fig2")["lab"]["cond_accept"]
    for t in ("t1", "greedy"):
        for d in DOMAINS:
            assert set(lab[t][d]) == set(DRAFTERS)
            for name, cond in lab[t][d].items():
                assert len(cond) == (1 if name == "mtp1" else K)
                assert all(c is None or 0.0 <= c <= 1.0 for c in cond), (name, d, cond)
                seen = [c is not None for c in cond]
                assert seen == sorted(seen, reverse=True)  # a position is reached only after the one before it


def test_fig3_and_fig4_variants_share_one_target_cache_and_budget(quick) -> None:
    f3, f4 = item(quick, "fig3")["lab"], item(quick, "fig4")["lab"]
    cfg = get_config("lab")
    df = dflash_depth(None, cfg)  # the shipped DFlash's draft layers, read from its file
    assert f3["layers"] == [1, 2, 3] and f3["block"] == K and f3["depth"] == cfg.n_mtp_layers
    assert f3["dflash_depth"] == f4["dflash_depth"] == df and f4["depth"] == cfg.n_mtp_layers
    runs = f3["runs"]
    assert set(runs) == {"dspark_1L", "dspark_2L", "dspark_3L", f"dflash_{df}L"}
    assert runs[f"dflash_{df}L"]["layers"] == df and all(runs[f"dspark_{n}L"]["layers"] == n for n in (1, 2, 3))
    assert len({r["target_cache_hash"] for r in runs.values()}) == 1
    assert len({(r["steps"], r["tokens_seen"]) for r in runs.values()}) == 1
    params = [runs[f"dspark_{n}L"]["draft_parameters"] for n in (1, 2, 3)]
    assert params[0] < params[1] < params[2] and params[2] - params[1] == params[1] - params[0]  # one layer each
    assert 3 in f4["blocks"] and K in f4["blocks"] and max(f4["blocks"]) == 8  # 8 = the lab's window
    for k in f4["blocks"]:
        pair = f4["runs"][str(k)]
        assert pair["dspark"]["layers"] == cfg.n_mtp_layers and pair["dflash"]["layers"] == df  # each kind's depth
        assert pair["dspark"]["block"] == pair["dflash"]["block"] == k
        assert pair["dspark"]["target_cache_hash"] == pair["dflash"]["target_cache_hash"]
        assert pair["dspark"]["tokens_seen"] == pair["dflash"]["tokens_seen"]
        for d in DOMAINS:
            tau = f4["tau"][str(k)]
            want = 100 * (tau["dspark"][d]["t1"] / tau["dflash"][d]["t1"] - 1)
            assert f4["gain_percent"][str(k)]["t1"][d] == pytest.approx(want)
            assert 1.0 <= tau["dspark"][d]["t1"] <= k + 1


def test_fig5_threshold_sweep_is_monotone(quick) -> None:
    lab = item(quick, "fig5")["lab"]
    for d in DOMAINS:
        s = lab["sweep"][d]
        assert [r["threshold"] for r in s] == sorted(r["threshold"] for r in s)
        for a, b in zip(s, s[1:], strict=False):  # a higher threshold verifies a prefix of what a lower one did
            assert b["verified_per_round"] <= a["verified_per_round"] and b["tau"] <= a["tau"]
        for r in s:
            assert 1.0 <= r["tau"] <= r["verified_per_round"] <= K + 1
            assert r["verify_rate"] == pytest.approx(r["tau"] / r["verified_per_round"])
        assert lab["verified_non_increasing"][d] is True


def test_fig6_reliability_is_consistent(quick) -> None:
    lab = item(quick, "fig6")["lab"]
    assert len(lab["ece"]) == K and len(lab["temperatures"]) == K
    for row, again in zip(lab["ece"], lab["ece_recomputed"], strict=True):
        assert 0.0 <= row["ece_raw"] <= 1.0 and 0.0 <= row["ece_sts"] <= 1.0
        assert row["ece_raw"] == pytest.approx(again["ece_raw"]) and row["ece_sts"] == pytest.approx(again["ece_sts"])
    for name in ("raw", "sts"):
        for bins in lab["diagram"][name]:
            assert sum(b["n"] for b in bins) == lab["rounds"]
            assert all(0.0 <= b["predicted"] <= 1.0 and 0.0 <= b["observed"] <= 1.0 for b in bins)


def test_fig7_and_fig8_load_curves(quick) -> None:
    f7, f8 = item(quick, "fig7")["lab"], item(quick, "fig8")["lab"]
    for name, pts in f7["curves"].items():
        for p in pts:
            assert p["per_user_tok_s"] * p["requests"] == pytest.approx(p["aggregate_tok_s"])
            assert 1.0 <= p["verify_budget"] <= (2 if name == "mtp1" else K + 1)
    assert all(p["verify_budget"] == 2.0 for p in f7["curves"]["mtp1"])  # MTP-1 always verifies its one draft
    assert all(p["verify_budget"] == K + 1 for p in f7["curves"]["dspark/fixed"])
    assert f8["budget"]["dspark/dspark"] == [
        {"requests": p["requests"], "verify_budget": p["verify_budget"]} for p in f7["curves"]["dspark/dspark"]
    ]
    for g in f7["matched_gain"]["dspark"]:
        assert g["gain"] == pytest.approx(g["per_user"] / g["per_user_base"] - 1)


def test_appendix_a_numbers_come_out_of_the_scheduler(quick) -> None:
    lab = item(quick, "appendix_a")["lab"]
    # by hand: Θ_n = (1 + a_1 + … + a_n) · SPS(1 + n), a = (0.8, 0.8 · c2)
    assert lab["branches"]["A"]["theta"] == pytest.approx([1.0, 1.8 * 0.5, (1.8 + 0.72) * 0.45], abs=1e-12)
    assert lab["branches"]["B"]["theta"] == pytest.approx([1.0, 0.9, 1.8 * 0.45], abs=1e-12)
    assert round(lab["branches"]["A"]["theta"][2], 3) == 1.134 and round(lab["branches"]["B"]["theta"][2], 2) == 0.81
    early, retro = lab["policies"]["dspark"], lab["policies"]["retrospective"]
    assert early["verify_len"] == {"A": 0, "B": 0}  # Θ1 < Θ0: stop before reading c2
    assert retro["verify_len"] == {"A": 2, "B": 0}  # reads c2, i.e. x1's value
    assert early["exact"] == pytest.approx([0.7, 0.3], abs=1e-12)  # the target's own law
    assert retro["exact"] == pytest.approx([0.5 * 1 + 0.5 * 0.7, 0.5 * 0.3], abs=1e-12)  # (0.85, 0.15)
    for p in (early, retro):  # sampled through verify_block: within 5 standard errors
        se = math.sqrt(0.25 / p["samples"])
        assert abs(p["sampled"][0] - p["exact"][0]) < 5 * se


def test_pages_are_generated_from_the_json(quick) -> None:
    en = (quick / "docs" / "paper.md").read_text(encoding="utf-8")
    vi = (quick / "docs" / "paper.vi.md").read_text(encoding="utf-8")
    for name in ITEMS:
        sec = item(quick, name)["section"]
        assert sec in en and sec.replace("Table", "Bảng").replace("Figure", "Hình").replace("Appendix", "Phụ lục") in vi
    assert "Bài báo DSpark thu nhỏ" in vi and "paper in miniature" in en
    cfg = get_config("lab")  # the intro: what the lab is, its sizes from the run's conditions
    vocab, layers = f"{cfg.vocab_size:,}", cfg.n_mtp_layers
    assert "trained on real text — English and Vietnamese prose, Python code and multi-digit sums" in en
    assert f"a vocabulary of {vocab} tokens and a {layers}-layer DSpark draft" in en
    assert "huấn luyện trên văn bản thật — văn xuôi tiếng Anh và tiếng Việt, mã Python và phép cộng nhiều" in vi
    assert f"bộ từ vựng {vocab} token và bộ vẽ nháp DSpark {layers} lớp" in vi
    assert "toy" not in en and "đồ chơi" not in vi
    t1 = item(quick, "table1")["lab"]["tau"]["dspark"]["mean"]["t1"]
    assert f"{t1:.2f}" in en and f"{t1:.2f}" in vi
    assert not list(quick.glob("*.png"))  # --no-pictures
    assert "![" not in en  # no picture, no link


def test_lab_and_paper_domains_each_keep_their_own_names(quick) -> None:
    """The lab's tables show en, vi, code, sums under their labels in the page's language, the paper's rows its
    math, code, chat; the correspondence (sums ↔ math, code ↔ code, en and vi ↔ chat) is stated once as a table and
    Figure 2 sets each lab domain beside exactly that paper domain."""
    assert PAPER_DOMAIN_OF["sums"] == "math" and PAPER_DOMAIN_OF["code"] == "code"
    assert PAPER_DOMAIN_OF["en"] == PAPER_DOMAIN_OF["vi"] == "chat"
    labels = {"en": ("English", "Vietnamese", "code", "sums"), "vi": ("tiếng Anh", "tiếng Việt", "mã", "phép cộng")}
    paper_labels = {"en": ("math", "code", "chat"), "vi": ("toán", "code", "chat")}
    for lang, page in docs.PAGES.items():
        text = (quick / "docs" / page).read_text(encoding="utf-8")
        lines = text.splitlines()
        assert tuple(lab_domain(d, lang) for d in DOMAINS) == labels[lang]
        assert tuple(paper_domain(d, lang) for d in PAPER_DOMAINS) == paper_labels[lang]
        for d in DOMAINS:  # the correspondence, once
            row = f"| {lab_domain(d, lang)} (`{d}`) | {paper_domain(PAPER_DOMAIN_OF[d], lang)} |"
            assert sum(line.startswith(row) for line in lines) == 1, (lang, row)
        # Table 1: the lab's header holds the lab's domains, the paper's header the paper's
        lab_head = f"| {docs.P('drafter', lang)} | " + " | ".join(labels[lang]) + f" | {docs.P('mean', lang)} |"
        paper_head = f"| {docs.P('drafter', lang)} | " + " | ".join(paper_labels[lang]) + f" | {docs.P('mean', lang)} |"
        assert any(line.startswith(lab_head) for line in lines) and paper_head in lines, lang
        # Figure 2: under each lab domain, the paper's rows name the paper domain it is set beside
        paper = docs.P("paper", lang)
        for d in DOMAINS:
            pd = paper_domain(PAPER_DOMAIN_OF[d], lang)
            start = lines.index(f"**{lab_domain(d, lang)}** · {paper}: {pd}")
            block = lines[start + 2 : lines.index("", start + 2)]
            rows = [line for line in block if f"({paper}" in line]
            assert len(rows) == 3 and all(f"({paper}, {pd})" in line for line in rows), (lang, d, rows)
    from lab.paper.figures import figure  # Figure 2's panels: one a lab domain, its paper domain's curves dotted

    it = item(quick, "fig2")
    fig = figure(it, "en")
    assert [a.text for a in fig.layout.annotations] == [
        f"{lab_domain(d, 'en')} ↔ {PAPER_DOMAIN_OF[d]}" for d in DOMAINS
    ]
    for i, d in enumerate(DOMAINS):
        axis = "x" if i == 0 else f"x{i + 1}"
        dotted = [list(t.y) for t in fig.data if t.xaxis == axis and t.line.dash == "dot"]
        assert dotted == list(it["paper"]["cond_accept"][PAPER_DOMAIN_OF[d]].values()), d


def test_every_figure_is_drawn_in_both_languages(quick) -> None:
    from lab.paper.figures import BUILDERS, figure

    for name in BUILDERS:
        en, vi = figure(item(quick, name), "en"), figure(item(quick, name), "vi")
        assert len(en.data) == len(vi.data) > 0, name
        assert en.layout.title.text != vi.layout.title.text, name  # the labels follow --lang


def test_committed_pages_are_what_the_generator_writes() -> None:
    """docs/paper.md and paper.vi.md against the generator run on the committed runs/paper (rerun
    `dspark-lab paper --docs-only` after a run)."""
    folder, out = ROOT / "runs" / "paper", ROOT / "docs"
    items = docs.read_items(folder)
    for lang, page in docs.PAGES.items():
        assert (out / page).read_text(encoding="utf-8") == docs.render(items, lang, folder, out), page
    for name in ITEMS:  # every committed figure is linked, and every link has its PNG
        for lang in ("en", "vi"):
            png = folder / (f"{name}.png" if lang == "en" else f"{name}.{lang}.png")
            assert png.is_file() == (name != "appendix_a"), png


def test_help_imports_no_torch() -> None:
    code = "import sys, lab.cli; lab.cli.parser().parse_args(['paper', '--quick']); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "--jobs = 0 is invalid"),
        (["--docs-only", "--out", "no/such/folder"], "--out = 'no/such/folder' is not a folder"),
        (["--weights-dir", "no/such/set"], "--weights-dir = 'no/such/set' is not a folder"),
    ],
)
def test_bad_options_are_one_line(argv, message, capsys) -> None:
    assert main(["paper", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_the_shipped_page_is_the_full_run_of_the_shipped_set() -> None:
    """docs/paper.md, paper.vi.md and notebook 10 read runs/paper: every item there is the full budget's, measured on
    the very weights lab/weights holds (a retrain or a --quick run written over them fails here: run `make paper`)."""
    from lab.paper.run import budget
    from lab.weights import WEIGHTS_DIR, read_manifest

    full = budget("full", 0)
    shipped = {k: v["sha256"][:16] for k, v in sorted(read_manifest(WEIGHTS_DIR).items())}
    for name in ITEMS:
        c = item(ROOT / "runs" / "paper", name)["conditions"]
        assert c["budget"]["name"] == "full" and c["budget"]["draft"]["steps"] == full.draft.steps, name
        assert c["weights_sha256"] == shipped, name
    for page, words in (("paper.md", "Run: budget `full`"), ("paper.vi.md", "ngân sách `full`")):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert words in text and "`quick`" not in text, page
