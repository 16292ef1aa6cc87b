"""The notebooks' committed outputs (lab/sync/nboutputs.py) and how nbsync keeps and checks them, on small made-up
notebooks: nothing is executed and no browser is started here (tests/test_notebooks.py checks the real folder)."""

from __future__ import annotations

import json

import nbformat
import pytest

from lab.sync import nboutputs, nbsync
from lab.sync.nboutputs import slim_output, trim_text
from lab.sync.nbsync import OUTPUTS_KEY, output_problems, strip_outputs

SOURCE = """# %% [markdown]
# # 99 · a test notebook

# %%
LANG = "en"
print("hello")

# %% [markdown]
# more words
"""


def test_trim_text_keeps_the_first_lines_and_says_how_many_were_cut() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    cut = trim_text(text, max_lines=5)
    assert cut.splitlines()[:5] == [f"line {i}" for i in range(5)]
    assert "95 more lines" in cut.splitlines()[-1]
    assert trim_text("short\n") == "short\n"
    assert trim_text("x" * 1000 + "\n").endswith("…\n")


def test_slim_output_keeps_pictures_and_text_and_leaves_out_what_needs_a_kernel() -> None:
    figures: list = []
    plotly = {"output_type": "display_data", "metadata": {}, "data": {nboutputs.PLOTLY: {"data": [], "layout": {}}}}
    assert slim_output(plotly, figures)["data"] == {"image/png": 0} and len(figures) == 1  # the PNG goes there
    widget = {"output_type": "display_data", "metadata": {}, "data": {nboutputs.WIDGET: {}, "text/plain": "w"}}
    assert slim_output(widget, figures) is None
    style = {"output_type": "display_data", "metadata": {}, "data": {"text/html": "<style>x{}</style>"}}
    assert slim_output(style, figures) is None
    table = {
        "output_type": "display_data",
        "metadata": {},
        "data": {"text/html": "<pre>" + "x" * 9000, "text/plain": "t"},
    }
    assert slim_output(table, figures)["data"] == {"text/plain": "t"}
    with pytest.raises(RuntimeError, match="ValueError"):
        slim_output({"output_type": "error", "ename": "ValueError", "evalue": "no", "traceback": []}, figures)


def _folder(tmp_path, source: str = SOURCE):
    (tmp_path / "99_test.py").write_text(source, encoding="utf-8")
    nbsync.write_all(tmp_path)
    return tmp_path / "99_test.ipynb"


def _with_outputs(path) -> None:
    """What nboutputs writes: outputs, execution counts and the hash of the code they came from."""
    nb = nbformat.read(path, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    code.execution_count = 1
    nb.metadata[OUTPUTS_KEY] = {"code_sha256": nbsync.code_hash(nb)}
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


def test_check_wants_outputs_made_from_the_current_code(tmp_path) -> None:
    path = _folder(tmp_path)
    assert [why for _, why in nbsync.problems(tmp_path)] == ["has no outputs"]
    _with_outputs(path)
    assert nbsync.problems(tmp_path) == []
    # a markdown edit: nbsync --write keeps the outputs, the check passes
    (tmp_path / "99_test.py").write_text(SOURCE.replace("more words", "other words"), encoding="utf-8")
    assert nbsync.problems(tmp_path) == [(path, "differs from its source")]
    nbsync.write_all(tmp_path)
    assert nbsync.problems(tmp_path) == []
    assert nbformat.read(path, as_version=4).cells[1].outputs[0]["text"] == "hello\n"
    # a code edit: the outputs are dropped, the check asks for new ones
    (tmp_path / "99_test.py").write_text(SOURCE.replace('print("hello")', 'print("bye")'), encoding="utf-8")
    nbsync.write_all(tmp_path)
    assert [why for _, why in nbsync.problems(tmp_path)] == ["has no outputs"]


def test_check_finds_stale_heavy_and_large_outputs(tmp_path) -> None:
    path = _folder(tmp_path)
    _with_outputs(path)
    nb = nbformat.read(path, as_version=4)
    assert strip_outputs(nb) == nbformat.reads(nbsync.render(tmp_path / "99_test.py"), as_version=4)
    nb.metadata[OUTPUTS_KEY]["code_sha256"] = "0" * 64
    nb.cells[1].outputs.append(nbformat.v4.new_output("display_data", data={nboutputs.PLOTLY: json.dumps({})}))
    found = output_problems(nb, nbsync.MAX_NOTEBOOK_BYTES + 1)
    assert any("older code" in p for p in found)
    assert any(nboutputs.PLOTLY in p for p in found)
    assert any("bytes" in p for p in found)
