"""Diagrams generated from the step registry: the 4-column map and the 6B flow, as mermaid and as SVG.

Everything here is derived from `lab/lesson/steps.py` (ids, titles, columns, FLOW, UI strings) and, for the 6B
flow's numbers (tap layers, block size, Markov rank, draft layers), from the `lab` and `flash` presets, so
a title or a number changes in one place and `python -m lab.sync.diagrams --check` notices the committed files
going stale. `python -m lab.sync.diagrams --write` regenerates them:

  diagrams/architecture_map.{vi,en}.mmd   the 4 columns / 10 blocks (1A → 6B)
  diagrams/flow_6b.{vi,en}.mmd            input hidden lanes → draft block → confidences → scheduler ℓ → verify
                                           with the real forward → commit
  docs/map.svg, docs/map.vi.svg           a self-contained picture of the map (the README's)

The mermaid sources are authored with mermaid-py's builders (FlowChart, Node, Link, Style) only. Its
renderer, `mermaid.Mermaid(...)`, sends the diagram to a web service (mermaid.ink) the moment it is
built; nothing here calls it. JupyterLab ≥ 4.1 renders mermaid itself, from a ```mermaid fence in
markdown or from a `text/vnd.mermaid` output (`display_mermaid`).

Two layout notes on the map. Mermaid ignores a subgraph's `direction` as soon as one of its nodes is
linked to a node outside it, so the edges that cross columns (2A → 3A, 3C → 4A, 4A → 5A) are drawn
between the column subgraphs and labelled with their step ids; edges inside a column link the step nodes,
and each column reads top to bottom, as the clickable widget map does (1A at the top of column 1, 6B at
the foot of column 4). There are
no `click` lines: mermaid's click needs a URL or a page-level JavaScript callback, neither of which
exists offline in a notebook; the clickable map is the widget one.
"""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape

from mermaid.flowchart import FlowChart, Link, Node
from mermaid.style import Style

from ..lesson.steps import COLUMNS, FLOW, STEPS, Edge, get_step
from ..text import LANGS, UI, Texts, check_lang, lang_string, lang_table

REPO_ROOT = Path(__file__).resolve().parents[2]
DIAGRAM_DIR = "diagrams"
SVG_FILES = lang_string("diagrams", "svg_files")
FIX_COMMAND = "python -m lab.sync.diagrams --write"

TEXT = lang_table("diagrams", "text")
TEXT = Texts(TEXT, "diagram")

# column colours, shared by the mermaid classDefs and the SVG: (panel fill, stroke, text)
_COLUMN_COLOURS: dict[int, tuple[str, str, str]] = {
    1: ("#e8f1fb", "#3f6fae", "#15304f"),
    2: ("#e9f6ec", "#3d8b52", "#153a20"),
    3: ("#fdf1e2", "#b8731f", "#4a2c08"),
    4: ("#f1ebfa", "#6f4fb0", "#2c1a4f"),
}


# ---- mermaid-py, without its two habits a committed, diffed file cannot have --------------------------
class _FlowChart(FlowChart):
    """mermaid-py's FlowChart with a stable script.

    The base class writes a YAML title block before `flowchart`, collects classDefs in a set (so their order
    follows the per-process string hash seed) and only from top-level nodes (a style used inside a
    subgraph gets no classDef). Here: `flowchart` first, a `%%` comment, classDefs of every node sorted by
    name, then nodes and links, indented by subgraph depth. Nothing else of the base class is used.
    """

    def __init__(self, title: str, nodes: list[Node], links: list[Link], orientation: str, comment: str):
        self.comment = comment
        super().__init__(title, nodes=nodes, links=links, orientation=orientation)

    def _build_script(self) -> None:
        def styles(nodes: list[Node]) -> list[Style]:
            return [s for n in nodes for s in (*n.styles, *styles(n.sub_nodes))]

        by_name = {s.name: s for s in styles(self.nodes)}
        lines = [f"flowchart {self.orientation}", f"%% {self.comment}"]
        lines += [str(by_name[name]) for name in sorted(by_name)]
        lines += [str(node) for node in self.nodes] + [str(link) for link in self.links]
        self.script = _indent("\n".join(lines))


def _indent(script: str) -> str:
    """Re-indent a mermaid script: 4 spaces per subgraph level under the `flowchart` line."""
    out, depth = [], 1
    for i, raw in enumerate(script.splitlines()):
        line = raw.strip()
        if not line:
            continue
        if line == "end":
            depth -= 1
        out.append(line if i == 0 else "    " * depth + line)
        if line.startswith("subgraph "):
            depth += 1
    return "\n".join(out) + "\n"


def _label(text: str) -> str:
    """Text safe inside a mermaid "quoted" label (a double quote would end it)."""
    return text.replace('"', "#quot;")


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False) or [text]


# ---- the 4-column map --------------------------------------------------------------------------------
def node_id(step_id: str) -> str:
    """The mermaid node id of a step: "1A" → "s1a" (mermaid-py lower-cases ids; a leading digit is avoided)."""
    return "s" + get_step(step_id).id.lower()


def column_id(column: int) -> str:
    """The mermaid subgraph id of a column: 1 → "col1"."""
    return f"col{column}"


def flow_string(lang: str = "en") -> str:
    """ "1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B": the steps in flow order, ↔ where FLOW is two-way."""
    check_lang(lang)
    two_way = {frozenset((e.src, e.dst)) for e in FLOW if e.bidirectional}
    parts = [STEPS[0].id]
    for prev, step in zip(STEPS, STEPS[1:], strict=False):
        parts += ["↔" if frozenset((prev.id, step.id)) in two_way else "→", step.id]
    return " ".join(parts)


def _edge_link(edge: Edge, nodes: dict[str, Node], columns: dict[int, Node]) -> Link:
    src, dst = get_step(edge.src), get_step(edge.dst)
    head_left = "left-arrow" if edge.bidirectional else "none"
    if src.column == dst.column:
        return Link(nodes[src.id], nodes[dst.id], head_left=head_left)
    arrow = "↔" if edge.bidirectional else "→"
    return Link(columns[src.column], columns[dst.column], head_left=head_left, message=f"{src.id} {arrow} {dst.id}")


def architecture_map(lang: str = "en") -> str:
    """Mermaid source of the 4-column / 10-block map: one subgraph per column (top to bottom, like the widget
    map), columns left to right, every FLOW edge (4A ↔ 6A two-way; edges between columns drawn between the column
    subgraphs)."""
    lang = check_lang(lang)
    styles = {
        c.id: Style(
            f"c{c.id}",
            fill="#ffffff",
            stroke=_COLUMN_COLOURS[c.id][1],
            color=_COLUMN_COLOURS[c.id][2],
            stroke_width="2px",
        )
        for c in COLUMNS
    }
    nodes = {
        s.id: Node(node_id(s.id), _label("<br/>".join(_wrap(s.label(lang), 32))), styles=[styles[s.column]])
        for s in STEPS
    }
    columns = {
        c.id: Node(column_id(c.id), _label(c.label(lang)), sub_nodes=[nodes[i] for i in c.step_ids], direction="TB")
        for c in COLUMNS
    }
    links = [_edge_link(e, nodes, columns) for e in FLOW]
    linked = {(get_step(e.src).column, get_step(e.dst).column) for e in FLOW}
    for a, b in zip(COLUMNS, COLUMNS[1:], strict=False):  # keep the columns in order even where no FLOW edge joins them
        if (a.id, b.id) not in linked:
            links.append(Link(columns[a.id], columns[b.id], shape="hidden", head_right="none"))
    chart = _FlowChart(
        TEXT("map_title", lang),
        list(columns.values()),
        links,
        "LR",
        f"{TEXT('map_title', lang)} · {flow_string(lang)} · {TEXT('generated', lang, command=FIX_COMMAND)}",
    )
    return chart.script


# ---- the 6B flow -------------------------------------------------------------------------------------
class _DSpark(NamedTuple):
    taps: tuple[int, ...]  # dspark_target_layer_ids
    mix: str  # dspark_tap_mix
    k: int  # dspark_block_size
    rank: int  # dspark_markov_rank
    layers: int  # n_mtp_layers


@functools.lru_cache(maxsize=1)
def _dspark_facts() -> dict[str, _DSpark]:
    """The 6B numbers of the `lab` and `flash` presets (imported lazily: the presets import torch)."""
    from dspark_mini.presets import get_config

    facts = {}
    for preset in ("lab", "flash"):
        cfg = get_config(preset)
        facts[preset] = _DSpark(
            tuple(cfg.dspark_target_layer_ids),
            cfg.dspark_tap_mix,
            cfg.dspark_block_size,
            cfg.dspark_markov_rank,
            cfg.n_mtp_layers,
        )
    return facts


def _layers(ids: tuple[int, ...], lang: str) -> str:
    """(3, 4) → "layers 3 and 4" / "lớp 3 và 4"; (37, 38, 39) → "L37..39"."""
    if len(ids) >= 3 and list(ids) == list(range(ids[0], ids[-1] + 1)):
        return f"L{ids[0]}..{ids[-1]}"
    word, conj = TEXT("layers" if len(ids) > 1 else "layer", lang), TEXT("and", lang)
    names = [str(i) for i in ids]
    return f"{word} {names[0]}" if len(names) == 1 else f"{word} {', '.join(names[:-1])} {conj} {names[-1]}"


def _preset_name(preset: str, lang: str) -> str:
    return TEXT("lab" if preset == "lab" else "real", lang)


def _taps(preset: str, lang: str) -> str:
    """ "lab: layers 3 and 4, mixed 0.5/0.5" / "real: L37..39, concatenated, then projected (main_proj)"."""
    f = _dspark_facts()[preset]
    if f.mix == "mean":
        how = TEXT("taps_mean", lang, w="/".join(f"{1 / len(f.taps):.3g}" for _ in f.taps))
    else:
        how = TEXT(f"taps_{f.mix}", lang)
    return f"{_preset_name(preset, lang)}: {_layers(f.taps, lang)}, {how}"


def _block(preset: str, lang: str) -> str:
    """ "lab: k = 5 = [anchor, noise×4]"."""
    k = _dspark_facts()[preset].k
    return f"{_preset_name(preset, lang)}: k = {k} = [anchor, noise×{k - 1}]"


def flow_6b(lang: str = "en") -> str:
    """Mermaid source of the 6B flow: the input hidden lanes (taps of the target layers) → the draft block
    [anchor, noise×(k−1)] → draft layers → Markov head → draft tokens, draft probability and confidence →
    survival a_j = Π c → the scheduler picks ℓ (with SPS(B); drafts past ℓ are not sent) → verify with the real
    forward → accepted / rejected + resampled / bonus → commit and roll the caches back."""
    lang = check_lang(lang)
    lab, real = _dspark_facts()["lab"], _dspark_facts()["flash"]
    ok = Style("kept", fill="#e3f5e6", stroke="#2e8540", color="#123d1c")
    bad = Style("dropped", fill="#fde7e7", stroke="#c0392b", color="#4d0f0a")
    plus = Style("extra", fill="#e6effc", stroke="#2f6fbf", color="#0f2c52")
    key = Style("key", fill="#fff7e0", stroke="#b8860b", color="#3d2c00", stroke_width="2px")
    idle = Style("idle", fill="#f4f4f4", stroke="#9e9e9e", color="#424242")

    def node(id_: str, text: str, shape: str = "normal", style: Style | None = None) -> Node:
        return Node(id_, _label(text), shape=shape, styles=[style] if style else None)

    lanes = node("lanes", TEXT("lanes", lang))
    taps = node(
        "taps",
        f"{UI('tap_layers', lang)} (DSPARK_TARGET_LAYERS)<br/>{_taps('lab', lang)}<br/>{_taps('flash', lang)}",
        style=key,
    )
    head = node("head", TEXT("head", lang))
    anchor = node("anchor", TEXT("anchor", lang), shape="stadium-shape")
    block = node("block", f"{TEXT('block', lang)}<br/>{_block('lab', lang)}<br/>{_block('flash', lang)}", style=key)
    dlayers = node("draft_layers", TEXT("draft_layers", lang, lab=lab.layers, real=real.layers))
    markov = node("markov", TEXT("markov", lang, lab=lab.rank, real=real.rank), style=key)
    drafts = node("drafts", TEXT("drafts", lang, p=UI("draft_probability", lang), c=UI("confidence", lang)))
    survival = node("survival", TEXT("survival", lang))
    sps = node("sps", TEXT("sps", lang), shape="cylindrical")
    scheduler = node("scheduler", TEXT("scheduler", lang), shape="hexagon", style=key)
    not_sent = node(
        "not_sent", TEXT("not_sent", lang, not_sent=UI("not_sent", lang)), shape="stadium-shape", style=idle
    )
    verify = node("verify", TEXT("verify", lang), shape="subroutine-shape", style=key)
    acc = node("accepted", TEXT("accepted", lang, accepted=UI("accepted", lang)), shape="stadium-shape", style=ok)
    rej = node(
        "rejected",
        TEXT("rejected", lang, rejected=UI("rejected", lang), resampled=UI("resampled", lang)),
        shape="stadium-shape",
        style=bad,
    )
    bonus = node("bonus", TEXT("bonus", lang, bonus=UI("bonus", lang)), shape="stadium-shape", style=plus)
    commit = node("commit", TEXT("commit", lang))

    groups = [
        Node("input", _label(TEXT("sg_input", lang)), sub_nodes=[lanes, taps, head, anchor], direction="TB"),
        Node(
            "draft",
            _label(TEXT("sg_draft", lang)),
            sub_nodes=[block, dlayers, markov, drafts, survival],
            direction="TB",
        ),
        Node(
            "check",
            _label(TEXT("sg_verify", lang)),
            sub_nodes=[sps, scheduler, not_sent, verify, acc, rej, bonus, commit],
            direction="TB",
        ),
    ]
    links = [
        Link(lanes, taps),
        Link(lanes, head),
        Link(head, anchor),
        Link(anchor, block),
        Link(taps, dlayers, message="main_x"),
        Link(block, dlayers),
        Link(dlayers, markov),
        Link(markov, drafts),
        Link(drafts, survival, message="c"),
        Link(survival, scheduler, message="a_j"),
        Link(sps, scheduler),
        Link(scheduler, not_sent, message=TEXT("e_past", lang)),
        Link(scheduler, verify, message="ℓ"),
        Link(verify, acc, message=TEXT("e_match", lang)),
        Link(verify, rej, message=TEXT("e_mismatch", lang)),
        Link(verify, bonus, message=TEXT("e_all_kept", lang)),
        Link(acc, commit),
        Link(rej, commit),
        Link(bonus, commit),
    ]
    chart = _FlowChart(
        TEXT("flow_6b_title", lang),
        groups,
        links,
        "TB",
        f"{TEXT('flow_6b_title', lang)} · {TEXT('generated', lang, command=FIX_COMMAND)}",
    )
    return chart.script


DIAGRAMS: dict[str, Callable[[str], str]] = {"architecture_map": architecture_map, "flow_6b": flow_6b}


# ---- showing mermaid in a notebook ----------------------------------------------------------------------
def mermaid_markdown(src: str) -> str:
    """The source as a ```mermaid fenced block (JupyterLab ≥ 4.1 and GitHub render it)."""
    return f"```mermaid\n{src.rstrip()}\n```\n"


@dataclass(frozen=True)
class MermaidDiagram:
    """A mermaid diagram as notebook output: `text/vnd.mermaid` (JupyterLab ≥ 4.1 renders it natively), with a
    ```mermaid markdown fence and the plain source as fallbacks. Rendered in the browser, never over the net."""

    source: str

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {
            "text/vnd.mermaid": self.source,
            "text/markdown": mermaid_markdown(self.source),
            "text/plain": self.source,
        }

    def show(self) -> None:
        """Display now (for use inside a loop or function; a cell's last expression displays by itself)."""
        from IPython.display import display

        display(self)


def display_mermaid(src: str) -> MermaidDiagram:
    """A display object for `src`; make it a cell's last expression, or call `.show()`."""
    return MermaidDiagram(src)


# ---- the SVG picture of the map ---------------------------------------------------------------------------
_FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
_COL_W, _COL_GAP, _MARGIN = 250, 64, 24
_BOX_INSET, _BOX_PAD, _BOX_GAP = 14, 10, 42
_TITLE_SIZE, _ID_SIZE, _LINE = 13, 16, 17


def _text_width(text: str, size: float) -> float:
    """A conservative estimate of the rendered width of `text` in a sans-serif font (no font metrics offline)."""
    narrow, wide = set("iljtfr.,:;'|!() "), set("mwMWÆŒ@%")
    em = sum(
        0.34 if ch in narrow else 0.9 if ch in wide else 0.72 if ch.isupper() or ch.isdigit() else 0.6 for ch in text
    )
    return em * size


def _wrap_px(text: str, size: float, width: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and _text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


def map_svg(lang: str = "en") -> str:
    """A self-contained SVG of the 4-column map (no external fonts, images or links): column headers, one box
    per step (id and title, its one-line summary as the tooltip), the FLOW arrows; each column reads downwards, like
    the widget map."""
    lang = check_lang(lang)
    box_w = _COL_W - 2 * _BOX_INSET
    text_w = box_w - 2 * _BOX_PAD
    titles = {s.id: _wrap_px(s.t("title", lang), _TITLE_SIZE, text_w) for s in STEPS}
    max_lines = max(
        len(lines) for lang_ in LANGS for lines in (_wrap_px(s.t("title", lang_), _TITLE_SIZE, text_w) for s in STEPS)
    )
    box_h = _BOX_PAD + _ID_SIZE + 6 + max_lines * _LINE + _BOX_PAD
    slots = max(len(c.step_ids) for c in COLUMNS)
    headers = {c.id: _wrap_px(c.label(lang), 14, _COL_W - 24) for c in COLUMNS}
    header_h = 16 + 18 * max(len(h) for h in headers.values())
    top = _MARGIN + 58  # below the title and the flow line
    panel_h = header_h + 16 + slots * box_h + (slots - 1) * _BOX_GAP + 18
    width = 2 * _MARGIN + len(COLUMNS) * _COL_W + (len(COLUMNS) - 1) * _COL_GAP
    height = top + panel_h + 40

    boxes: dict[str, _Box] = {}
    first = top + header_h + 16
    for i, col in enumerate(COLUMNS):
        x = _MARGIN + i * (_COL_W + _COL_GAP) + _BOX_INSET
        for j, step_id in enumerate(col.step_ids):  # row by row from the top, as the widget map's grid
            boxes[step_id] = _Box(x, first + j * (box_h + _BOX_GAP), box_w, box_h)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="{_FONT}">',
        f"<title>{escape(TEXT('map_title', lang))}</title>",
        f"<desc>{escape(flow_string(lang))}. {escape(TEXT('generated', lang, command=FIX_COMMAND))}</desc>",
        "<defs>",
        '<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker>',
        '<marker id="tail" viewBox="0 0 10 10" refX="1" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M10,0 L0,5 L10,10 z" fill="#444"/></marker>',
        "</defs>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_MARGIN}" y="{_MARGIN + 18}" font-size="20" font-weight="bold" fill="#222">'
        f"{escape(TEXT('map_title', lang))}</text>",
        f'<text x="{_MARGIN}" y="{_MARGIN + 42}" font-size="14" fill="#555">'
        f"{escape(UI('flow', lang))}: {escape(flow_string(lang))}</text>",
    ]
    for i, col in enumerate(COLUMNS):
        fill, stroke, ink = _COLUMN_COLOURS[col.id]
        x = _MARGIN + i * (_COL_W + _COL_GAP)
        out.append(f'<g id="column-{col.id}">')
        out.append(
            f'<rect x="{x}" y="{top}" width="{_COL_W}" height="{panel_h}" rx="12" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"/>'
        )
        for j, line in enumerate(headers[col.id]):
            out.append(
                f'<text x="{x + _COL_W / 2}" y="{top + 24 + 18 * j}" font-size="14" font-weight="bold" '
                f'text-anchor="middle" fill="{ink}">{escape(line)}</text>'
            )
        out.append("</g>")
    for step in STEPS:
        b, (_, stroke, ink) = boxes[step.id], _COLUMN_COLOURS[step.column]
        out.append(f'<g id="step-{step.id}">')
        out.append(f"<title>{escape(step.label(lang))} — {escape(step.t('short', lang))}</title>")
        out.append(
            f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" rx="8" fill="#ffffff" '
            f'stroke="{stroke}" stroke-width="2"/>'
        )
        out.append(
            f'<text x="{b.x + _BOX_PAD}" y="{b.y + _BOX_PAD + _ID_SIZE - 2}" font-size="{_ID_SIZE}" '
            f'font-weight="bold" fill="{stroke}">{step.id}</text>'
        )
        for j, line in enumerate(titles[step.id]):
            y = b.y + _BOX_PAD + _ID_SIZE + 6 + _LINE * (j + 1) - 4
            out.append(
                f'<text x="{b.x + _BOX_PAD}" y="{y}" font-size="{_TITLE_SIZE}" fill="{ink}">{escape(line)}</text>'
            )
        out.append("</g>")
    out.append('<g id="flow" fill="none" stroke="#444" stroke-width="2">')
    for edge in FLOW:
        a, b = boxes[edge.src], boxes[edge.dst]
        if get_step(edge.src).column == get_step(edge.dst).column:
            up = b.y < a.y
            d = f"M{a.cx},{a.y - 2 if up else a.y + a.h + 2} V{b.y + b.h + 2 if up else b.y - 2}"
        elif a.cy == b.cy:
            d = f"M{a.x + a.w + 2},{a.cy} H{b.x - 2}"
        else:  # leave from the side, turn in the gap between the columns, arrive from the side
            mid = (a.x + a.w + b.x) / 2
            d = f"M{a.x + a.w + 2},{a.cy} H{mid} V{b.cy} H{b.x - 2}"
        tail = ' marker-start="url(#tail)"' if edge.bidirectional else ""
        out.append(f'<path d="{d}" marker-end="url(#head)"{tail}/>')
    out.append("</g>")
    # the "generated, do not edit" line for developers stays in <desc>: it is not text on the map
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- files -------------------------------------------------------------------------------------------------
def generated_files() -> dict[str, str]:
    """Every generated file, as {path relative to the repository root: content}."""
    files = {f"{DIAGRAM_DIR}/{name}.{lang}.mmd": make(lang) for name, make in DIAGRAMS.items() for lang in LANGS}
    files.update({path: map_svg(lang) for lang, path in SVG_FILES.items()})
    return files


def write_all(root: str | Path = REPO_ROOT) -> list[str]:
    """Write every generated file under `root` (each atomically, missing folders made); returns their relative paths."""
    from dspark_mini.files import write_atomic

    root = Path(root)
    for rel, content in generated_files().items():
        write_atomic(root / rel, content)
    return sorted(generated_files())


def check_all(root: str | Path = REPO_ROOT) -> list[str]:
    """Relative paths under `root` that are out of date: missing, different from what the registry generates,
    or a `diagrams/*.mmd` that no generator makes any more. Empty means in sync."""
    root = Path(root)
    expected = generated_files()
    stale = []
    for rel, content in expected.items():
        path = root / rel
        if not path.is_file() or path.read_bytes() != content.encode("utf-8"):
            stale.append(rel)
    for path in sorted((root / DIAGRAM_DIR).glob("*.mmd")):
        rel = path.relative_to(root).as_posix()
        if rel not in expected:
            stale.append(rel)
    return sorted(stale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.sync.diagrams",
        description="Generate the mermaid diagrams and the map SVG from lab/lesson/steps.py.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="(re)write every generated file")
    mode.add_argument("--check", action="store_true", help="exit 1 if a committed file is out of date")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.write:
        for rel in write_all(args.root):
            print(f"wrote {rel}")
        return 0
    stale = check_all(args.root)
    if stale:
        print(
            "These generated diagram files are out of date with lab/lesson/steps.py (or the presets):", file=sys.stderr
        )
        for rel in stale:
            print(f"  {rel}", file=sys.stderr)
        root_arg = "" if args.root.resolve() == REPO_ROOT else f" --root {args.root}"
        print(f"Regenerate them with: {FIX_COMMAND}{root_arg}", file=sys.stderr)
        return 1
    print(f"diagrams in sync: {len(generated_files())} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
