"""`--preset flash-cpu` on a terminal: its screens fit 80 columns with every word whole, and its long parts show
progress (lab/style.py) in both languages.

The real widths take minutes and 11 GiB to build, so the screens are drawn from flash-cpu's layers at narrow
widths (lossless.NARROW_FLASH) but with its real vocabulary of 129,280: what makes its tables wide — ids up to
⟨129279⟩ through the lab tokenizer, the logits shapes — is the real preset's, in seconds.
"""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console

import lab.lesson.generation as generation
import lab.lesson.walk as walk_module
from dspark_mini import build_model
from dspark_mini.config import flash_cpu_config
from dspark_mini.presets import text_tokenizer
from lab import style as progress  # shown, phase and their texts (PROGRESS_TEXT)
from lab.evaluation.lossless import NARROW_FLASH
from lab.lesson.walk import build_views
from lab.measured import flash_cpu_peak
from lab.screens.cli import slow
from lab.screens.render import render_generate, render_walk
from lab.style import cell, fit_widths
from lab.text import LANGS

WIDTH = 80


def narrow_config():
    real = ("vocab_size", "dspark_noise_token_id")  # flash-cpu's own: 129,280 ids, its noise token among them
    return flash_cpu_config(**{k: v for k, v in NARROW_FLASH.items() if k not in real})


def narrow_open(preset, weights=None, checkpoint=None, seed=0, device=None, dtype=None, lang="en", before=None):
    """open_preset for flash-cpu at narrow widths and the real vocabulary (the lab tokenizer's ids inside it)."""
    cfg = narrow_config()
    tok = text_tokenizer(cfg)
    model = build_model(cfg, seed, on_device=True).eval()
    return model, tok, before(cfg, tok) if before is not None else None


@pytest.fixture(scope="module")
def narrow_walk():
    mp = pytest.MonkeyPatch()
    mp.setattr(walk_module, "open_preset", narrow_open)
    try:
        yield walk_module.run_walk(preset="flash-cpu")
    finally:
        mp.undo()


def drawn(render, *args) -> str:
    console = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
    render(console, *args)
    return console.export_text()


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if cell_len(line) > WIDTH]


@pytest.mark.parametrize("lang", LANGS)
def test_the_walk_at_the_real_vocabulary_fits_80_columns_with_words_whole(narrow_walk, lang) -> None:
    walk = build_views(narrow_walk, lang)
    assert walk.cfg.vocab_size == 129_280
    text = drawn(render_walk, walk, lang)
    assert not too_wide(text)
    words = " ".join(text.split())
    for view in walk.views.values():
        for table in view.tables:
            for row in table.rows[:23]:  # what rich_table shows of it
                for word in " ".join(cell(x) for x in row).split():
                    assert word in words, f"{view.step.id} · {table.title}: {word!r} is folded at {WIDTH} columns"


def test_generate_at_the_real_vocabulary_fits_80_columns(monkeypatch) -> None:
    monkeypatch.setattr(generation, "open_preset", narrow_open)
    report = generation.compare(preset="flash-cpu", max_new_tokens=6)
    for lang in LANGS:
        assert not too_wide(drawn(render_generate, report, lang))


def test_fit_widths_folds_the_widest_column_first_when_words_do_not_fit() -> None:
    assert fit_widths([10, 20], [4, 6], 16) == [8, 8]  # the widest shrinks first, never below its longest word
    assert fit_widths([10, 20], [4, 16], 16) == [4, 12]
    assert fit_widths([4, 30], [4, 14], 12) == [4, 8]  # words do not fit: the widest folds, the other stays whole


# ---- progress ----------------------------------------------------------------------------------------------------
def terminal() -> Console:
    return Console(width=WIDTH, record=True, file=io.StringIO(), force_terminal=True, color_system=None)


def test_a_phase_outside_a_display_is_silent() -> None:
    with progress.phase("draw") as advance:
        advance(1, 2)  # nothing shown, nothing raised


@pytest.mark.parametrize("lang", LANGS)
def test_every_phase_is_told_in_both_languages_within_80_columns(lang) -> None:
    out = terminal()
    keys = list(progress.PROGRESS_TEXT)
    with progress.shown(lang, console=out) as bar:
        for key in keys:
            with progress.phase(key, peak=flash_cpu_peak(lang), n=256) as advance:
                advance(3, 4)
    last = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
    last.print(bar.get_renderable())  # the display's last frame, as the terminal keeps it
    text = last.export_text()
    assert not too_wide(text) and len(text.splitlines()) == len(keys)
    for key in keys:
        assert progress.PROGRESS_TEXT(key, lang, peak=flash_cpu_peak(lang), n=256) in text
    assert text.count("✓") == len(keys)


def test_no_display_where_stderr_is_not_a_terminal_or_it_is_off() -> None:
    quiet = Console(width=WIDTH, record=True, file=io.StringIO())  # a pipe, --json, a test
    for console, enabled in ((quiet, True), (terminal(), False)):
        with progress.shown("en", enabled=enabled, console=console), progress.phase("draw"):
            pass
        assert console.export_text() == ""


def test_drawing_the_weights_reports_every_value(narrow_walk) -> None:
    seen: list[tuple[int, int]] = []
    cfg = narrow_walk.cfg
    model = build_model(cfg, 0, on_device=True, progress=lambda done, total: seen.append((done, total)))
    total = sum(p.numel() for p in model.parameters())
    assert seen[-1] == (total, total) and all(a[0] < b[0] for a, b in zip(seen, seen[1:], strict=False))


@pytest.mark.parametrize("lang", LANGS)
def test_building_flash_cpu_shows_the_weights_drawn_with_the_measured_peak(monkeypatch, lang) -> None:
    """run_model, the one place a preset's seeded init is drawn: a bar to 100 % named with flash-cpu's peak."""
    from lab.runtime import run

    monkeypatch.setattr(run, "get_config", lambda preset: narrow_config())
    out = terminal()
    with progress.shown(lang, console=out) as bar:
        run.run_model(None, preset="flash-cpu", lang=lang)
    last = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
    last.print(bar.get_renderable())
    text = last.export_text()
    assert progress.PROGRESS_TEXT("draw_peak", lang, peak=flash_cpu_peak(lang)) in text and "100%" in text


def test_the_walk_of_flash_cpu_names_its_phases(monkeypatch) -> None:
    monkeypatch.setattr(walk_module, "open_preset", narrow_open)
    out = terminal()
    with progress.shown("vi", console=out):
        walk_module.run_walk(preset="flash-cpu", steps=("6B",), lang="vi")
    text = out.export_text()
    for key in ("forward", "parity", "round", "views"):
        assert progress.PROGRESS_TEXT(key, "vi") in text


@pytest.mark.parametrize(("preset", "shown"), [("lab", False), ("flash-cpu", True), ("flash", True)])
def test_progress_is_shown_for_the_large_presets(preset, shown) -> None:
    class Args:
        checkpoint = None

    args = Args()
    args.preset = preset
    assert slow(args) is shown
