"""Real-browser tests (`pytest -m browser`): Chromium, driven by Playwright, clicks what a learner and a teacher click.

- JupyterLab on 127.0.0.1 opens 00_overview (a copy without outputs), runs all cells, shows the mermaid map as an
  SVG; a click on 6B opens its panel, the ℓ slider re-drafts the inspector, the language switch turns it Vietnamese;
- `python -m lab.present` (what `dspark-lab present` runs) prints its URL, the page loads, Next walks a step's
  builds and then moves the lit block (the deck itself: tests/test_browser_deck.py);
- docs/explorer.html, the lab model live in a page: tests/test_explorer.py.
A console error or an uncaught exception on any page fails its test. Screenshots: build/screenshots/ (gitignored).
Skipped with the reason where no chromium is found, outside CI (see tests/conftest.py); in CI they must run.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
TOKEN = "dspark-browser-test"
START_S = 120  # the most a server may take to come up (a loaded 2-core CI machine); it is a guard, not a measure
RUN_ALL_MS = 180_000  # the most "Run All" of 00_overview may take (≈ 10 s on an idle machine)
WAIT_MS = 60_000  # the most any one redraw may take


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, log: Path) -> None:
    """Poll `url` until it answers, failing with the server's log if it exits or never answers."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"no answer from {url} after {START_S} s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# JupyterLab user settings for a quiet, deterministic page: every cell rendered (no windowing, so off-screen outputs
# exist in the DOM), and no news or update check (nothing reaches the network, no pop-up covers the notebook)
LAB_SETTINGS = {
    "notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
    "apputils-extension/notification.jupyterlab-settings": '{"fetchNews": "false", "checkForUpdates": false}',
}


KERNEL = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory, chromium_path):
    """JupyterLab on 127.0.0.1 serving a folder that holds 00_overview without its outputs (the repository's notebook
    is never opened, so nothing autosaves into it); yields the notebook's URL."""
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    nb = nbformat.read(REPO / "notebooks" / "00_overview.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["kernelspec"] = KERNEL  # the kernel of this Python (else JupyterLab asks which kernel to start)
    nbformat.write(nb, root / "00_overview.ipynb")
    for name, text in LAB_SETTINGS.items():
        path = home / "settings" / "@jupyterlab" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    port = free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_CONFIG_DIR=str(home / "config"))
    log = home / "jupyterlab.log"
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/status?token={TOKEN}", proc, log)
        yield f"{base}/lab/tree/00_overview.ipynb?token={TOKEN}"
    finally:
        stop(proc)


def test_overview_notebook_in_jupyterlab(jupyterlab, tab):
    page = tab.page
    page.goto(jupyterlab)
    # the page's own connection to the kernel is up (a Run All before it would queue cells that never run)
    page.get_by_text(re.compile(r"^Python 3 \(ipykernel\) \| Idle$")).wait_for(timeout=RUN_ALL_MS)
    page.locator("li.lm-MenuBar-item", has_text="Run").click()
    page.locator("li[data-command='runmenu:run-all']").click()
    every_cell_ran = """() => {
        const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
        return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
    }"""
    page.wait_for_function(every_cell_ran, timeout=RUN_ALL_MS)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")  # tracebacks too
    assert errors.count() == 0, errors.first.inner_text()

    # JupyterLab drew the mermaid map itself, offline: an SVG (as an <img> data URI) that holds the ten blocks
    mermaid = page.locator(".jp-RenderedMermaid img[src^='data:image/svg+xml']").first
    mermaid.scroll_into_view_if_needed()
    assert mermaid.is_visible() and mermaid.evaluate("img => img.naturalWidth") > 0
    svg = urllib.parse.unquote(mermaid.get_attribute("src"))
    assert "<svg" in svg and all(sid in svg for sid in ("1A", "3C", "6B"))

    six_b = page.locator(".dspark-map-button.dspark-step-6B")
    six_b.scroll_into_view_if_needed()
    six_b.click()
    panel = page.locator(".dspark-panel-6B")
    panel.wait_for(timeout=WAIT_MS)
    assert "6B" in panel.inner_text()

    table = page.locator(".dspark-draft-table")
    assert "ℓ = 5" in table.inner_text()
    handle = page.locator(".dspark-control-verify_len .noUi-handle")
    handle.scroll_into_view_if_needed()
    handle.focus()
    page.keyboard.press("ArrowLeft")  # ℓ 5 → 4: the inspector re-drafts and redraws its table
    page.wait_for_function(
        "() => document.querySelector('.dspark-draft-table').innerText.includes('ℓ = 4')", timeout=WAIT_MS
    )

    page.locator(".dspark-control-lang button", has_text="vi").click()
    page.wait_for_function(
        "() => document.querySelector('.dspark-inspector-title').innerText.includes('6B') && "
        "document.querySelector('.dspark-app').innerText.includes('Luồng')",
        timeout=WAIT_MS,
    )
    assert "Luồng" in page.locator(".dspark-app").inner_text()  # the flow line, in Vietnamese
    tab.assert_no_errors()


@pytest.fixture(scope="module")
def presenter_url(tmp_path_factory, chromium_path):
    """`python -m lab.present --port 0 --rounds 4`: the command a teacher runs; its first line says the URL."""
    log = tmp_path_factory.mktemp("present") / "present.log"
    cmd = [sys.executable, "-m", "lab.present", "--port", "0", "--rounds", "4"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        line = proc.stdout.readline()  # blocks until the page is built and the server listens
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if not found:
            pytest.fail(f"`python -m lab.present` did not print its URL: {line!r}\n{log.read_text()[-3000:]}")
        yield found.group(0)
    finally:
        stop(proc)


def test_presenter_loads_and_next_moves_the_highlight(presenter_url, tab):
    page = tab.page
    page.goto(presenter_url)
    lit = page.locator("#map .block.active")
    assert lit.get_attribute("id") == "step-1A"
    assert "1A" in page.locator("#slide h2").inner_text()

    def next_block(key: str) -> str:
        """Press `key` until the lit block changes (a step has several builds); the block lit then."""
        start = lit.get_attribute("id")
        for _ in range(20):
            page.keyboard.press(key)
            if lit.get_attribute("id") != start:
                return lit.get_attribute("id")
        pytest.fail(f"{key} never left {start}")

    page.locator("#next").click()
    assert lit.get_attribute("id") == "step-1A"  # 1A's next build, still 1A
    assert next_block("PageDown") == "step-1B"
    assert next_block("ArrowRight") == "step-2A"  # the keyboard does what Next does
    assert next_block("ArrowLeft") == "step-1B"

    page.keyboard.press("]")  # the 6B rounds: Next now walks the rounds, phase by phase
    assert lit.count() == 0 and page.locator(".rounds").get_attribute("data-round") == "0"
    page.locator("#next").click()
    assert page.locator(".rounds").get_attribute("data-round") == "1"
    assert page.locator("#strip").count() == 1 and page.locator("#window-ring .slot").count() == 8

    size = page.evaluate("() => getComputedStyle(document.getElementById('slide')).fontSize")
    page.locator("#font-up").click()
    assert page.evaluate("() => getComputedStyle(document.getElementById('slide')).fontSize") != size
    page.locator("#lang-vi").click()
    assert "Vòng" in page.locator("#slide h2").inner_text()
    tab.assert_no_errors()
