"""Notebooks: jupytext `py:percent` sources are the truth; the `.ipynb` files are generated from them.

    python -m lab.sync.nbsync --write   regenerate every notebooks/*.ipynb from notebooks/*.py
    python -m lab.sync.nbsync --check   exit 1 if any .ipynb drifted from its source (CI runs this in the tests)

The committed notebooks also carry their outputs, so a student sees the figures before running anything: they are
made by `python -m lab.sync.nboutputs --write` (`make notebook-outputs`), which executes each notebook and keeps
its figures as small PNGs. `--write` here keeps a notebook's outputs while its code cells are unchanged (a markdown
edit, a number the prose refilled) and drops them when its code changed. `--check` compares each notebook, its
outputs stripped, with what its source generates, and fails when outputs are missing, made from older code, or
too large (lab/sync/nboutputs.py). CI executes the notebooks in memory and never writes them.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


OUTPUTS_KEY = "dspark_outputs"  # notebook metadata: {"code_sha256": …} of the code the outputs come from
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
MAX_NOTEBOOK_BYTES = 700_000  # one notebook with its outputs
MAX_TOTAL_BYTES = 3_000_000  # the whole notebooks folder's .ipynb files


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


def code_hash(nb) -> str:
    """sha256 of a notebook's code cells, in order: what its outputs depend on (markdown does not count)."""
    code = "\n\x00".join(c.source for c in nb.cells if c.cell_type == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def with_outputs(text: str, target: Path) -> str:
    """`text` (a rendered source) with the outputs of the committed `target` when their code cells are the same."""
    import nbformat

    if not target.exists():
        return text
    old, new = nbformat.read(target, as_version=4), nbformat.reads(text, as_version=4)
    if OUTPUTS_KEY not in old.metadata or code_hash(old) != code_hash(new):
        return text
    code = lambda nb: [c for c in nb.cells if c.cell_type == "code"]  # noqa: E731
    for was, now in zip(code(old), code(new), strict=True):
        now.outputs, now.execution_count = was.outputs, was.execution_count
    new.metadata[OUTPUTS_KEY] = old.metadata[OUTPUTS_KEY]
    return nbformat.writes(new) + "\n"


def write_all(folder: Path = NOTEBOOKS) -> list[Path]:
    """Regenerate every .ipynb whose text differs from its source's (each written atomically); a notebook's outputs
    are kept while its code cells are unchanged."""
    from dspark_mini.files import write_atomic

    written = []
    for src in sources(folder):
        target = src.with_suffix(".ipynb")
        text = with_outputs(render(src), target)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            write_atomic(target, text)
            written.append(target)
    return written


def strip_outputs(nb):
    """A copy of `nb` as nbsync renders its source: no outputs, no execution counts, no outputs metadata."""
    bare = copy.deepcopy(nb)
    bare.metadata.pop(OUTPUTS_KEY, None)
    for cell in bare.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return bare


def output_problems(nb, size: int) -> list[str]:
    """Why the committed outputs of `nb` (its file `size` bytes) are not what nboutputs writes; [] when they are."""
    problems = []
    made = nb.metadata.get(OUTPUTS_KEY, {}).get("code_sha256")
    if made is None:
        problems.append("has no outputs")
    elif made != code_hash(nb):
        problems.append("has outputs of older code")
    if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
        problems.append("has no outputs")
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            heavy = {PLOTLY, WIDGET} & set(out.get("data", {}))
            if heavy:
                problems.append(f"holds {', '.join(sorted(heavy))} (commit the PNG only)")
    if size > MAX_NOTEBOOK_BYTES:
        problems.append(f"is {size:,} bytes (at most {MAX_NOTEBOOK_BYTES:,})")
    return sorted(set(problems))


def problems(folder: Path = NOTEBOOKS) -> list[tuple[Path, str]]:
    """[(notebook, what is wrong)]: missing, drifted from its source (outputs stripped), an orphan, or outputs
    missing, made from older code or too large; and the folder's .ipynb files over their total size."""
    import nbformat

    found = []
    for src in sources(folder):
        nb_path = src.with_suffix(".ipynb")
        if not nb_path.exists():
            found.append((nb_path, "is missing"))
            continue
        nb = nbformat.read(nb_path, as_version=4)
        if nbformat.writes(strip_outputs(nb)) + "\n" != render(src):
            found.append((nb_path, "differs from its source"))
        found += [(nb_path, p) for p in output_problems(nb, nb_path.stat().st_size)]
    found += [(nb, "has no source") for nb in folder.glob("*.ipynb") if not nb.with_suffix(".py").exists()]
    total = sum(p.stat().st_size for p in folder.glob("*.ipynb"))
    if total > MAX_TOTAL_BYTES:
        found.append((folder, f"holds {total:,} bytes of notebooks (at most {MAX_TOTAL_BYTES:,})"))
    return found


def check_all(folder: Path = NOTEBOOKS) -> list[Path]:
    """Notebooks with a problem (see `problems`)."""
    return sorted({p for p, _ in problems(folder)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.sync.nbsync", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="regenerate the .ipynb files")
    g.add_argument("--check", action="store_true", help="fail if a .ipynb drifted from its source or its outputs")
    args = ap.parse_args(argv)
    if args.write:
        for p in write_all():
            print(f"wrote {p.relative_to(ROOT)}")
        return 0
    found = problems()
    if found:
        print(
            "notebooks out of sync:\n"
            + "".join(f"  {p.relative_to(ROOT)} {why}\n" for p, why in found)
            + "fix: python -m lab.sync.nbsync --write (a source changed), then python -m lab.sync.nboutputs --write "
            "NAME (outputs: make notebook-outputs)",
            file=sys.stderr,
        )
        return 1
    print(f"{len(sources())} notebooks in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
