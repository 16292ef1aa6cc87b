"""The layout's rules, read from the code itself: imports run one way (no cycle between the project's modules,
imports inside functions included; the model never imports the lab), `lab/` keeps a small ground floor and no
module grows past a page count a reader can hold, and nothing in the repository points at a path outside it."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dspark_mini", "lab")
MAX_LAB_TOP = 6  # modules directly in lab/ besides __init__ and __main__
MAX_LINES = 700  # a module a reader can hold (Python, and the JavaScript a page runs)
MAX_ROOM_MODULES = 10  # Python files in one of lab's packages, its __init__ included


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file (top level, functions, TYPE_CHECKING blocks)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    edges = {m: imported(m, p, known) for m, p in known.items()}
    # a package importing one of its own modules (re-exports in __init__) is not an arrow back up
    return {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in edges.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
                continue
            if w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_the_projects_modules():
    found = cycles(graph())
    assert found == [], "import cycles (function-level imports included): " + "; ".join(" ↔ ".join(c) for c in found)


def test_the_model_never_imports_the_lab():
    bad = sorted(
        f"{m} → {t}" for m, ts in graph().items() if m.startswith("dspark_mini") for t in ts if t.startswith("lab")
    )
    assert bad == []


def test_lab_has_a_small_ground_floor_and_no_module_is_too_long():
    top = sorted(p.name for p in (ROOT / "lab").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_LAB_TOP, top
    scripts = [*(ROOT / "lab").rglob("*.js")]  # the JavaScript twins and page scripts are modules too
    long = {
        str(p.relative_to(ROOT)): n
        for p in [*modules().values(), *scripts]
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert len(scripts) >= 8 and long == {}, long


def test_every_room_of_lab_is_small():
    rooms = sorted(p for p in (ROOT / "lab").iterdir() if (p / "__init__.py").is_file())
    big = {p.name: n for p in rooms if (n := len(list(p.glob("*.py")))) > MAX_ROOM_MODULES}
    assert len(rooms) >= 10 and big == {}, big


def test_nothing_points_at_a_path_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = re.compile(r"\.\./shared\b|\bshared/(research|spec|seeds|hooks)\b|\bLAB_SPEC\b|/work/|/tmp/tmp")
    texts = (".py", ".md", ".ipynb", ".js", ".html", ".css", ".mmd", ".toml", ".txt", ".sh", ".json", "Makefile")
    hits = []
    for f in files:
        if not f.endswith(texts) or f.startswith("lab/weights/") or f == "tests/test_imports.py":
            continue
        text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
        hits += [f"{f}: {m.group(0)}" for m in outside.finditer(text)]
    assert hits == []


def room_arrows() -> dict[str, set[str]]:
    """Which of lab's rooms (its subpackages) import which other rooms, anywhere in their files."""
    rooms = {p.name for p in (ROOT / "lab").iterdir() if (p / "__init__.py").is_file()}

    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[0] == "lab" and parts[1] in rooms else None

    arrows: dict[str, set[str]] = {r: set() for r in rooms}
    for module, targets in graph().items():
        if (src := room(module)) is not None:
            arrows[src] |= {t for t in map(room, targets) if t is not None and t != src}
    return arrows


def test_the_rooms_lean_one_way():
    """No two rooms import each other, directly or around a loop: every arrow between rooms points down."""
    assert cycles(room_arrows()) == []


def test_the_layout_page_draws_the_rooms_arrows_the_code_has():
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    block = page[page.index("<!-- rooms -->") : page.index("<!-- /rooms -->")]
    drawn = {}
    for line in block.splitlines():
        if m := re.match(r"^(\w+)\s+─► (.*)$", line):
            drawn[m[1]] = set() if m[2].startswith("(") else {t.strip() for t in m[2].split(",")}
    assert drawn == room_arrows()
