"""The lab model in a browser: its JavaScript twins and what a page needs from Python to run them.

    tokenizer.js        the lab's byte-level BPE (dspark_mini/hf_tokenizer.py's encode, decode and pieces)
    model.js            the model in float64: its weights, caches, forward, commit and rollback (dspark_mini/model.py)
    ops.js              its stateless pieces: FP8/FP4 rounding, kernels, sampling, RoPE, mHC, Engram, MoE
    attention.js        the compressor, indexer, candidate filter and attention of one block
    speculative.js      the DSpark draft, verify and generation (dspark_mini/dspark.py, speculative.py)
    random.js           the portable generator and its sampling rule (dspark_mini/portable_random.py)
    weights_unpack.js   the packed weights back to Float64Arrays, bit for bit
    weights_pack.py     the shipped weights packed exactly for one self-contained page
    model_config.py     the config object model.js reads, from a loaded model

Each twin is held equal to its Python original by a test that runs it in node (tests/test_js_*.py,
tests/test_portable_random.py, tests/test_weights_pack.py); lab/present/explorer.py puts them in the Explorer page.
"""

MODEL_SCRIPTS = ("ops.js", "attention.js", "speculative.js", "model.js")  # the model's files, in a page's order


def script(name: str) -> str:
    """One of this package's JavaScript files, as text (what a page inlines)."""
    from importlib import resources

    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
