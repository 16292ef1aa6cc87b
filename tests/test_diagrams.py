"""The diagrams (`lab/sync/diagrams.py`): generated from the registry, committed in sync, plausible mermaid, a valid
self-contained SVG, and no network access anywhere (mermaid-py's renderer calls a web service)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import socket
import subprocess
import sys
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dspark_mini import get_config

pytest.importorskip("mermaid")

from lab.lesson.steps import COLUMNS, FLOW, STEPS, get_step
from lab.sync import diagrams  # noqa: E402
from lab.sync.diagrams import (
    DIAGRAMS,
    FIX_COMMAND,
    SVG_FILES,
    architecture_map,
    check_all,
    column_id,
    display_mermaid,
    flow_6b,
    generated_files,
    main,
    map_svg,
    mermaid_markdown,
    node_id,
    write_all,
)
from lab.text import LANGS, UI  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NODE_DEF = re.compile(r"^([A-Za-z_][\w-]*)(\[\[|\[\(|\(\[|\(\(|\{\{|\[/|\[\\|\[|\(|\{|>)")
LINK = re.compile(r"^([A-Za-z_][\w-]*) (<?-->|<?-\.->|<?==>|~~~|---)(\|\"[^\"]*\"\|)? ([A-Za-z_][\w-]*)$")


def all_sources() -> list[tuple[str, str, str]]:
    return [(name, lang, make(lang)) for name, make in DIAGRAMS.items() for lang in LANGS]


def parse(src: str) -> dict:
    """A small structural reading of a generated flowchart: subgraphs with their nodes, node ids, links."""
    lines = [line.strip() for line in src.splitlines()]
    stack: list[str] = []
    subgraphs: dict[str, list[str]] = {}
    directions: dict[str, str] = {}
    nodes: list[str] = []
    links: list[tuple[str, str, str, str]] = []  # (src, arrow, label, dst)
    for line in lines[1:]:
        if not line or line.startswith("%%") or line.startswith("classDef "):
            continue
        if line.startswith("subgraph "):
            sg = line.split()[1]
            subgraphs[sg] = []
            stack.append(sg)
        elif line == "end":
            assert stack, "an `end` without a subgraph"
            stack.pop()
        elif line.startswith("direction "):
            directions[stack[-1]] = line.split()[1]
        elif ":::" in line:
            continue
        elif m := LINK.match(line):
            links.append((m.group(1), m.group(2), (m.group(3) or "")[2:-2], m.group(4)))
        elif m := NODE_DEF.match(line):
            nodes.append(m.group(1))
            if stack:
                subgraphs[stack[-1]].append(m.group(1))
        else:
            raise AssertionError(f"unrecognised mermaid line: {line!r}")
    assert not stack, f"subgraphs left open: {stack}"
    return {"subgraphs": subgraphs, "directions": directions, "nodes": nodes, "links": links}


# ---- committed files -----------------------------------------------------------------------------------
def test_committed_files_are_in_sync():
    stale = check_all(REPO)
    assert stale == [], f"stale generated diagrams {stale}: run `{FIX_COMMAND}`"


def test_expected_files():
    files = generated_files()
    assert set(files) == {f"diagrams/{n}.{lang}.mmd" for n in DIAGRAMS for lang in LANGS} | set(SVG_FILES.values())
    assert SVG_FILES == {"en": "docs/map.svg", "vi": "docs/map.vi.svg"}
    assert files["docs/map.svg"] == map_svg("en")
    assert files["diagrams/architecture_map.vi.mmd"] == architecture_map("vi")


def test_edited_copy_is_detected_as_stale(tmp_path):
    written = write_all(tmp_path)
    assert sorted(written) == sorted(generated_files())
    assert check_all(tmp_path) == []
    edited = tmp_path / "diagrams" / "flow_6b.vi.mmd"
    edited.write_text(edited.read_text(encoding="utf-8").replace("anchor", "ancla", 1), encoding="utf-8")
    assert check_all(tmp_path) == ["diagrams/flow_6b.vi.mmd"]
    (tmp_path / "docs" / "map.svg").unlink()
    (tmp_path / "diagrams" / "old_name.en.mmd").write_text("flowchart LR\n", encoding="utf-8")
    assert check_all(tmp_path) == ["diagrams/flow_6b.vi.mmd", "diagrams/old_name.en.mmd", "docs/map.svg"]


def test_cli_check_and_write(tmp_path, capsys):
    assert main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "diagrams/architecture_map.en.mmd" in err and "docs/map.svg" in err and FIX_COMMAND in err
    assert main(["--write", "--root", str(tmp_path)]) == 0
    assert "wrote docs/map.vi.svg" in capsys.readouterr().out
    assert main(["--check", "--root", str(tmp_path)]) == 0
    assert "in sync" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([])  # one of --write / --check is required


def test_generation_is_deterministic_across_hash_seeds():
    """mermaid-py keeps classDefs in a set; the output must not depend on PYTHONHASHSEED."""
    code = (
        "import hashlib; from lab.sync.diagrams import generated_files as g; "
        "print(hashlib.sha256(repr(sorted(g().items())).encode()).hexdigest())"
    )
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert digests == {hashlib.sha256(repr(sorted(generated_files().items())).encode()).hexdigest()}


# ---- the 4-column map ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_map_has_every_step_and_column(lang):
    src = architecture_map(lang)
    text = src.replace("<br/>", " ")
    for step in STEPS:
        assert step.id in src
        assert step.label(lang) in text, step.id
    for col in COLUMNS:
        assert col.t("title", lang) in src
        assert f'subgraph {column_id(col.id)} ["{col.label(lang)}"]' in src
    assert architecture_map("vi") != architecture_map("en")


@pytest.mark.parametrize("lang", LANGS)
def test_map_layout_columns_left_to_right_each_read_downwards(lang):
    """Like the clickable widget map: columns left to right, each read top to bottom (1A at the top of column 1)."""
    src = architecture_map(lang)
    assert src.startswith("flowchart LR\n")
    g = parse(src)
    assert list(g["subgraphs"]) == [column_id(c.id) for c in COLUMNS]
    for col in COLUMNS:
        assert g["subgraphs"][column_id(col.id)] == [node_id(i) for i in col.step_ids]  # 1A first = top
        assert g["directions"][column_id(col.id)] == "TB"
    col_links = [(a, b) for a, _, _, b in g["links"] if a.startswith("col")]
    assert col_links == [(column_id(c.id), column_id(c.id + 1)) for c in COLUMNS[:-1]]


@pytest.mark.parametrize("lang", LANGS)
def test_map_has_every_flow_edge(lang):
    links = parse(architecture_map(lang))["links"]
    for edge in FLOW:
        src, dst = get_step(edge.src), get_step(edge.dst)
        arrow = "<-->" if edge.bidirectional else "-->"
        if src.column == dst.column:
            expected = (node_id(src.id), arrow, "", node_id(dst.id))
        else:  # drawn between the column subgraphs (mermaid would otherwise drop the columns' direction)
            expected = (
                column_id(src.column),
                arrow,
                f"{src.id} {'↔' if edge.bidirectional else '→'} {dst.id}",
                column_id(dst.column),
            )
        assert expected in links, edge
    assert len(links) == len(FLOW)
    two_way = [link for link in links if link[1] == "<-->"]
    assert two_way == [(node_id("4A"), "<-->", "", node_id("6A"))]


# ---- the 6B flow -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_flow_6b_content(lang):
    src = flow_6b(lang)
    for needle in (
        "[anchor, noise×(k−1)]",
        "Markov head",
        "DSPARK_TARGET_LAYERS",
        "hc_pre → RMSNorm → logits [B,V]",
        "min(1, p_t/p_d)",
        "norm(max(0, p_t − p_d))",
        "τ = n + 1",
        "a_j = c_1·…·c_j",  # the survival the scheduler reads
        "Algorithm 1",
        "Θ = τ*·SPS(B)",
        "profile --sps",
        "[x₀, x₁..x_ℓ]",  # verify sees the prefix ℓ, not the whole drafted block
        "x_(ℓ+1)..x_k",
    ):
        assert needle in src, needle
    assert ("verify bằng forward thật" if lang == "vi" else "verify with the real forward") in src
    keys = ("accepted", "rejected", "resampled", "bonus", "not_sent", "tap_layers", "draft_probability", "confidence")
    for key in keys:
        assert UI(key, lang) in src, key
    # numbers from the lab and flash presets
    k = get_config("lab").dspark_block_size
    for needle in (
        "L37..39",
        "0.5/0.5",
        f"k = {k} = [anchor, noise×{k - 1}]",
        "k = 5 = [anchor, noise×4]",
        "256",
        "main_proj",
    ):
        assert needle in src, needle
    assert ("lớp 3 và 4" if lang == "vi" else "layers 3 and 4") in src
    g = parse(src)
    assert list(g["subgraphs"]) == ["input", "draft", "check"]  # the seed's three steps, in order
    # draft → confidences → scheduler ℓ → verify → commit
    order = ["taps", "draft_layers", "markov", "drafts", "survival", "scheduler", "verify"]
    path = {(a, b) for a, _, _, b in g["links"]}
    assert all((a, b) in path for a, b in zip(order, order[1:], strict=False))
    assert ("drafts", "verify") not in path  # every draft passes the scheduler first
    assert {("sps", "scheduler"), ("scheduler", "not_sent")} <= path
    assert "survival" in g["subgraphs"]["draft"] and {"sps", "scheduler", "not_sent"} <= set(g["subgraphs"]["check"])
    assert {("verify", x) for x in ("accepted", "rejected", "bonus")} <= path
    assert {(x, "commit") for x in ("accepted", "rejected", "bonus")} <= path


def test_flow_6b_languages_differ():
    assert flow_6b("vi") != flow_6b("en")
    assert "Vẽ khối token nháp" in flow_6b("vi") and "token nháp" not in flow_6b("en")


# ---- mermaid syntax ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "lang", "src"), all_sources(), ids=lambda v: v if len(v) < 20 else "")
def test_mermaid_source_is_plausible(name, lang, src):
    lines = src.splitlines()
    assert lines[0] in ("flowchart LR", "flowchart TB", "flowchart BT", "flowchart TD")
    assert src.endswith("\n") and not src.startswith("---")  # no YAML front matter
    stripped = [line.strip() for line in lines]
    assert sum(line.startswith("subgraph ") for line in stripped) == stripped.count("end") > 0
    g = parse(src)  # raises on an unknown line or unbalanced subgraph/end
    ids = g["nodes"] + list(g["subgraphs"])
    assert len(ids) == len(set(ids)), "node/subgraph ids must be unique"
    assert "end" not in ids
    for a, _, _, b in g["links"]:
        assert a in ids and b in ids
    for line in lines:
        assert line.count('"') % 2 == 0, line
        assert not line.strip().startswith("click "), "no click lines (they need a URL or a JS callback)"
    used = {m.group(1) for m in re.finditer(r":::(\w+)", src)}
    defined = {m.group(1) for m in re.finditer(r"^\s*classDef (\w+) ", src, re.M)}
    assert used == defined
    assert name in DIAGRAMS and lang in LANGS


def test_markdown_and_display_bundle():
    src = architecture_map("en")
    md = mermaid_markdown(src)
    assert md.startswith("```mermaid\nflowchart LR\n") and md.endswith("\n```\n")
    obj = display_mermaid(src)
    bundle = obj._repr_mimebundle_()
    assert bundle["text/vnd.mermaid"] == src
    assert bundle["text/markdown"] == md
    assert bundle["text/plain"] == src


# ---- the SVG ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_svg_is_valid_self_contained_and_complete(lang):
    svg = map_svg(lang)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    for step in STEPS:
        assert step.id in texts, step.id
        group = root.find(f".//{ns}g[@id='step-{step.id}']")
        assert group is not None and step.t("short", lang) in group.find(f"{ns}title").text
    for col in COLUMNS:
        assert any(col.t("title", lang) in t for t in texts)
    paths = root.findall(f".//{ns}g[@id='flow']/{ns}path")
    assert len(paths) == len(FLOW)
    assert sum("marker-start" in p.attrib for p in paths) == sum(e.bidirectional for e in FLOW)
    # self-contained: no external links, images, fonts or stylesheets
    assert not root.findall(f".//{ns}image") and not root.findall(f".//{ns}style")
    body = svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
    for bad in ("http:", "https:", "href", "@import", "@font-face"):
        assert bad not in body, bad
    assert re.findall(r"url\(([^)]*)\)", svg) and all(u.startswith("#") for u in re.findall(r"url\(([^)]*)\)", svg))


def test_svg_boxes_do_not_overlap_and_fit():
    root = ET.fromstring(map_svg("vi"))
    ns = "{http://www.w3.org/2000/svg}"
    width, height = float(root.get("width")), float(root.get("height"))
    boxes = []
    for step in STEPS:
        r = root.find(f".//{ns}g[@id='step-{step.id}']/{ns}rect")
        boxes.append(tuple(float(r.get(k)) for k in ("x", "y", "width", "height")))
    for i, (x, y, w, h) in enumerate(boxes):
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height
        for x2, y2, w2, h2 in boxes[i + 1 :]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y
    # 1A sits above 1B, which sits above 2A (the map reads downwards, like the widget map)
    y = {s.id: b[1] for s, b in zip(STEPS, boxes, strict=True)}
    assert y["1A"] < y["1B"] < y["2A"] and y["4A"] < y["6A"] and y["5A"] < y["6B"]
    assert y["1A"] == y["3A"] == y["4A"] == y["5A"]  # every column starts on the same top row


# ---- no network --------------------------------------------------------------------------------------------
def test_generating_and_displaying_needs_no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access while generating diagrams")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    try:
        import requests

        monkeypatch.setattr(requests.Session, "request", refuse)
    except ImportError:
        pass
    import mermaid

    monkeypatch.setattr(mermaid.Mermaid, "__init__", refuse)  # mermaid-py's renderer (mermaid.ink)
    diagrams._dspark_facts.cache_clear()  # re-read the presets under the patches too
    for make in DIAGRAMS.values():
        for lang in LANGS:
            src = make(lang)
            bundle = display_mermaid(src)._repr_mimebundle_()
            assert bundle["text/vnd.mermaid"] == src and mermaid_markdown(src) in bundle["text/markdown"]
    if importlib.util.find_spec("IPython") is not None:
        display_mermaid(flow_6b("en")).show()  # IPython's display(); outside a kernel it prints
    for lang in LANGS:
        map_svg(lang)
    assert generated_files()
