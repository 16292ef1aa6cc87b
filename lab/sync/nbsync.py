"""Notebooks: jupytext `py:percent` sources are the truth; the `.ipynb` files are generated from them.

    python -m lab.sync.nbsync --write   regenerate every notebooks/*.ipynb from notebooks/*.py
    python -m lab.sync.nbsync --check   exit 1 if any .ipynb drifted from its source (CI runs this in the tests)

The generated notebooks carry no outputs (they are executed in CI and by the reader), so a diff of a
source is the whole review.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def sources(folder: Path = NOTEBOOKS) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name[:2].isdigit())


def render(source: Path) -> str:
    """The .ipynb JSON text a source generates (deterministic: no outputs, fixed metadata)."""
    import jupytext
    import nbformat

    nb = jupytext.read(source, fmt="py:percent")
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{source.stem[:2]}-{i:03d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(nb) + "\n"


def write_all(folder: Path = NOTEBOOKS) -> list[Path]:
    """Regenerate every .ipynb whose text differs from its source's (each written atomically)."""
    from dspark_mini.files import write_atomic

    written = []
    for src in sources(folder):
        target = src.with_suffix(".ipynb")
        text = render(src)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            write_atomic(target, text)
            written.append(target)
    return written


def check_all(folder: Path = NOTEBOOKS) -> list[Path]:
    """Notebooks whose .ipynb is missing or differs from what its source generates."""
    stale = [
        src.with_suffix(".ipynb")
        for src in sources(folder)
        if not src.with_suffix(".ipynb").exists()
        or src.with_suffix(".ipynb").read_text(encoding="utf-8") != render(src)
    ]
    orphans = [nb for nb in folder.glob("*.ipynb") if not nb.with_suffix(".py").exists()]
    return stale + orphans


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.sync.nbsync", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="regenerate the .ipynb files")
    g.add_argument("--check", action="store_true", help="fail if a .ipynb drifted from its source")
    args = ap.parse_args(argv)
    if args.write:
        for p in write_all():
            print(f"wrote {p.relative_to(ROOT)}")
        return 0
    stale = check_all()
    if stale:
        print(
            "notebooks out of sync with their py:percent sources: "
            + ", ".join(str(p.relative_to(ROOT)) for p in stale)
            + "\nfix: python -m lab.sync.nbsync --write",
            file=sys.stderr,
        )
        return 1
    print(f"{len(sources())} notebooks in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
