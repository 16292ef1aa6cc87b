"""Presenter mode (lab/present/presenter.py, rounds.py): the 6B debugger's per-round cache states against what the
committed tokens alone imply (ring slot = position mod W, one latent per `ratio` positions and the rest carried,
the Engram history = the compressed ids of the last tokens), the verify lengths against the paper's Algorithm 1
loop, the committed text against plain greedy decoding, and the page, its strings, its server and its CLI."""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

from dspark_mini.files import OWNER
from dspark_mini.speculative import ACCEPTED, NOT_SENT, NOT_VERIFIED, REJECTED, generate_plain
from dspark_mini.tokenizer import default_tokenizer
from lab.lesson.steps import STEP_IDS
from lab.lesson.view_6b import naive_lengths
from lab.present import presenter
from lab.present.page import asset, page_vocab
from lab.present.rounds import scheduled_rounds
from lab.text import DEFAULT_PROMPT, LANGS, UI
from lab.weights import lab_model


@pytest.fixture(scope="module")
def trained():
    return lab_model("trained")


@pytest.fixture(scope="module")
def ids() -> list[int]:
    return default_tokenizer().encode(DEFAULT_PROMPT)


def test_pages_show_a_leading_space_as_the_legend_says():
    """The byte-level BPE's tokens hold real spaces (" về"); both pages show a leading one as ▁, as their legend
    says («▁về» is « về»), and a line break as ↵; the scripts' inverse (▁ at the start → a space) gives the text."""
    from lab.present.explorer import TEXT

    tok = default_tokenizer()
    vocab = page_vocab(tok)
    assert len(vocab) == tok.vocab_size
    [ve] = tok.encode(" về")
    [newline] = tok.encode("\n")
    assert vocab[ve] == "▁về" and vocab[newline] == "↵" and vocab[tok.encode("về")[0]] != "▁về"
    assert vocab[:4] == ["<bos>", "<eos>", "<pad>", "<noise>"]
    for i, shown in enumerate(vocab):
        text = tok.token_text(i)
        assert not shown.startswith(" ") and "\n" not in shown
        if not text.startswith("▁"):  # U+2581 typed in a text would read the same: none in this vocabulary
            assert re.sub("^▁", " ", shown).replace("↵", "\n") == text.replace("↵", "\n"), i
    assert "«▁về» is « về»" in TEXT["legend_space"]["en"]


# two runs: greedy at a small server's load, and sampled at a load that sends everything (more verdict kinds)
RUNS = {"greedy_R8": dict(requests=8, temperature=0.0, seed=0), "sampled_R1": dict(requests=1, temperature=1.0, seed=3)}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, trained, ids) -> dict:
    return scheduled_rounds(trained, ids, rounds=14, **RUNS[request.param])


# ---- the rounds -------------------------------------------------------------------------------------------------
def test_lengths_follow_the_verdicts(run, ids):
    """Each commit stores the anchor and the kept drafts: length grows by n + 1, and the next round's anchor sits
    right after."""
    states, rounds = run["states"], run["rounds"]
    assert len(states) == len(rounds) + 1
    assert states[0]["length"] == len(ids) == run["prompt_len"]
    for i, r in enumerate(rounds):
        assert r["position"] == states[i]["length"]
        assert states[i + 1]["length"] == states[i]["length"] + r["n_accepted"] + 1
        assert run["tokens"][r["position"]] == r["anchor"]
        assert run["tokens"][r["position"] + 1 : r["position"] + 2 + r["n_accepted"]] == r["committed"]
    assert len(run["tokens"]) == states[-1]["length"] + 1  # committed tokens, then the next anchor


def test_greedy_rounds_commit_greedy_plain_text(trained, ids):
    """Lossless: at T = 0 whatever ℓ the scheduler picks, the text is what plain greedy decoding writes."""
    run = scheduled_rounds(trained, ids, rounds=14, requests=8, temperature=0.0)
    new = run["tokens"][len(ids) :]
    plain = generate_plain(trained, torch.tensor([ids]), len(new), temperature=0.0).tokens[0]
    assert new == plain


def test_window_and_draft_rings_hold_the_last_w_positions(run):
    """After a commit to length L, slot s of a ring of W holds the last position p < L with p ≡ s (mod W), or is
    empty (−1): the backbone rings and the draft rings alike, and no rejected row ever took a slot."""
    W = run["window_size"]
    for st in run["states"]:
        L = st["length"]
        want = [max((p for p in range(L) if p % W == s), default=-1) for s in range(W)]
        assert st["window"] == want
        assert st["draft_ring"] == want


def test_compressor_latents_and_carry(run, trained):
    """A KV source of ratio r has pooled every complete group of r positions (L // r latents) and carries the
    open group's positions, the last L mod r; ratio 1 carries nothing."""
    cfg = trained.cfg
    for st in run["states"]:
        L = st["length"]
        assert [s["layer"] for s in st["sources"]] == list(cfg.kv_source_layers)
        for s in st["sources"]:
            r = cfg.compress_ratios[s["layer"]]
            assert s["ratio"] == r
            assert s["latents"] == L // r
            assert s["carry"] == list(range(L - L % r, L))


def test_engram_history_is_the_last_tokens_compressed(run, trained):
    """The Engram history after a commit: the compressed ids of the last max_ngram − 1 committed tokens (the pad's
    compressed id where there is no token yet), read here from the tokenizer's map, not from the model."""
    tok = default_tokenizer()
    n = trained.cfg.engram_max_ngram_size - 1
    pad = tok.compress_map[trained.cfg.engram_pad_id]
    for st in run["states"]:
        L = st["length"]
        want = [tok.compress_map[run["tokens"][p]] if p >= 0 else pad for p in range(L - n, L)]
        assert st["engram_history"] == want
        assert st["engram_positions"] == list(range(L - n, L))


def test_verify_lengths_and_statuses(run):
    """ℓ is Algorithm 1 as the paper writes it (lab.lesson.walk.naive_lengths, one candidate at a time) at the run's
    load; survival is the running product of c; the strip reads accepted…, rejected, not verified…, not sent…"""
    for r in run["rounds"]:
        k, ell, n = len(r["draft"]), r["verify_len"], r["n_accepted"]
        lengths = naive_lengths(r["confidence"], run["requests"])  # ℓ of each of the R copies
        assert ell == lengths[0]
        assert r["batch_tokens"] == run["requests"] + sum(lengths)  # B = Σ (1 + ℓ_r)
        prod = 1.0
        for c, a in zip(r["confidence"], r["survival"], strict=True):
            prod *= c
            assert a == pytest.approx(prod, rel=1e-12)
        want = [ACCEPTED] * n + ([REJECTED] if n < ell else []) + [NOT_VERIFIED] * max(0, ell - n - 1)
        assert r["status"] == want + [NOT_SENT] * (k - ell)
        assert len(r["target_probs"]) == ell
        assert r["next_kind"] == ("bonus" if n == ell else "resampled")


def test_runs_show_several_verdicts(run):
    """The debugger has something to show: rounds that keep drafts and rounds where verify rejects one (the
    rollback: the rejected draft must be in no cache after the commit)."""
    kept = [r["n_accepted"] for r in run["rounds"]]
    assert max(kept) >= 1 and any(REJECTED in r["status"] for r in run["rounds"])


def test_bad_input_names_the_field(trained, ids):
    with pytest.raises(ValueError, match="requests in flight"):
        scheduled_rounds(trained, ids, requests=0)
    with pytest.raises(ValueError, match="rounds"):
        scheduled_rounds(trained, ids, rounds=41)
    with pytest.raises(ValueError, match="prompt has 0 tokens"):
        scheduled_rounds(trained, [], rounds=2)


# ---- the page ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data() -> dict:
    return presenter.build_data(rounds=6)


@pytest.fixture(scope="module")
def page(data) -> str:
    return presenter.render_page(data)


def test_page_has_every_slide_and_language(data):
    assert data["slides"] == [*STEP_IDS, presenter.ROUNDS_SLIDE]
    for lang in LANGS:
        on_map = [s["id"] for col in data["map"][lang]["columns"] for s in col["steps"]]
        assert sorted(on_map) == sorted(STEP_IDS)  # every block of the map, once
        slides = data["deck"][lang]["slides"]
        assert [s["step"] for s in slides] == sorted((s["step"] for s in slides), key=STEP_IDS.index)  # in order
        for sid in STEP_IDS:
            kinds = [s["kind"] for s in slides if s["step"] == sid]
            assert kinds[:2] == ["text", "equation"] and kinds[-1] == "checks", (sid, kinds)  # text → … → checks
            assert kinds.count("figure") == len(data["deck"][lang]["figures"][sid]), sid  # one slide per figure
    vi, en = (data["deck"][lang]["slides"][0]["html"] for lang in ("vi", "en"))
    assert vi != en  # each language has its own slides
    assert all(len(data["debugger"][lang]["rounds"]) == 6 for lang in LANGS)


def test_6b_draft_table_is_narrated_with_the_cells_it_speaks_about(data):
    """The 6B draft-block table's slide has five sentences, each lighting cells that exist on that slide, and the
    verdict sentence says the kept count the table's own status column shows."""
    for lang in LANGS:
        [slide] = [s for s in data["deck"][lang]["slides"] if "narration" in s]
        assert slide["step"] == "6B" and slide["kind"] == "table"
        assert len(slide["narration"]) == 5
        for said in slide["narration"]:
            for sel in said["lit"]:
                attr, value = re.fullmatch(r'(?:tr)?\[data-(col|row)="(\d+)"\]', sel).groups()
                assert f'data-{attr}="{value}"' in slide["html"], (lang, sel)
        kept = slide["html"].count(f">{UI['accepted'][lang]}<")
        assert f" {kept}" in slide["narration"][3]["text"], slide["narration"][3]["text"]
        [col] = [sel for sel in slide["narration"][3]["lit"] if sel.startswith("[data-col")]  # the verdicts' column
        j = re.search(r"\d+", col).group()
        words = {UI[k][lang] for k in ("accepted", "rejected")}
        assert any(f'<td data-col="{j}">{w}</td>' in slide["html"] for w in words), (lang, col)  # not p_d / p_t


@pytest.fixture(scope="module")
def default_data() -> dict:
    return presenter.build_data()


def test_default_load_holds_drafts_back(default_data):
    """At the default R some rounds send fewer than k drafts (the ○ "not sent" cells appear) and one rejects."""
    for lang in LANGS:
        run = default_data["debugger"][lang]
        lengths = [r["verify_len"] for r in run["rounds"]]
        assert run["requests"] == presenter.DEFAULT_REQUESTS
        assert any(n < run["k"] for n in lengths), lengths
        assert any("rejected" in r["status"] for r in run["rounds"])


def test_each_language_decodes_its_own_prompt(default_data):
    """The English deck follows an English prompt, the Vietnamese deck a Vietnamese one (--prompt: both the same)."""
    vi_letters = re.compile("[" + "".join(chr(c) for c in range(0x1EA0, 0x1EFA)) + "\u0111\u01a1\u01b0]")
    tok = default_tokenizer()
    for lang in LANGS:
        prompt = default_data["prompt"][lang]
        assert prompt == presenter.DECK_PROMPT[lang]
        run = default_data["debugger"][lang]
        assert tok.decode(run["tokens"][: run["prompt_len"]]) == prompt
        assert bool(vi_letters.search(prompt)) == (lang == "vi"), prompt
    same = presenter.build_data(prompt="Hello", rounds=2)
    assert same["prompt"] == {lang: "Hello" for lang in LANGS}


def test_a_rejection_shows_early(default_data):
    """The narrated 6B table and one of the first rounds reject a draft, in both languages: the class sees a
    rejection before the rounds run long (not only in round 10 of 12)."""
    for lang in LANGS:
        [table] = [s for s in default_data["deck"][lang]["slides"] if "narration" in s]
        assert f">{UI['rejected'][lang]}<" in table["html"], lang
        rounds = default_data["debugger"][lang]["rounds"]
        assert any("rejected" in r["status"] for r in rounds[:2]), [r["status"] for r in rounds[:2]]


def test_one_ell_in_6b(default_data):
    """One ℓ in 6B: the narrated table verifies the ℓ the scheduler picks at the deck's R, the ℓ its sentences and
    its title name; at T = 0 the table is the rounds' round 1 (same drafts, same verdict)."""
    for lang in LANGS:
        [table] = [s for s in default_data["deck"][lang]["slides"] if "narration" in s]
        r1 = default_data["debugger"][lang]["rounds"][0]
        said = table["html"] + " ".join(n["text"] for n in table["narration"])
        ells = {int(x) for x in re.findall(r"ℓ = (\d+)", said)}
        assert ells == {r1["verify_len"]}, (lang, ells, r1["verify_len"])
        kept = table["html"].count(f">{UI['accepted'][lang]}<")
        assert kept == r1["n_accepted"]
        assert f"R = {presenter.DEFAULT_REQUESTS}" in table["narration"][3]["text"]


def test_a_load_that_sends_nothing_still_builds():
    """At R = 256 the scheduler sends no draft of the walk's round: the narrated table verifies one and says what
    the scheduler would have sent."""
    data = presenter.build_data(requests=256, rounds=2)
    for lang in LANGS:
        [table] = [s for s in data["deck"][lang]["slides"] if "narration" in s]
        said = table["narration"][3]["text"]
        assert "ℓ = 1" in said and "R = 256" in said and " 0)" in said, said


def test_rounds_show_the_temperature_they_used(trained, ids):
    """At T = 0 verify compares one-hot rows: the rounds record p_d = 1 and p_t = 1 exactly where the draft is the
    target's argmax (accepted), 0 where it is rejected — the numbers the narrated table shows, not T = 1 softmax."""
    run = scheduled_rounds(trained, ids, rounds=6, requests=1, temperature=0.0)
    for r in run["rounds"]:
        assert r["draft_probs"] == [1.0] * len(r["draft"])
        for i, st in enumerate(r["status"][: r["verify_len"]]):
            if st == ACCEPTED:
                assert r["target_probs"][i] == 1.0
            if st == REJECTED:
                assert r["target_probs"][i] == 0.0
    sampled = scheduled_rounds(trained, ids, rounds=3, requests=1, temperature=1.0, seed=3)
    assert any(0 < p < 1 for r in sampled["rounds"] for p in r["draft_probs"])  # T = 1: the sampled p_d


def test_slides_are_short_and_the_long_text_is_in_the_notes(default_data):
    """Every build slide has at most SLIDE_WORDS words of prose (both languages); the step's long explanation, the
    checks and the view's notes are in the slide's speaker notes; no slide speaks of a lesson the class never saw."""
    from lab.lesson.notes import NOTES
    from lab.present import deck

    for lang in LANGS:
        slides = default_data["deck"][lang]["slides"]
        for s in slides:
            said = max((len(n["text"].split()) for n in s.get("narration", ())), default=0)
            words = deck.slide_words(s["html"]) + said
            assert words <= deck.SLIDE_WORDS[lang], (lang, s["step"], s["kind"], words)
            assert "notes" in s, (lang, s["step"], s["kind"])
            assert NOTES["lesson_col"][lang].lower() not in s["html"].lower(), (s["step"], s["kind"])  # not seen
            for key in ("lesson_pd", "lesson_prefix"):  # the notes that read the lesson's table go with it
                assert NOTES[key][lang].split("{")[0] not in html.unescape(s["notes"]), (s["step"], s["kind"], key)
        six = [s for s in slides if s["step"] == "6B"]
        text = next(s for s in six if s["kind"] == "text")
        checks = next(s for s in six if s["kind"] == "checks")
        assert deck.slide_words(text["notes"]) > 5 * deck.slide_words(text["html"])  # the long form moved, whole
        assert "ℓ" in checks["notes"] and "<li>" in checks["notes"]  # the checks' list and the developer notes
    assert set(deck.SHORT) == set(STEP_IDS)  # every step has its short form


def test_verdict_sentences_agree_in_number():
    """ "1 draft", "2 drafts": the noun follows the count, in the Python sentences and in the page's."""
    from lab.present import deck

    assert deck.n_drafts(1, "en") == "1 draft" and deck.n_drafts(3, "en") == "3 drafts"
    for lang in LANGS:
        assert "{n}" in deck.TEXT["n_draft_one"][lang] and "{n}" in deck.TEXT["n_draft_many"][lang]


def test_strings_in_both_languages(data):
    ui = data["ui"]
    for key, text in ui.items():
        assert text["vi"] and text["en"], key
    app = asset("presenter_app.js") + asset("presenter_template.html")
    used = set(re.findall(r'data-t="(\w+)"', app)) | set(re.findall(r'\bt\("(\w+)"', app))
    statuses = {"accepted", "rejected", "not_verified", "not_sent", "resampled", "bonus"}  # t(statusKey(…))
    assert used | statuses <= set(ui), f"strings the page asks for but does not have: {sorted(used - set(ui))}"
    assert not set(presenter.TEXT) & set(presenter.SHARED)


def test_page_is_offline(page):
    low = page.lower()
    urls = set(re.findall(r"https?://[^\s\"'\\]+", low))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace names, it fetches nothing
    assert re.findall(r"<script[^>]*src=\"([^\"]+)\"", page) == [presenter.PLOTLY]  # served beside the page
    assert "@import" not in low and "<link" not in low


def test_server_serves_the_page_and_plotly(page):
    server = presenter.serve_in_thread(page, port=0)
    try:
        url = presenter.url_of(server)
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url) as r:
            assert r.read().decode("utf-8") == page
        with urllib.request.urlopen(url + presenter.PLOTLY) as r:
            assert r.read() == presenter.plotly_js()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "nothing-here")
        assert e.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_cli_writes_the_site(tmp_path, monkeypatch, data, capsys):
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: data)  # the model run is the fixture's
    out = tmp_path / "site"
    assert presenter.main(["--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [OWNER, "index.html", presenter.PLOTLY]  # OWNER: what it wrote
    html = (out / "index.html").read_text(encoding="utf-8")
    embedded = re.search(r'id="presenter-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(embedded)["debugger"] == data["debugger"]
    assert "index.html" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, field",
    [
        (["--requests", "0"], "--requests"),
        (["--requests", "257"], "--requests"),
        (["--rounds", "0"], "--rounds"),
        (["--port", "70000"], "--port"),
        (["--lang", "fr"], "--lang"),
        (["--temperature", "-1"], "--temperature"),
        (["--prompt", "  "], "--prompt"),
    ],
)
def test_cli_bad_input(args, field, capsys, monkeypatch):
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: pytest.fail("ran the model on bad input"))
    assert presenter.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and field in err


def test_cli_out_must_be_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: pytest.fail("ran the model on bad input"))
    f = tmp_path / "a-file"
    f.write_text("x")
    assert presenter.main(["--out", str(f)]) == 2
    assert "--out" in capsys.readouterr().err


# ---- the README's pictures (`make pictures`) ------------------------------------------------------------------------
def test_readme_pictures_are_small_checked_in_pngs():
    from lab.present.pictures import OUT, PICTURES

    repo = Path(__file__).resolve().parents[1]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    for name in PICTURES:
        png = repo / OUT / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG: run `make pictures`"
        assert png.stat().st_size <= 250_000, f"{png} is {png.stat().st_size:,} bytes: keep README pictures small"
        assert f"({OUT}/{name})" in readme, f"the README does not show {name}"
