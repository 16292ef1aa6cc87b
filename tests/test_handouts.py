"""The printable handouts (lab/handouts/): both languages build with the same structure, the Vietnamese ones hold no
English label, every number equals the data it comes from (the walk's views, the config, verify's rule and the
portable generator's draws), and chromium prints each column summary on exactly one A4 page and the worksheet on two,
no text below a printable size.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from dspark_mini.portable_random import PortableGenerator, accept, accept_ratio, uniform
from lab.handouts.build import handout_pages, pdf_pages, print_with
from lab.handouts.data import fixed, shown, worksheet
from lab.lesson.steps import COLUMNS, STEP_IDS, STEPS
from lab.lesson.walk import build_views, run_walk
from lab.text import LANGS, UI, lang_table, lang_tables

SUMMARIES = [f"column-{c.id}" for c in COLUMNS]
MIN_PX = 8 * 96 / 72  # 8 pt: the smallest text a printed page may hold


@pytest.fixture(scope="module")
def walk():
    return run_walk(lang="en")


@pytest.fixture(scope="module")
def pages(walk):
    return handout_pages(walk, LANGS)


@pytest.fixture(scope="module")
def sheet(walk):
    return worksheet(walk)


class Skeleton(HTMLParser):
    """A page's tags with their classes and data attributes, in order (the text left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, *sorted((k, v) for k, v in attrs if k == "class" or k.startswith("data-"))))


def skeleton(page: str) -> list[tuple]:
    parser = Skeleton()
    parser.feed(page)
    return parser.tags


def visible(page: str) -> str:
    """The text a reader sees: the <style> (faces, CSS) dropped, tags dropped, entities decoded."""
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def section(page: str, sid: str) -> str:
    return re.search(rf'<section class="step" data-step="{sid}">(.*?)</section>', page, re.S).group(1)


def test_every_handout_builds_in_both_languages_with_the_same_structure(pages):
    assert set(pages) == set(LANGS)
    assert list(pages["vi"]) == list(pages["en"]) == [*SUMMARIES, "worksheet-6b"]
    for stem in pages["en"]:
        assert skeleton(pages["vi"][stem]) == skeleton(pages["en"][stem]), stem
        assert 'lang="vi"' in pages["vi"][stem] and 'lang="en"' in pages["en"][stem]
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", pages["en"][stem]), "nothing is fetched"
    steps = [re.findall(r'data-step="(\w+)"', pages["en"][stem]) for stem in SUMMARIES]
    assert [s for col in steps for s in col] == [s for c in COLUMNS for s in c.step_ids]
    assert sorted(sum(steps, [])) == sorted(STEP_IDS)


def english_texts(walk) -> list[tuple[str, str]]:
    """Every (English, Vietnamese) pair a handout may show: its own texts, the step texts, the UI words and the
    views' fact labels; a text with {fields} is cut at them."""
    pairs = []
    for table in lang_tables("handouts").values():
        for texts in table.values():
            en, vi = texts["en"], texts["vi"]
            pairs += zip(en, vi, strict=True) if isinstance(en, tuple) else [(en, vi)]
    for key in ("shapes", "equation", "accepted", "rejected", "resampled", "bonus"):
        pairs.append((UI[key]["en"], UI[key]["vi"]))
    for texts in lang_table("deck", "short").values():
        pairs.append((texts["en"], texts["vi"]))
    for step in STEPS:
        pairs.append((step.t("title", "en"), step.t("title", "vi")))
    en_views, vi_views = build_views(walk, "en").views, build_views(walk, "vi").views
    for sid in STEP_IDS:
        pairs += [(a, b) for (a, _), (b, _) in zip(en_views[sid].facts, vi_views[sid].facts, strict=True)]
    out = []
    for en, vi in pairs:
        for piece in re.split(r"\{[^}]*\}", en):
            piece = piece.strip(" .,:;()«»")
            if len(piece) >= 6 and piece not in vi:  # a piece both languages write alike (p_d(x_i), DSpark) is no label
                out.append((piece, vi))
    return out


def test_the_vietnamese_handouts_hold_no_english_label(walk, pages):
    english = english_texts(walk)
    assert len(english) > 50
    for stem, page in pages["vi"].items():
        text = visible(page)
        leaked = [en for en, _ in english if en in text]
        assert leaked == [], (stem, leaked)
        assert re.search("[ạảấầẩậắằẳặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹđ]", text), stem  # it is Vietnamese
    # and the English ones hold the English texts
    assert lang_table("handouts", "text")["questions"]["en"] in visible(pages["en"]["column-1"])


def test_the_summaries_show_the_walks_shapes_and_facts(walk, pages):
    cfg, S = walk.cfg, int(walk.tokens.size(1))
    for lang in LANGS:
        views = build_views(walk, lang).views
        for col in COLUMNS:
            page = pages[lang][f"column-{col.id}"]
            for sid in col.step_ids:
                part = html.unescape(section(page, sid))
                for name, shape in views[sid].shapes[:4]:
                    assert f"<th>{name}</th>" in part and f"[{', '.join(map(str, shape))}]" in part, (sid, name)
                for name, _ in views[sid].facts[:2]:
                    assert f"<th>{name}</th>" in part, (sid, name)
                assert html.escape(STEPS[STEP_IDS.index(sid)].equation, quote=True) in section(page, sid)
            assert f"({S} " in visible(page)  # the footer's token count
    one_a = html.unescape(section(pages["en"]["column-1"], "1A"))  # from the tokens and the config, not the view
    assert f"[1, {S}, {cfg.dim}]" in one_a and f"[1, {S}, {cfg.hc_mult}, {cfg.dim}]" in one_a
    assert f"has {S} tokens and D = {cfg.dim}" in visible(pages["en"]["column-1"])
    facts_6b = dict(build_views(walk, "en").views["6B"].facts)
    assert f"{facts_6b['max probability']:.4g}" in visible(pages["en"]["column-4"])


def key_rows(page: str) -> list[list[str]]:
    """The answer key's rows (the second table of the worksheet), each cell's text."""
    key = page[page.index('<section class="key">') :]
    rows = re.findall(r"<tr data-status[^>]*>(.*?)</tr>", key, re.S)
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows
    ]


def test_the_worksheet_is_one_real_round_worked_by_verifys_rule(walk, pages, sheet):
    rd = sheet["round"]
    k = walk.cfg.dspark_block_size
    assert len(rd["draft"]) == rd["verify_len"] == sheet["k"] == k
    assert sheet["temperature"] > 0  # a sampled round: u decides
    words = lang_table("handouts", "text")
    for lang in LANGS:
        page = pages[lang]["worksheet-6b"]
        sheet_part = page[: page.index('<section class="key">')]
        blank = re.findall(r'<td class="[^"]*blank">(.*?)</td>', sheet_part)
        assert blank == [""] * (2 * k), "the sheet leaves r and the verdicts to the class"
        rows = key_rows(page)
        assert len(rows) == k
        gen = None
        for i, (n, tok, p_d, p_t, c, r, u, verdict) in enumerate(rows):
            assert int(n) == i + 1 and tok == f"«{sheet['rows'][i]['token']}»"
            # the printed numbers are the round's
            assert np.isclose(float(p_d), rd["draft_probs"][i], rtol=1e-3) and p_d == shown(rd["draft_probs"][i])
            assert np.isclose(float(p_t), rd["target_probs"][i], rtol=1e-3)
            assert np.isclose(float(c), rd["confidence"][i], rtol=1e-3)
            # r recomputed from the printed p_t and p_d
            assert r == fixed(min(1.0, float(p_t) / float(p_d)))
            status = rd["status"][i]
            assert verdict == words[{"accepted": "kept", "rejected": "rejected"}.get(status, "not_verified")][lang]
            if status == "not verified":
                assert u == words["not_drawn"][lang]
                continue
            # u is the portable generator's draw at the printed counter, and u < r decides as verify did
            counter = sheet["rows"][i]["counter"]
            assert u == fixed(uniform(sheet["seed"], 0, counter))
            gen = gen or PortableGenerator(sheet["seed"], 0, counter)
            exact = accept(accept_ratio(rd["target_probs"][i], rd["draft_probs"][i]), gen)  # verify's own test
            assert (float(u) < float(r)) == exact == (status == "accepted"), i
        tested = [row for row in rows if row[6] != words["not_drawn"][lang]]
        counters = [row["counter"] for row in sheet["rows"] if row["counter"] is not None]
        assert counters == list(range(counters[0], counters[0] + len(tested)))
        assert f"seed {sheet['seed']}" in visible(page) and ", ".join(map(str, counters)) in visible(page)
    # the first rejection ends the round; the committed tokens are the kept drafts, then the target's token
    n = rd["n_accepted"]
    assert rd["status"][:n] == ["accepted"] * n
    assert all(s == "not verified" for s in rd["status"][n + 1 :])
    assert rd["committed"] == [*rd["draft"][:n], rd["next_token"]] and sheet["tau"] == n + 1
    kept = " ".join(f"«{t}»" for t in sheet["committed"])
    assert kept in visible(pages["en"]["worksheet-6b"]) and kept in visible(pages["vi"]["worksheet-6b"])
    survival = np.cumprod(rd["confidence"])
    assert [float(a) for a in sheet["survival"]] == pytest.approx(survival.tolist(), rel=1e-3)


@pytest.mark.browser
def test_chromium_prints_each_summary_on_one_a4_page_and_the_worksheet_on_two(pages, browser):
    files = {Path(lang) / f"{stem}.pdf": page for lang in LANGS for stem, page in pages[lang].items()}
    pdfs = print_with(browser, files)  # what `make handouts` prints with
    counts = {str(p): pdf_pages(pdf) for p, pdf in pdfs.items()}
    want = {str(p): 2 if p.stem == "worksheet-6b" else 1 for p in files}
    assert counts == want
    for pdf in pdfs.values():
        boxes = re.findall(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", pdf)
        assert boxes and all(abs(float(w) - 595.3) < 2 and abs(float(h) - 841.9) < 2 for w, h in boxes)  # A4 in pt
    tab = browser.new_page()
    try:
        tab.emulate_media(media="print")
        for path, page in files.items():
            tab.set_content(page, wait_until="load")
            smallest = tab.evaluate(
                """() => Math.min(...[...document.body.querySelectorAll('*')]
                    .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
                    .map(e => parseFloat(getComputedStyle(e).fontSize)))"""
            )
            assert smallest >= MIN_PX - 0.01, (str(path), smallest)
            assert tab.evaluate("document.fonts.check('10pt \"DSpark Mono\"', 'về')"), str(path)
    finally:
        tab.close()


@pytest.mark.parametrize(("lang", "words"), [("en", "is a file: allowed a folder"), ("vi", "là một tệp")])
def test_out_that_is_a_file_is_refused_before_anything_is_written(tmp_path, capsys, lang, words):
    from lab.handouts.build import main

    target = tmp_path / "handouts"
    target.write_text("not a folder", encoding="utf-8")
    assert main(["--lang", lang, "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"--out = {target} ") and words in err
    assert target.read_text(encoding="utf-8") == "not a folder" and sorted(tmp_path.iterdir()) == [target]
