"""Real-browser tests of the classroom pages (`pytest -m browser`, Playwright driving Debian's chromium, as
tests/test_browser.py): the presenter as a deck, at a projector's 1280×720 and on a
phone's 390×844.

- the deck: Next walks every build, narration sentence and round phase, and every slide opens at its top; at
  1280×720 and 1920×1080, in both languages, every slide and round phase fits one screen (nothing to scroll), no
  text of it is under 20 px, its prose is within the word caps and no word breaks across lines (nor at 150 % and
  200 % zoom); heat maps keep every row and column label; A+ grows the content's text, the plot's font and the
  map, not the buttons; Shift+L does what L does;
- the speaker view (?notes) shows the long notes, the next slide and a timer, and stays on the deck's slide when
  Next is pressed in either window; the dark theme is remembered in the address; J jumps to the first rejected
  draft; predict lets the class guess each verdict before verify shows it;
- a round's commit sentence names the positions the cache panel marks as written (the anchor and the kept drafts),
  its counts agree in number ("1 kept draft"), and at T = 0 the strip shows the one-hot p_d and p_t verify used;
- the narration lights the cells it speaks about and moves with Next; a round plays draft → schedule → verify (the
  verdicts appear one by one, all at once with reduced motion) → commit (fresh cache slots);
- Vietnamese: "về tiếng đẹp" is drawn with the embedded "DSpark Mono" face, which is loaded and covers those letters;
- the Explorer (docs/explorer.html, the model live in a page) has its own tests: tests/test_explorer.py.
The presenter page is built once for the module, as `dspark-lab present` builds it; a console error on any page
fails its test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
PROJECTOR = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}
WAIT_MS = 60_000  # a ceiling for a slow, loaded machine; a passing wait returns at once
VIETNAMESE = "về tiếng đẹp"


@pytest.fixture(scope="module")
def deck_url(chromium_path):
    """The presenter page as `dspark-lab present` builds it (12 rounds at the default load), served on 127.0.0.1
    for the whole module."""
    from lab.present import presenter

    server = presenter.serve_in_thread(presenter.render_page(presenter.build_data()), port=0)
    try:
        yield presenter.url_of(server)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def open_page(browser):
    """open_page(url, viewport, reduced_motion=False) → a page; fails the test on any console error."""
    contexts, errors = [], []

    def opener(url: str, viewport: dict, reduced_motion: bool = False):
        context = browser.new_context(viewport=viewport, reduced_motion="reduce" if reduced_motion else "no-preference")
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
        page.goto(url)
        return page

    yield opener
    for context in contexts:
        context.close()
    assert not errors, "the page logged errors:\n" + "\n".join(errors)


def where(page) -> tuple[int, int]:
    d = page.evaluate("() => ({...document.getElementById('stage').dataset})")
    return int(d["slide"]), int(d["sub"])


def px(page, selector: str, prop: str = "fontSize") -> float:
    return page.evaluate(f"(s) => parseFloat(getComputedStyle(document.querySelector(s)).{prop})", selector)


def go_to(page, test: str, limit: int = 200) -> None:
    """Press Next until the JS expression `test` holds."""
    for _ in range(limit):
        if page.evaluate(test):
            return
        page.keyboard.press("PageDown")
    pytest.fail(f"never reached {test}")


# ---- the deck ---------------------------------------------------------------------------------------------------
def test_next_opens_every_slide_at_its_top(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    total = int(page.evaluate("() => document.getElementById('stage').dataset.slides"))
    assert px(page, "#slide .what") >= 20  # the body text, from the back row
    assert px(page, "#map .block") >= 20  # the map's block text
    seen = {0}
    for _ in range(400):
        slide, sub = where(page)
        tall, wide = page.evaluate(
            "() => { const s = document.getElementById('slide');"
            " return [s.scrollHeight > s.clientHeight + 4, s.scrollWidth > s.clientWidth]; }"
        )
        assert not wide, f"slide {slide} is wider than its column"
        if tall and sub == 0:
            page.keyboard.press("PageDown")  # a tall build: Next shows the rest of it first (a clicker cannot scroll)
            if where(page) == (slide, sub):
                assert page.evaluate("() => document.getElementById('slide').scrollTop") > 0
        page.evaluate("() => { const s = document.getElementById('slide'); s.scrollTop = s.scrollHeight; }")
        if page.locator("#next").is_disabled():
            break
        page.keyboard.press("PageDown")
        now = where(page)
        assert now != (slide, sub), "Next did nothing"
        if now[0] != slide:
            assert now[0] == slide + 1
            assert page.evaluate("() => document.getElementById('slide').scrollTop") == 0, f"slide {now[0]} not at top"
            seen.add(now[0])
    assert seen == set(range(total)), f"Next skipped slides {sorted(set(range(total)) - seen)}"
    page.keyboard.press("ArrowUp")  # ↑ ↓ scroll the slide, they do not change it
    assert where(page)[0] == total - 1


def test_font_control_scales_the_content_and_the_plot_not_the_chrome(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    map_before = px(page, "#map .block")  # the map: beside each step's idea
    go_to(page, "() => !!document.querySelector('#slide .figure .xtick text')")
    tick = "#slide .figure .xtick text"
    before = {"text": px(page, "#slide h3"), "plot": px(page, tick), "button": px(page, "#next")}
    page.locator("#font-up").click()
    page.locator("#font-up").click()  # 100 % → 120 %
    page.wait_for_selector("#slide .figure .xtick text")
    after = {"text": px(page, "#slide h3"), "plot": px(page, tick), "button": px(page, "#next")}
    assert after["text"] == pytest.approx(1.2 * before["text"], rel=0.02)
    assert after["plot"] == pytest.approx(1.2 * before["plot"], rel=0.1)
    assert after["button"] == before["button"]  # the chrome stays as it is
    assert page.locator("#font-value").inner_text() == "120%"
    page.keyboard.press("Home")
    assert px(page, "#map .block") == pytest.approx(1.2 * map_before, rel=0.02)


def test_shift_keys_do_what_the_hint_says(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    assert "L" in page.locator("#keys").inner_text()
    page.keyboard.press("Shift+L")
    assert page.evaluate("() => document.documentElement.lang") == "vi"
    page.keyboard.press("l")
    assert page.evaluate("() => document.documentElement.lang") == "en"


def lit_cells(page) -> list[str]:
    return page.evaluate(
        "() => [...document.querySelectorAll('.lit')].map(e => e.dataset.col || e.dataset.row || e.id || e.tagName)"
    )


def test_narration_lights_what_it_says_and_moves_with_next(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    go_to(page, "() => !!document.querySelector('#slide .narration')")
    said = page.locator(".narration li.now")
    first, lit = said.get_attribute("data-say"), lit_cells(page)
    assert first == "0" and lit  # sentence 1 lights its column
    page.keyboard.press("PageDown")
    assert said.get_attribute("data-say") == "1"
    assert lit_cells(page) and lit_cells(page) != lit  # another sentence, other cells
    assert page.locator("#slide .lit").first.is_visible()


@pytest.mark.parametrize("reduced", [False, True], ids=["motion", "reduced-motion"])
def test_a_round_plays_draft_schedule_verify_commit(deck_url, open_page, reduced):
    page = open_page(deck_url, PROJECTOR, reduced_motion=reduced)
    page.keyboard.press("]")  # the rounds: after the prefill
    assert page.locator(".rounds").get_attribute("data-round") == "0"
    page.keyboard.press("PageDown")
    rounds = page.locator(".rounds")
    phases, lit = [], []
    for _ in range(4):
        phases.append(rounds.get_attribute("data-phase"))
        lit.append(page.evaluate("() => [...document.querySelectorAll('.lit')].map(e => e.outerHTML.slice(0, 40))"))
        if phases[-1] == "draft":
            assert page.locator("#strip td.pending").count() == 5  # nothing verified yet
        if phases[-1] == "schedule":
            assert page.locator("#plan").is_visible()
        if phases[-1] == "verify":
            if reduced:
                assert page.locator("#strip td.pending").count() == 0  # every verdict at once
            else:
                assert page.locator("#strip td.pending").count() > 0  # the step-through is still playing
                page.wait_for_function("() => !document.querySelector('#strip td.pending')", timeout=WAIT_MS)
            assert page.locator("#strip td.accepted, #strip td.rejected").count() > 0
        if phases[-1] == "commit":
            assert page.locator("#side .slot.fresh").count() > 0 and page.locator("#verdict").is_visible()
        page.keyboard.press("PageDown")
    assert phases == ["draft", "schedule", "verify", "commit"]
    assert all(lit) and len({tuple(x) for x in lit}) == 4  # each sentence lights something else
    assert rounds.get_attribute("data-round") == "2" and rounds.get_attribute("data-phase") == "draft"


def test_default_round_shows_drafts_not_sent(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    page.keyboard.press("]")
    for _ in range(2):
        page.keyboard.press("PageDown")  # round 1 · schedule
    assert page.locator(".rounds").get_attribute("data-phase") == "schedule"
    assert page.locator("#strip td.not_sent").count() > 0
    assert "○" in page.locator("#plan").inner_text()


# ---- one screen, big type, short text -----------------------------------------------------------------------------
FULL_HD = {"width": 1920, "height": 1080}
MEASURE = r"""() => {
  const st = document.getElementById('stage').dataset;
  const boxes = ['slide', 'side'].map(id => document.getElementById(id)).filter(b => b.offsetParent !== null);
  const tall = boxes.filter(b => b.scrollHeight > b.clientHeight + 2).map(b => b.id);
  const wide = boxes.filter(b => b.scrollWidth > b.clientWidth + 2).map(b => b.id);
  let min = 1e9, where = '';
  const broken = [];
  const walker = document.createTreeWalker(document.getElementById('stage'), NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode, el = n.parentElement;
    if (!n.textContent.trim() || el.closest('svg') || !el.getClientRects().length) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < min) { min = size; where = el.tagName + ' ' + n.textContent.trim().slice(0, 30); }
    if (el.closest('.tokens, .mono, .equation')) continue;  // token text may break where the model's tokens do
    const re = /[^\s\-–—\/]+/g;  // a word; a compound may break at its hyphen or dash, as typesetters allow
    let m;
    while ((m = re.exec(n.textContent))) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  const clone = document.getElementById('slide').cloneNode(true);
  const data = 'table, pre, svg, .figure, .tokens, .phases, .narration li:not(.now)';  // data, or not shown
  clone.querySelectorAll(data).forEach(e => e.remove());
  const words = clone.textContent.split(/\s+/).filter(Boolean).length;
  const round = !!document.querySelector('#slide .rounds');
  return {slide: +st.slide, sub: +st.sub, tall, wide, min, where, broken, words, round};
}"""


def walk_deck(page, limit: int = 400) -> list[dict]:
    """Measure every slide and round phase, pressing Next until the end."""
    out = []
    for _ in range(limit):
        out.append(page.evaluate(MEASURE))
        if page.locator("#next").is_disabled():
            return out
        page.keyboard.press("PageDown")
    pytest.fail("Next never reached the end")


@pytest.mark.parametrize("viewport", [PROJECTOR, FULL_HD], ids=["1280x720", "1920x1080"])
@pytest.mark.parametrize("lang", ["en", "vi"])
def test_every_slide_fits_one_screen_in_big_type(deck_url, open_page, viewport, lang):
    from lab.present.deck import ROUND_WORDS, SLIDE_WORDS

    page = open_page(deck_url + ("#vi" if lang == "vi" else ""), viewport, reduced_motion=True)
    seen = walk_deck(page)
    assert len(seen) > 60
    for m in seen:
        at = (m["slide"], m["sub"])
        assert not m["tall"] and not m["wide"], (at, m)  # one screen: nothing to scroll, nothing cut
        assert m["min"] >= 20, (at, m["min"], m["where"])  # the back row reads every word of it
        assert not m["broken"], (at, m["broken"])
        assert m["words"] <= (ROUND_WORDS if m["round"] else SLIDE_WORDS)[lang], (at, m["words"])


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_predicted_rounds_fit_one_screen(deck_url, open_page, lang):
    """With predict on, each round has a fifth phase and the guesses beside the verdicts: still one screen."""
    from lab.present.deck import ROUND_WORDS

    page = open_page(deck_url + "?predict" + ("#vi" if lang == "vi" else ""), PROJECTOR, reduced_motion=True)
    page.keyboard.press("]")
    phases = set()
    while not page.locator("#next").is_disabled():
        page.keyboard.press("PageDown")
        for i in range(page.locator("#strip button.guess").count()):
            page.keyboard.press(str(i + 1))  # the class guesses ✓ everywhere
        m = page.evaluate(MEASURE)
        phases.add(page.locator(".rounds").get_attribute("data-phase"))
        assert not m["tall"] and not m["wide"] and m["min"] >= 20, m
        assert m["words"] <= ROUND_WORDS[lang], m
    assert phases == {"draft", "schedule", "predict", "verify", "commit"}


@pytest.mark.parametrize("zoom", [1.5, 2.0], ids=["150%", "200%"])
def test_words_do_not_break_when_zoomed(deck_url, open_page, zoom):
    """Browser zoom is a smaller viewport in CSS pixels: at 150 % and 200 % of 1280×720 no word is cut in two."""
    viewport = {"width": int(PROJECTOR["width"] / zoom), "height": int(PROJECTOR["height"] / zoom)}
    page = open_page(deck_url, viewport, reduced_motion=True)
    broken = {(m["slide"], m["sub"]): m["broken"] for m in walk_deck(page) if m["broken"]}
    assert not broken, broken


def test_heat_maps_keep_every_label(deck_url, open_page):
    """Every figure: a heat map labels each of its rows and columns, and no plot text is under 20 px."""
    page = open_page(deck_url, PROJECTOR, reduced_motion=True)
    checked = 0
    for _ in range(120):
        if page.locator("#slide .figure .main-svg").count():
            missing = page.evaluate(
                """() => {
                    const gd = document.querySelector('#slide .figure');
                    const out = [];
                    for (const tr of gd.data.filter(t => t.type === 'heatmap')) {
                      for (const [ax, vals] of [[tr.xaxis || 'x', tr.x], [tr.yaxis || 'y', tr.y]]) {
                        const axis = gd._fullLayout[ax[0] + 'axis' + ax.slice(1)];
                        if (!Array.isArray(vals) || vals.length > 40 || !axis.showticklabels) continue;
                        const shown = gd.querySelectorAll(`g.${ax}tick text`).length;
                        if (shown < vals.length) out.push(`${ax}: ${shown} of ${vals.length}`);
                      }
                    }
                    const texts = [...gd.querySelectorAll('text')].filter(t => t.textContent.trim());
                    const small = texts.filter(t => parseFloat(getComputedStyle(t).fontSize) < 20);
                    if (small.length) out.push('text under 20 px: ' + small[0].textContent);
                    return [gd.data.some(t => t.type === 'heatmap'), out];
                }"""
            )
            checked += missing[0]
            assert not missing[1], (where(page), missing[1])
        if page.locator(".rounds").count():
            break
        page.keyboard.press("PageDown")
    assert checked >= 5  # the heat maps of 1A, 1B, 2A, 3B, 3C, 4A, 5A, 6B


# ---- the speaker view ------------------------------------------------------------------------------------------------
def test_speaker_view_follows_the_deck_and_leads_it(deck_url, browser):
    """?notes in a second window of the same browser: the long notes, the next slide, a timer; Next in either
    window moves both (BroadcastChannel between the two)."""
    context = browser.new_context(viewport=PROJECTOR, reduced_motion="reduce")
    errors = []
    try:
        deck, notes = context.new_page(), context.new_page()
        for p in (deck, notes):
            p.on("pageerror", lambda e: errors.append(str(e)))
        deck.goto(deck_url)
        deck.keyboard.press("PageDown")  # the deck is on slide 2 before the notes open
        notes.goto(deck_url + "?notes")
        notes.wait_for_function("() => document.getElementById('stage').dataset.slide === '1'", timeout=WAIT_MS)
        assert notes.locator("#notes-view").is_visible() and not notes.locator("#slide").is_visible()
        assert re.fullmatch(r"\d\d:\d\d", notes.locator("#sp-time").inner_text())
        deck.keyboard.press("Home")
        notes.wait_for_function("() => document.getElementById('stage').dataset.slide === '0'", timeout=WAIT_MS)
        said, shown = notes.locator("#sp-notes").inner_text(), deck.locator("#slide").inner_text()
        assert len(said.split()) > 2 * len(shown.split())  # the long form: the step's whole explanation
        assert "1A" in notes.locator("#sp-next").inner_text()  # the next slide: 1A's equation
        for press_in, follower in ((deck, notes), (notes, deck), (deck, notes)):
            before = where(press_in)
            press_in.keyboard.press("PageDown")
            after = where(press_in)
            assert after != before
            follower.wait_for_function(
                "([s, u]) => { const d = document.getElementById('stage').dataset;"
                " return +d.slide === s && +d.sub === u; }",
                arg=list(after),
                timeout=WAIT_MS,
            )
        deck.keyboard.press("]")
        deck.keyboard.press("]")  # round 1: the notes list every phase's sentence
        notes.wait_for_function("() => document.querySelector('#sp-notes ol li')", timeout=WAIT_MS)
    finally:
        context.close()
    assert not errors, errors


def test_speaker_view_follows_from_a_file(deck_url, browser, tmp_path):
    """`present --out` opened from file:// (a USB stick, no server): the two windows still follow each other."""
    import urllib.request

    from lab.present.presenter import PLOTLY, plotly_js

    with urllib.request.urlopen(deck_url) as r:
        (tmp_path / "index.html").write_bytes(r.read())
    (tmp_path / PLOTLY).write_bytes(plotly_js())
    url = (tmp_path / "index.html").as_uri()
    context = browser.new_context(viewport=PROJECTOR, reduced_motion="reduce")
    try:
        deck, notes = context.new_page(), context.new_page()
        deck.goto(url)
        notes.goto(url + "?notes")
        notes.keyboard.press("PageDown")
        deck.wait_for_function("() => document.getElementById('stage').dataset.slide === '1'", timeout=WAIT_MS)
        deck.keyboard.press("PageDown")
        notes.wait_for_function("() => document.getElementById('stage').dataset.slide === '2'", timeout=WAIT_MS)
    finally:
        context.close()


def test_the_button_opens_the_speaker_view(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    with page.context.expect_page() as popup:
        page.locator("#speaker").click()
    notes = popup.value
    notes.wait_for_load_state()
    assert "notes" in notes.url and notes.locator("#notes-view").is_visible()


# ---- the projector theme, predict, the first rejection ------------------------------------------------------------
def contrast(page, selector: str) -> float:
    return page.evaluate(
        """(s) => {
            const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
            const lum = (c) => {
              const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
              const [r, g, b] = rgb(c).map(lin);
              return 0.2126 * r + 0.7152 * g + 0.0722 * b;
            };
            const el = document.querySelector(s), own = getComputedStyle(el).backgroundColor;
            const fg = lum(getComputedStyle(el).color);
            const clear = own.startsWith('rgba') && own.endsWith(', 0)');  // no background of its own
            const bg = lum(clear ? getComputedStyle(document.body).backgroundColor : own);
            return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
        }""",
        selector,
    )


def test_dark_theme_is_high_contrast_and_remembered(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR)
    page.locator("#dark").click()
    assert page.evaluate("() => document.body.classList.contains('dark')")
    assert "theme=dark" in page.url
    assert contrast(page, "#slide .what") >= 12  # well past WCAG AAA (7:1)
    page.reload()
    assert page.evaluate("() => document.body.classList.contains('dark')")  # the address keeps it
    page.emulate_media(reduced_motion="reduce")
    page.keyboard.press("j")  # a round's verdicts: the coloured cells stay readable
    page.keyboard.press("PageDown")
    for cell in ("#strip td.accepted", "#strip td.rejected", "#slide .narration li.now", "#verdict"):
        assert contrast(page, cell) >= 7, cell
    page.keyboard.press("d")
    assert "theme=dark" not in page.url and not page.evaluate("() => document.body.classList.contains('dark')")


def test_jump_goes_to_the_first_rejected_draft(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR, reduced_motion=True)
    rejects = page.evaluate(
        "() => JSON.parse(document.getElementById('presenter-data').textContent)"
        ".debugger.en.rounds.map(r => r.status.includes('rejected'))"
    )
    hits = [i for i, x in enumerate(rejects, 1) if x]
    assert hits
    rounds = page.locator(".rounds")
    for want in [*hits, hits[0]]:  # each rejecting round in turn, then back to the first
        page.keyboard.press("j")
        assert (rounds.get_attribute("data-round"), rounds.get_attribute("data-phase")) == (str(want), "verify")
        assert page.locator("#strip td.rejected.lit").count() == 1  # lit, where the class looks
    page.locator("#jump").click()  # the button does what J does
    assert rounds.get_attribute("data-round") == str(hits[1 % len(hits)])


def test_predict_then_reveal(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR, reduced_motion=True)
    page.keyboard.press("p")
    assert "predict" in page.url
    page.keyboard.press("j")  # round 1's verify (the English prompt rejects its second draft)
    page.keyboard.press("PageUp")
    rounds = page.locator(".rounds")
    assert rounds.get_attribute("data-phase") == "predict"
    assert page.locator("#strip td.accepted, #strip td.rejected").count() == 0  # nothing shown yet
    guesses = page.locator("#strip button.guess")
    n = guesses.count()
    assert n >= 2
    guesses.nth(0).click()  # ✓
    page.keyboard.press("2")  # ✓ then …
    page.keyboard.press("2")  # ✗
    assert "rejected" in page.locator("#strip button.guess").nth(1).get_attribute("class")
    page.keyboard.press("PageDown")
    assert rounds.get_attribute("data-phase") == "verify"
    assert page.locator("#strip .guessed").count() == 2
    assert re.search(r"\b2 of 2\b", page.locator("#score").inner_text())  # ✓ ✗ was right: verify agrees


# ---- the rounds' sentences against their data ----------------------------------------------------------------------
def test_commit_sentence_names_what_the_cache_panel_writes(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR, reduced_motion=True)
    page.keyboard.press("]")
    rounds = page.locator(".rounds")
    checked = 0
    while not page.locator("#next").is_disabled():
        page.keyboard.press("PageDown")
        text = page.locator(".narration li.now").inner_text()
        assert not re.search(r"\b1 (kept )?drafts\b|\ball 1\b", text), text  # "1 kept draft", in number
        if rounds.get_attribute("data-phase") != "commit":
            continue
        p, q = re.search(r"positions? (\d+)(?:–(\d+))?", text).groups()
        named = set(range(int(p), int(q or p) + 1))
        fresh = {int(x) for x in page.eval_on_selector_all("#window-ring .fresh", "els => els.map(e => e.dataset.pos)")}
        assert fresh == named, (text, fresh)  # the anchor and the kept drafts, as the panel marks them
        anchor = int(re.search(r"position (\d+)", page.locator("#round-head").inner_text()).group(1))
        assert min(named) == anchor
        for sel in ("#verdict", "#engram-history"):  # on screen, not below the fold
            box = page.locator(sel).bounding_box()
            assert box and box["y"] + box["height"] <= PROJECTOR["height"], sel
        checked += 1
    assert checked == presenter_rounds(page)


def presenter_rounds(page) -> int:
    data = "JSON.parse(document.getElementById('presenter-data').textContent)"
    return page.evaluate(f"() => {data}.debugger.en.rounds.length")


def test_rounds_show_the_temperature_verify_used(deck_url, open_page):
    page = open_page(deck_url, PROJECTOR, reduced_motion=True)
    page.keyboard.press("j")
    assert "T = 0" in page.locator('#strip tr[data-r="pd"] th').inner_text()
    pd = page.eval_on_selector_all('#strip tr[data-r="pd"] td', "els => els.map(e => e.textContent)")
    pt = page.eval_on_selector_all('#strip tr[data-r="pt"] td', "els => els.map(e => e.textContent)")
    assert set(pd) == {"1.000"}  # one-hot: what the narrated table shows, not the T = 1 softmax
    assert set(pt) <= {"1.000", "0.000", "—"} and "0.000" in pt


def face_report(page) -> dict:
    return page.evaluate(
        """async (text) => {
            await document.fonts.ready;
            await document.fonts.load('16px "DSpark Mono"', text);
            const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === 'DSpark Mono');
            const covers = (f, ch) => f.unicodeRange.split(',').some(r => {
                const [lo, hi] = r.trim().slice(2).split('-').map(x => parseInt(x, 16));
                const c = ch.codePointAt(0);
                return c >= lo && c <= (hi === undefined ? lo : hi);
            });
            const loaded = faces.filter(f => f.status === 'loaded' && f.weight === '400');
            return {
                check: document.fonts.check('16px "DSpark Mono"', text),
                loaded: loaded.length > 0,
                uncovered: [...text.replace(/ /g, '')].filter(ch => !loaded.some(f => covers(f, ch))),
            };
        }""",
        VIETNAMESE,
    )


def test_vietnamese_renders_with_the_embedded_face(deck_url, open_page):
    page = open_page(deck_url + "#vi", PROJECTOR)
    page.keyboard.press("End")  # a round page: its tokens and cache slots are monospace
    mono = ".slot b"
    family = page.evaluate(f"() => getComputedStyle(document.querySelector('{mono}')).fontFamily")
    assert family.startswith('"DSpark Mono"'), family
    report = face_report(page)
    assert report == {"check": True, "loaded": True, "uncovered": []}, report  # a loaded face has every letter


def test_phone_has_no_horizontal_overflow(deck_url, open_page):
    page = open_page(deck_url, PHONE)
    wide = "() => document.documentElement.scrollWidth"
    for _ in range(int(page.evaluate("() => document.getElementById('stage').dataset.slides")) + 20):
        assert page.evaluate(wide) <= PHONE["width"], where(page)
        page.keyboard.press("PageDown")


# ---- Vietnamese mode: no English phrase on any slide ----------------------------------------------------------
VISIBLE_TEXT = r"""() => {
  const out = [];
  const walker = document.createTreeWalker(document.getElementById('stage'), NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode, el = n.parentElement;
    if (!n.textContent.trim() || !el.getClientRects().length) continue;
    if (el.closest('.tokens, .mono, .equation, pre, code')) continue;  // the model's tokens and code, as they are
    out.push(n.textContent);
  }
  return out.join('\n');
}"""


def english_only_words() -> set[str]:
    """Words of the lab's English texts that no Vietnamese text uses (a term the Vietnamese texts keep in English,
    verify, draft, cache, is not one of them)."""
    from lab.text import LANG_DIR, read_family

    words: dict[str, set[str]] = {"vi": set(), "en": set()}

    def collect(value, lang: str) -> None:
        if isinstance(value, dict):
            for v in value.values():
                collect(v, lang)
        elif isinstance(value, list):
            for v in value:
                collect(v, lang)
        elif isinstance(value, str):
            words[lang] |= {w.lower() for w in re.findall(r"[^\W\d_]{3,}", value)}

    for path in sorted((LANG_DIR / "en").glob("*.toml")):
        parsed = read_family(path.stem)
        for lang in ("vi", "en"):
            collect(parsed[lang], lang)
    return words["en"] - words["vi"]


def test_the_vietnamese_deck_shows_no_english_phrase(deck_url, open_page):
    """Every slide and round phase of the Vietnamese deck, its figures' labels included: no run of three words that
    only the English texts use (an English sentence or label left in Vietnamese mode)."""
    english = english_only_words()
    assert {"the", "which", "because"} <= english and "verify" not in english  # the detector reads English as English
    page = open_page(deck_url + "#vi", PROJECTOR, reduced_motion=True)
    found = []
    for _ in range(400):
        text = re.sub(r"«[^»]*»", " ", page.evaluate(VISIBLE_TEXT))  # «token»: the model's own text, as it wrote it
        run: list[str] = []
        for word in re.findall(r"[^\W\d_]+", text):
            run = [*run, word] if word.lower() in english else []
            if len(run) >= 3:
                found.append((where(page), " ".join(run)))
                run = []
        if page.locator("#next").is_disabled():
            break
        page.keyboard.press("PageDown")
    assert found == [], found[:10]
