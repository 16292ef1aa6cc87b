"""The notebooks' committed outputs: each notebook executed once, its figures kept as small PNG pictures.

    python -m lab.sync.nboutputs --write [NAME …]   execute the notebooks (all, or those named: 06, 08_scheduler)
                                                   top to bottom and write them with their outputs; their run
                                                   times go to docs/notebooks.json (docs/notebooks.md quotes them)

A student who opens a notebook sees what it draws before running anything. The outputs are made small on purpose:
- a plotly figure becomes one PNG (drawn offline by the system's chromium from plotly's own plotly.min.js, as
  lab/present/pictures.py draws the README's pictures), not plotly's JSON and its script;
- a text output keeps its first MAX_LINES lines (a note says how many more there were), and a large HTML copy of a
  text (rich's coloured tables) gives way to the plain text;
- what only a live kernel can show (a widget) and the notebook font's <style> (only needed for live Vietnamese
  output; the committed outputs are the English run) are left out.

The notebook keeps the sha256 of its code cells in its metadata (`OUTPUTS_KEY`; the check and its limits live in
nbsync.py): `python -m lab.sync.nbsync --check`
fails when a code cell changed since the outputs were made, or when the outputs are missing or too large. It does
not compare the outputs byte for byte: a PNG drawn by another chromium differs in its bytes, not in what it shows.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import nbformat

from .nbsync import (
    MAX_TOTAL_BYTES,
    NOTEBOOKS,
    OUTPUTS_KEY,
    PLOTLY,
    ROOT,
    WIDGET,
    code_hash,
    render,
    sources,
)

RUNTIMES = ROOT / "docs" / "notebooks.json"  # {"seconds": {notebook: wall seconds of the run that made the outputs}}
MAX_LINES = 40  # a text output beyond this is cut, with a note
MAX_LINE_CHARS = 240
MAX_HTML_CHARS = 4_000  # an HTML output beside its plain text: kept only when this small
FIGURE_WIDTH = 700  # px: a notebook column; scale 1 (the PNGs stay tens of kB)
WIDE_FIGURE_WIDTH = 960  # px: a figure of several panels
FIGURE_HEIGHT = 400  # px, where a figure sets no height of its own
CELL_TIMEOUT_S = 240


def trim_text(text: str, max_lines: int = MAX_LINES) -> str:
    """`text` cut to its first `max_lines` lines (each at most MAX_LINE_CHARS), with a note of what was cut."""
    lines = text.splitlines(keepends=True)
    cut = [ln if len(ln) <= MAX_LINE_CHARS else ln[:MAX_LINE_CHARS] + "…\n" for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        cut.append(f"… ({len(lines) - max_lines} more lines: run the notebook to see them)\n")
    return "".join(cut)


def _is_style(html: str) -> bool:
    return html.lstrip().startswith("<style>") and html.rstrip().endswith("</style>")


def slim_output(out: dict[str, Any], figures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One output as committed (None: left out). A plotly figure is kept as a placeholder whose figure JSON is
    appended to `figures`; `to_png` fills it in."""
    kind = out["output_type"]
    if kind == "stream":
        return {**out, "text": trim_text(out["text"])}
    if kind == "error":
        raise RuntimeError(f"the notebook raised: {out.get('ename')}: {out.get('evalue')}")
    data = out.get("data", {})
    if PLOTLY in data:
        figures.append(data[PLOTLY])
        return {"output_type": "display_data", "metadata": {}, "data": {"image/png": len(figures) - 1}}
    if WIDGET in data:
        return None
    if "text/html" in data and _is_style(data["text/html"]):
        return None
    kept = {k: v for k, v in data.items() if k in ("text/plain", "text/html", "text/markdown", "image/png")}
    if "text/plain" in kept:
        kept["text/plain"] = trim_text(kept["text/plain"])
    if "text/html" in kept and "text/plain" in kept and len(kept["text/html"]) > MAX_HTML_CHARS:
        del kept["text/html"]  # a rich table reads the same in its plain text (the lab's tables need no colour)
    if not kept:
        return None
    result = {"output_type": kind, "metadata": {}, "data": kept}
    if kind == "execute_result":
        result["execution_count"] = out.get("execution_count")
    return result


def smaller_png(png: bytes) -> bytes:
    """The same PNG with its image data deflated at the highest level (chromium writes it fast, a fifth larger)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, chunks, idat = 8, [], b""
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IDAT":
            idat += data
        else:
            chunks.append((kind, data))
    packed = zlib.compress(zlib.decompress(idat), 9)
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))  # noqa: E731
    return png[:8] + b"".join(
        (chunk(b"IDAT", packed) if kind == b"IEND" else b"") + chunk(kind, data) for kind, data in chunks
    )


def find_chromium() -> str:
    """$DSPARK_CHROMIUM or chromium on PATH, as lab/present/pictures.py finds it (sync does not import present)."""
    import os
    import shutil

    path = os.environ.get("DSPARK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise OSError("no chromium found: install it (apt-get install chromium) or set DSPARK_CHROMIUM")
    return path


def to_png(figures: list[dict[str, Any]]) -> list[bytes]:
    """Each plotly figure (its JSON) as PNG bytes, drawn in the system's chromium with plotly's bundled script."""
    if not figures:
        return []
    import plotly
    from playwright.sync_api import sync_playwright

    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    pngs = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox"])
        page = browser.new_page()
        page.set_content("<html><body><div id='fig'></div></body></html>")
        page.add_script_tag(content=script)
        for fig in figures:
            layout = fig.get("layout", {})
            panels = "xaxis2" in layout  # side-by-side panels need the width of a wide notebook
            width = layout.get("width", WIDE_FIGURE_WIDTH if panels else FIGURE_WIDTH)
            size = {"width": width, "height": layout.get("height", FIGURE_HEIGHT)}
            url = page.evaluate(
                "([fig, size]) => Plotly.toImage({data: fig.data, layout: fig.layout},"
                " {format: 'png', width: size.width, height: size.height, scale: 1})",
                [fig, size],
            )
            pngs.append(smaller_png(base64.b64decode(url.split(",", 1)[1])))
        browser.close()
    return pngs


def make_outputs(source: Path) -> tuple[str, float]:
    """The notebook of `source` executed top to bottom (LANG as written, the exercise unanswered) with its outputs
    slimmed; → (its .ipynb text, seconds the execution took)."""
    from nbclient import NotebookClient

    nb = nbformat.reads(render(source), as_version=4)
    t = time.perf_counter()
    NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(source.parent)}},
        record_timing=False,
        store_widget_state=False,
    ).execute()
    seconds = time.perf_counter() - t
    figures: list[dict[str, Any]] = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(o) for o in map(lambda o: slim_output(o, figures), cell.outputs) if o]
    pngs = to_png(figures)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if isinstance(out.get("data", {}).get("image/png"), int):
                out["data"]["image/png"] = base64.b64encode(pngs[out["data"]["image/png"]]).decode("ascii")
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}  # as nbsync renders it (the kernel filled in its version)
    nb.metadata[OUTPUTS_KEY] = {"code_sha256": code_hash(nb)}
    return nbformat.writes(nb) + "\n", seconds


def write_outputs(names: list[str] | None = None, folder: Path = NOTEBOOKS, out=sys.stdout) -> dict[str, float]:
    """Execute the notebooks (all, or those whose name starts with one of `names`) and write them with outputs;
    their run times go into docs/notebooks.json (others' times are kept)."""
    from dspark_mini.files import write_atomic

    chosen = [s for s in sources(folder) if not names or any(s.stem.startswith(n) for n in names)]
    if names and not chosen:
        raise SystemExit(f"no notebook starts with {', '.join(names)}: allowed {[s.stem for s in sources(folder)]}")
    seconds = {}
    for src in chosen:
        text, seconds[src.stem] = make_outputs(src)
        write_atomic(src.with_suffix(".ipynb"), text)
        print(
            f"wrote {src.with_suffix('.ipynb').name}: {len(text.encode()):,} bytes, ran {seconds[src.stem]:.1f} s",
            file=out,
        )
    if folder == NOTEBOOKS:
        old = json.loads(RUNTIMES.read_text(encoding="utf-8"))["seconds"] if RUNTIMES.is_file() else {}
        times = {k: v for k, v in old.items() if k in {s.stem for s in sources(folder)}}
        times.update({k: round(v, 1) for k, v in seconds.items()})
        doc = {
            "what": "wall seconds of each notebook's top-to-bottom run (python -m lab.sync.nboutputs --write)",
            "cpus": _cpus(),
            "seconds": dict(sorted(times.items())),
        }
        write_atomic(RUNTIMES, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in folder.glob("*.ipynb"))
    print(f"notebooks: {total:,} bytes of .ipynb in all (at most {MAX_TOTAL_BYTES:,})", file=out)
    return seconds


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.sync.nboutputs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--write", action="store_true", required=True, help="execute and write the notebooks")
    ap.add_argument("names", nargs="*", help="only these notebooks (a name's start: 06, 08_scheduler)")
    args = ap.parse_args(argv)
    write_outputs(args.names or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
