"""The DSpark Explorer (lab/present/explorer.py, docs/explorer.html): one self-contained page, within its 24 MB budget
and with no network URL, in sync with its generator (compared by `weights_pack.comparable`), that runs the trained
lab model itself. In chromium, from file:// (the page loaded once for the module):
- `window.dspark.run` gives what `python -m lab generate --json` gives (greedy; English and Vietnamese prompts;
  ℓ = 1..5; and at T > 0 with a seed, the same draws): the same tokens, plain tokens, drafts, statuses, accepted
  lengths and next tokens; confidences and p_d within 1e-9; `window.dspark.tokenize` gives
  `python -m lab tokenize --json`'s ids and pieces;
- run() refuses an out-of-range T, seed and ℓ, each with a message naming it;
- a student types a sentence, runs it, walks the steps 1A → 6B and sees that sentence's live rounds and race;
- the URL holds the whole state: a copied link opens the same prompt, settings, step and round; a bad seed in the
  controls is refused with a visible message and left as typed (not clamped);
- at a phone's 390 × 844 nothing is wider than the screen, the controls stay in the flow and the text is ≥ 16 px."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from lab.browser import weights_pack as wp
from lab.present import explorer

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / explorer.PAGE
PHONE = {"width": 390, "height": 844}
TOL = 1e-9
PROMPTS = {
    "english": "The cat sat on the mat.",
    "story": "Once upon a time, there was a little girl who lived in a village near the forest.",
    "vietnamese": "Hôm nay trời đẹp, chúng tôi đi dạo quanh hồ Hoàn Kiếm.",
}
NEW_TOKENS = 16
WAIT_MS = 120_000
READY = "Number(document.body.dataset.runs) > 0"  # the first run drawn (its step screens come before it)


def cli_json(*argv: str) -> dict:
    """`python -m lab …` in this process (one model load each, no interpreter start), its JSON output."""
    from lab.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def page_bytes() -> bytes:
    return PAGE.read_bytes()


# ---- the file ---------------------------------------------------------------------------------------------------
def test_page_is_within_budget_and_offline(page_bytes):
    assert len(page_bytes) <= wp.PAGE_BUDGET
    rest = wp.comparable(page_bytes).decode("cp1252", errors="replace")  # the weights' text replaced by a digest
    low = rest.lower()
    assert set(re.findall(r"url\(([a-z]+:[a-z0-9/+-]*)", low)) == {"data:font/woff2"}  # only the inlined font faces
    low = re.sub(r"url\(data:font/woff2;base64,[a-z0-9+/=]+\)", "", low)
    for bad in ("http://", "https://", "//cdn", "@import", "url(", "<link", "<iframe", "fetch(", "xmlhttprequest"):
        assert bad not in low, f"the page must not reach the network: found {bad!r}"
    tags = re.sub(r"(<script[^>]*>).*?</script>", r"\1", low, flags=re.S)  # the markup without the scripts' text
    assert not re.search(r"\bsrc\s*=", tags), "everything is inlined: no src= attribute"
    assert re.findall(r"<script[^>]*>", tags) == [
        '<script type="application/json" id="explorer-data">',
        '<script type="application/json" id="dspark-tokenizer">',
        '<script type="application/json" id="dspark-manifest">',
        f'<script type="application/octet-stream" id="{wp.ELEMENT_ID}">',
        '<script id="dspark-lib">',
        '<script id="explorer-app">',
    ]
    assert wp.CHARSET_META.encode() in page_bytes[:1024]


def test_page_is_in_sync_with_the_generator(page_bytes):
    built = explorer.page_bytes()
    assert wp.comparable(built) == wp.comparable(page_bytes), (
        f"docs/explorer.html is stale: run `{explorer.FIX_COMMAND}`"
    )


def test_cli_writes_and_checks(tmp_path, monkeypatch, page_bytes, capsys):
    monkeypatch.setattr(explorer, "page_bytes", lambda model=None: page_bytes)  # the model run is the test above
    out = tmp_path / "site" / "explorer.html"
    assert explorer.main(["--out", str(out)]) == 0
    assert out.read_bytes() == page_bytes
    assert explorer.main(["--check", "--out", str(out)]) == 0
    out.write_bytes(page_bytes.replace(b"<title>DSpark Explorer", b"<title>DSpark explorer"))
    assert explorer.main(["--check", "--out", str(out)]) == 1
    assert explorer.FIX_COMMAND in capsys.readouterr().err
    assert [p.name for p in out.parent.iterdir()] == ["explorer.html"]  # no temporary file left behind
    capsys.readouterr()
    assert explorer.main(["--out", str(out / "x.html")]) == 2  # a file where the page's folder should be
    assert explorer.main(["--out", str(tmp_path)]) == 2  # a folder where the page should be
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("error: --out: ") for line in err), err  # one line each
    assert out.read_bytes() == page_bytes.replace(b"<title>DSpark Explorer", b"<title>DSpark explorer")  # untouched


def test_strings_in_both_languages():
    ui = explorer.strings()
    for key, texts in ui.items():
        assert texts["vi"] and texts["en"], key
    app = explorer.asset("explorer_app.js") + explorer.asset("explorer_template.html")
    used = set(re.findall(r'data-t="(\w+)"', app)) | set(re.findall(r'\bt\("(\w+)"', app))
    used |= {"accepted", "rejected", "not_verified", "not_sent", "resampled", "bonus"}  # a verdict's class names it
    assert used <= set(ui), f"strings the page asks for but does not have: {sorted(used - set(ui))}"
    assert set(explorer.step_titles()) == set(explorer.STEPS)


# ---- in chromium ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(browser):
    """The page from file://, once for the module, its model ready and its first screen drawn."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.goto(PAGE.as_uri())
    page.wait_for_function(READY, timeout=WAIT_MS)
    page.errors = errors
    yield page
    context.close()


def js_run(page, prompt: str, **opts) -> dict:
    return page.evaluate(
        """([prompt, opts]) => dspark.run(prompt, opts).then(r => {
             const {steps, generate, ...rest} = r;
             return rest;
           })""",
        [prompt, opts],
    )


def js_error(page, prompt: str, **opts) -> str:
    return page.evaluate("([p, o]) => dspark.run(p, o).then(() => '', e => e.name + ': ' + e.message)", [prompt, opts])


@pytest.mark.browser
@pytest.mark.parametrize("name", list(PROMPTS))
def test_run_is_python_generate(live, name):
    """For every ℓ = 1..5: the page's run() and `python -m lab generate --json` (greedy, float64) agree."""
    prompt = PROMPTS[name]
    for ell in range(1, 6):
        py = cli_json(
            "generate", "--prompt", prompt, "--max-new-tokens", str(NEW_TOKENS), "--verify-len", str(ell), "--json"
        )
        js = js_run(live, prompt, verifyLen=ell, maxNewTokens=NEW_TOKENS)
        where = f"{name}, ℓ = {ell}"
        assert js["prompt_ids"] == py["prompt_ids"], where
        assert js["tokens"] == py["speculative"]["tokens"], where
        assert js["plain_tokens"] == py["plain"]["tokens"], where
        assert js["identical_tokens"] is py["identical_tokens"] is True, where
        strip = py["speculative"]["strip"]
        assert len(js["rounds"]) == len(strip) == py["speculative"]["rounds"], where
        for r, p in zip(js["rounds"], strip, strict=True):
            assert (r["anchor"], r["draft"], r["verify_len"], r["status"]) == (
                p["anchor"], p["draft"], p["verify_len"], p["status"]
            ), where  # fmt: skip
            assert (r["next_token"], r["next_kind"]) == (p["next_token"], p["next_kind"]), where
            assert r["confidence"] == pytest.approx(p["confidence"], abs=TOL), where
            assert r["p_d"] == pytest.approx(p["draft_probs"], abs=TOL), where
            kept = sum(s == "accepted" for s in p["status"])
            assert r["accepted_length"] == kept + 1 and r["n_accepted"] == kept, where
            assert len(r["p_t"]) == r["verify_len"] and all(0 <= x <= 1 for x in r["p_t"]), where
        assert js["mean_accepted_length"] == pytest.approx(py["speculative"]["mean_accepted_length"], abs=1e-12)
        assert js["target_forwards"]["speculative"] == py["speculative"]["target_forwards"] + 1  # + the prefill
        assert js["target_forwards"]["plain"] == py["plain"]["target_forwards"] + 1
    assert not live.errors, live.errors


@pytest.mark.browser
@pytest.mark.parametrize(("name", "temperature", "seed", "ell"), [("story", 0.8, 7, 5), ("vietnamese", 1.0, 3, 3)])
def test_sampled_run_is_python_generate(live, name, temperature, seed, ell):
    """At T > 0 the page draws what `dspark-lab generate --temperature T --seed S` draws (the portable generator,
    dspark_mini/portable_random.py, and its twin random.js): the same tokens, drafts, verdicts and resampled or
    bonus tokens; confidences and p_d within TOL."""
    prompt = PROMPTS[name]
    flags = ["--temperature", str(temperature), "--seed", str(seed), "--verify-len", str(ell)]
    py = cli_json("generate", "--prompt", prompt, "--max-new-tokens", str(NEW_TOKENS), *flags, "--json")
    js = js_run(live, prompt, verifyLen=ell, maxNewTokens=NEW_TOKENS, temperature=temperature, seed=str(seed))
    assert js["tokens"] == py["speculative"]["tokens"] and js["plain_tokens"] == py["plain"]["tokens"]
    strip = py["speculative"]["strip"]
    assert len(js["rounds"]) == len(strip)
    assert any(p["next_kind"] == "resampled" for p in strip)  # a rejection and a residual draw are compared too
    for r, p in zip(js["rounds"], strip, strict=True):
        assert (r["anchor"], r["draft"], r["verify_len"], r["status"]) == (
            p["anchor"], p["draft"], p["verify_len"], p["status"]
        )  # fmt: skip
        assert (r["next_token"], r["next_kind"]) == (p["next_token"], p["next_kind"])
        assert r["confidence"] == pytest.approx(p["confidence"], abs=TOL)
        assert r["p_d"] == pytest.approx(p["draft_probs"], abs=TOL)
    assert not live.errors, live.errors


@pytest.mark.browser
def test_tokenize_is_python_tokenize(live):
    texts = [*PROMPTS.values(), "def f(x):\n    return x ** 2 + 1\n", "Good luck 🍀🎉 with the test! 🚀", "Tiếng Việt"]
    for text in texts:
        py = cli_json("tokenize", text, "--json")
        js = live.evaluate("t => dspark.tokenize(t)", text)
        assert js["ids"] == py["ids"], text
        assert js["pieces"] == [t["text"] for t in py["tokens"]], text


@pytest.mark.browser
def test_run_refuses_bad_options_by_name(live):
    assert js_error(live, "Hi", temperature=0.7, maxNewTokens=2) == ""  # T > 0 samples (seed 0 by default)
    assert "temperature = 5 is invalid" in js_error(live, "Hi", temperature=5)
    assert 'seed = "-1" is invalid' in js_error(live, "Hi", seed="-1")
    assert 'seed = "9223372036854775808" is invalid' in js_error(live, "Hi", seed="9223372036854775808")
    assert js_error(live, "Hi", seed="9223372036854775807", maxNewTokens=2) == ""  # the largest seed is fine
    assert "verifyLen = 6 is invalid: allowed an integer 1..5" in js_error(live, "Hi", verifyLen=6)
    assert "prompt is empty" in js_error(live, "")
    assert "maxNewTokens = 300 is invalid" in js_error(live, "Hi", maxNewTokens=300)


@pytest.mark.browser
def test_a_student_types_a_sentence_and_sees_its_rounds(live):
    page = live
    sentence = "The little dog ran to the park and played with a ball."
    page.locator("#prompt").fill(sentence)
    runs = page.evaluate("Number(document.body.dataset.runs)")
    page.locator("#run").click()
    page.wait_for_function(f"Number(document.body.dataset.runs) > {runs}", timeout=WAIT_MS)
    want = js_run(page, sentence)
    for step in explorer.STEPS:
        page.locator(f"button[data-step='{step}']").click()
        body = page.locator("#step-body").inner_text()
        assert body.strip(), step
        if step == "1A":
            assert all(str(i) in body for i in want["prompt_ids"])
    assert page.locator("#rounds-view").is_visible() and page.locator("#race").is_visible()
    first = want["rounds"][0]
    strip = page.locator("#strip").inner_text()
    assert f"{first['position'] + 1}" in strip and f"{first['confidence'][0]:.3f}" in strip
    assert page.locator("#round-of").inner_text().endswith(f"{first['position']}")
    page.locator("#next-round").click()
    second = want["rounds"][1]
    assert f"{second['confidence'][0]:.3f}" in page.locator("#strip").inner_text()
    race = page.locator("#chart").inner_text()
    assert f"{want['target_forwards']['plain']} target forwards" in race
    assert f"{want['target_forwards']['speculative']} target forwards" in race
    assert not page.errors, page.errors


@pytest.mark.browser
def test_the_url_holds_the_whole_state(browser, live):
    """A teacher's link: lang, prompt, ℓ, seed, step and round come back from the URL alone; a bad seed typed in the
    controls is refused with a message and kept as typed."""
    prompt = "Xin chào các bạn, hôm nay chúng ta học về DSpark."
    state = {"lang": "vi", "prompt": prompt, "T": "0", "l": "2", "seed": "42", "step": "6B", "round": "3"}
    from urllib.parse import urlencode

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(PAGE.as_uri() + "#" + urlencode(state))
        page.wait_for_function(READY, timeout=WAIT_MS)
        assert page.locator("#prompt").input_value() == prompt
        assert page.locator("#ell").input_value() == "2" and page.locator("#seed").input_value() == "42"
        assert page.evaluate("document.documentElement.lang") == "vi"
        assert page.locator("#rounds-view").is_visible()
        want = js_run(page, prompt, verifyLen=2)
        r = want["rounds"][2]
        assert page.locator("#round-of").inner_text().startswith(f"vòng 3 / {len(want['rounds'])}")
        assert f"{r['confidence'][0]:.3f}" in page.locator("#strip").inner_text()
        from urllib.parse import parse_qs, urlparse

        back = {k: v[0] for k, v in parse_qs(urlparse(page.url).fragment).items()}
        assert back == state  # the page writes back what it read
        page.locator("#seed").fill("9223372036854775808")
        page.locator("#seed").dispatch_event("change")
        message = page.locator("#message")
        assert message.is_visible() and "9223372036854775808" in message.inner_text()
        assert page.locator("#seed").input_value() == "9223372036854775808"  # refused, not clamped
        page.locator("#temperature").fill("0.8")
        page.locator("#seed").fill("1")
        page.locator("#seed").dispatch_event("change")
        page.locator("#temperature").dispatch_event("change")
        page.wait_for_function("() => new URLSearchParams(location.hash.slice(1)).get('T') === '0.8'", timeout=WAIT_MS)
        assert message.inner_text().strip() == ""  # T = 0.8 with seed 1 is run, not refused
    finally:
        context.close()


def explorer_k(page) -> int:
    return page.evaluate("dspark.config.dspark_block_size")


@pytest.mark.browser
def test_phone_width(browser):
    context = browser.new_context(viewport=PHONE, device_scale_factor=1)
    page = context.new_page()
    try:
        page.goto(PAGE.as_uri() + "#step=6B")
        page.wait_for_function(READY, timeout=WAIT_MS)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert page.evaluate("getComputedStyle(document.getElementById('controls')).position") == "static"
        small = page.evaluate(
            """() => [...document.querySelectorAll('p, li, td, th, label, button, textarea, input')]
                 .filter(el => el.offsetParent !== null && el.textContent.trim() + (el.value || '') !== '')
                 .map(el => [el.tagName + '#' + el.id, parseFloat(getComputedStyle(el).fontSize)])
                 .filter(([, px]) => px < 16)"""
        )
        assert small == [], small
        assert page.locator("#strip.rows tr").count() == 1 + explorer_k(page)  # a header, then a row a position
        page.locator("#chart").scroll_into_view_if_needed()
        box = page.locator("#controls").bounding_box()
        assert box["y"] + box["height"] <= 0  # scrolled away with the page: it never covers the race
    finally:
        context.close()


@pytest.mark.browser
def test_vietnamese_renders_with_the_embedded_face(live):
    live.locator("#lang-vi").click()
    live.locator("button[data-step='1A']").click()
    live.wait_for_function("() => document.querySelector('#step-body .code')", timeout=WAIT_MS)
    family = live.evaluate("() => getComputedStyle(document.querySelector('#step-body .code')).fontFamily")
    assert family.startswith('"DSpark Mono"'), family
    assert live.evaluate("() => document.fonts.check('16px \"DSpark Mono\"', 'về tiếng đẹp')")
    live.locator("#lang-en").click()


def test_explorer_md_table_is_the_measurement():
    """docs/explorer.md's speed table is bench/explorer_speed.py's rendering of docs/explorer_speed.json (a measurement,
    not re-run here), and the measured page was within its budget."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("explorer_speed", REPO / "bench" / "explorer_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = json.loads(bench.JSON_PATH.read_text(encoding="utf-8"))
    doc = bench.DOC_PATH.read_text(encoding="utf-8")
    assert bench.rendered(doc, data) == doc, "run `python bench/explorer_speed.py --render`"
    assert data["page_bytes"] <= wp.PAGE_BUDGET
    for p in data["prompts"].values():
        assert p["target_forwards"] == p["python_target_forwards"]  # the page and Python decode the same way
    assert "(explorer.md)" in (REPO / "docs" / "classroom.md").read_text(encoding="utf-8")
