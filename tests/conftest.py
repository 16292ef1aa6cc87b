"""Shared fixtures for the mechanism tests: the lab model (built once) and the real-size model on `meta`.

The lab model is shared by many tests, so tests that need to modify weights build their own modules.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from dspark_mini import Trace, build_model, get_config

# The lab tensors are tiny: intra-op threads only add overhead, and on a busy 2-core machine the OpenMP
# workers spin and slow some forwards down 10-100× (a 2 × 10-token forward took 9 s instead of 0.06 s).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def lab_cfg():
    return get_config("lab")


@pytest.fixture(scope="session")
def lab_model(lab_cfg):
    m = build_model(lab_cfg, seed=0)
    m.eval()
    return m


@pytest.fixture(scope="session")
def flash_cfg():
    return get_config("flash")


@pytest.fixture(scope="session")
def flash_meta(flash_cfg):
    """DeepSeek-V4.1-Flash at real size on the meta device (~5 s to build; built once per session)."""
    return build_model(flash_cfg, device="meta")


def make_tokens(cfg, batch: int, seqlen: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, seqlen), generator=g, dtype=torch.long)


@pytest.fixture(scope="session")
def traced_run(lab_model, lab_cfg):
    """One traced forward of the lab model over 2 × 37 tokens (> window 8, > candidate pool 16).

    Also captures every block's input stream x [B, S, hc, D] (after Engram), its attention output
    [B, S, D], its MoE output [B, S, D] and its output stream, with hooks (the Trace does not record those)."""
    tokens = make_tokens(lab_cfg, 2, 37, seed=123)
    tr = Trace()
    block_in, attn_out, ffn_out, block_out = {}, {}, {}, {}
    handles = []
    for blk in lab_model.layers:
        i = blk.layer_id
        handles.append(
            blk.register_forward_pre_hook(lambda mod, args, i=i: block_in.__setitem__(i, args[0].detach().clone()))
        )
        handles.append(
            blk.attn.register_forward_hook(lambda mod, args, out, i=i: attn_out.__setitem__(i, out.detach().clone()))
        )
        handles.append(
            blk.ffn.register_forward_hook(lambda mod, args, out, i=i: ffn_out.__setitem__(i, out[0].detach().clone()))
        )
        handles.append(
            blk.register_forward_hook(lambda mod, args, out, i=i: block_out.__setitem__(i, out[0].detach().clone()))
        )
    try:
        with torch.no_grad():
            out = lab_model(tokens, trace=tr)
    finally:
        for h in handles:
            h.remove()
    return {
        "tokens": tokens,
        "trace": tr,
        "out": out,
        "block_in": block_in,
        "attn_out": attn_out,
        "ffn_out": ffn_out,
        "block_out": block_out,
    }


# ---- real-browser tests (`pytest -m browser`, tests/test_browser.py): Playwright driving Debian's chromium ----------
# No browser is downloaded at run time: Playwright launches the system's chromium (`apt-get install chromium`; .ci/run
# installs it). Outside CI a machine without chromium (or without the playwright package) skips these tests with the
# reason; in CI (CI=true) that is a failure, so a green CI always means the browser tests ran.
BROWSER_SCREENSHOTS = Path(__file__).resolve().parents[1] / "build" / "screenshots"  # gitignored (build/)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")


def find_chromium() -> str | None:
    """$DSPARK_CHROMIUM if set, else the first of CHROMIUM_NAMES on PATH."""
    chosen = os.environ.get("DSPARK_CHROMIUM")
    if chosen:
        return chosen if Path(chosen).is_file() else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing_browser(reason: str) -> None:
    """Fail in CI, skip elsewhere, saying why."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}: .ci/run installs chromium and requirements.txt has playwright")
    pytest.skip(f"browser tests skipped: {reason} (apt-get install chromium; pip install -r requirements.txt)")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        missing_browser(f"no chromium found (looked for $DSPARK_CHROMIUM, {', '.join(CHROMIUM_NAMES)})")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing_browser("the playwright package is not installed")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: chromium refuses to start as root (CI runs as root) with its sandbox on
        b = pw.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        yield b
        b.close()


@dataclass
class Tab:
    """A browser page and every console error or uncaught exception it raised (a test fails on any)."""

    page: Any
    errors: list[str]

    def assert_no_errors(self) -> None:
        assert not self.errors, "the page logged errors:\n" + "\n".join(self.errors)


@pytest.fixture
def tab(browser, request):
    """A fresh page (1400 × 900); its screenshot lands in build/screenshots/<test>.png when the test ends."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    yield Tab(page, errors)
    BROWSER_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(BROWSER_SCREENSHOTS / f"{request.node.name}.png"))
    context.close()
