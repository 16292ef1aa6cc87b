"""The DSpark Explorer: the trained lab model LIVE in one self-contained HTML page (no server, no network, no install).

`python -m lab.present.explorer --out docs/explorer.html` writes one page that carries:
  the weights   the shipped target + DSpark weights, packed exactly (lab/browser/weights_pack.py: the page is
                windows-1252, the zlib stream travels as page text) and decoded in the browser by weights_unpack.js;
  the code      lab/browser: tokenizer.js (the lab BPE), ops.js, attention.js, speculative.js and model.js (the
                float64 forward, draft and verify), random.js (the portable generator); here: explorer_live.js
                (`window.dspark`: tokenize, run, steps) and explorer_app.js (the screens, which call the same API);
  the data      model_config.js_config (what model.js needs beside the weights), the tokenizer's tokenizer.json and
                every string the page shows, in Vietnamese and English (lab/lang/{vi,en}/explorer.toml and the step
                titles of steps.toml).
Nothing is precomputed: the page tokenizes what a student types and decodes it with the model itself; a test holds
`window.dspark.run` equal to `python -m lab generate --json` and `window.dspark.tokenize` to `python -m lab tokenize
--json`. `--check` says whether a file is what the generator writes now (`weights_pack.comparable`: the weights
element compared by what it inflates to, so another zlib build does not make the page stale).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dspark_mini.files import write_atomic

from ..browser import MODEL_SCRIPTS, script
from ..browser import weights_pack as wp
from ..text import LANGS, UI, lang_table, lang_tables
from .page import MARKERS, asset, inline, page_vocab

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/explorer.html"
FIX_COMMAND = f"python -m lab.present.explorer --out {PAGE}"
MAX_BYTES = wp.PAGE_BUDGET  # the page carries the weights: within the packing's budget (24 MB)
STEPS = ("1A", "1B", "2A", "3A", "3B", "3C", "4A", "5A", "6A", "6B")  # the lesson's steps, in its order
MAX_NEW_TOKENS = 40  # what one run decodes unless asked (the page's race lane)
TEMPERATURE_MAX = 2.0  # the T control's range: 0 (greedy) .. 2

# lab/lesson/steps.py UI strings the page reuses as they are; the page's own strings follow
SHARED = (
    "prompt", "seed", "language", "temperature", "token", "position", "probability", "draft_token",
    "draft_probability", "confidence", "target_token", "accepted", "rejected", "not_verified", "resampled", "bonus",
    "not_sent", "accepted_length", "layer", "ratio", "role", "role_reindex", "role_reuse", "role_swa_only", "role_full",
    "gate", "verify_len", "logit", "token_id",
)  # fmt: skip
TEXT: dict[str, dict[str, str]] = lang_table("explorer", "text")


def strings() -> dict[str, dict[str, str]]:
    """Every string the page shows, {key: {vi, en}}: lab/lesson/steps.py's shared terms and this module's own."""
    shared = {k: {lang: UI[k][lang] for lang in LANGS} for k in SHARED}
    clash = set(UI) & set(TEXT)
    if clash:
        raise ValueError(f"explorer strings {sorted(clash)} are also lab/lesson/steps.py UI keys: reuse them instead")
    return shared | TEXT


def step_titles() -> dict[str, dict[str, dict[str, str]]]:
    """{step: {"title": {vi, en}, "short": {vi, en}}} from the lesson's steps.toml."""
    tables = lang_tables("steps")
    return {s: {k: tables[s][k] for k in ("title", "short")} for s in STEPS}


def build_data(model: Any) -> dict[str, Any]:
    """What the page embeds beside the weights and the tokenizer: the model's config for model.js, the strings, the
    step titles, the verdict markers and the controls' ranges."""
    from dspark_mini.tokenizer import default_tokenizer

    from ..browser.model_config import js_config

    cfg = model.cfg
    return {
        "config": js_config(model),
        "vocab": page_vocab(default_tokenizer()),  # every token as the pages show it (▁ a leading space, ↵)
        "ui": strings(),
        "steps": step_titles(),
        "step_ids": list(STEPS),
        "markers": MARKERS,
        "limits": {
            "verify_len": [1, cfg.dspark_block_size],
            "temperature": [0, TEMPERATURE_MAX],
            "seed_max": str(2**63 - 1),
            "max_new_tokens": MAX_NEW_TOKENS,
            "max_seq_len": cfg.max_seq_len,
        },
        "command": FIX_COMMAND,
    }


def shipped_tensors() -> dict[str, Any]:
    """The shipped checkpoint's tensors, target then draft (lab/weights/{target,dspark}.safetensors), as stored."""
    from safetensors.numpy import load_file

    folder = REPO_ROOT / "lab" / "weights"
    target, draft = load_file(folder / "target.safetensors"), load_file(folder / "dspark.safetensors")
    return {**target, **draft}


def tokenizer_json() -> str:
    """The lab tokenizer's tokenizer.json, compact and safe inside a <script> element."""
    from dspark_mini.tokenizer import LAB_TOKENIZER_DIR

    parsed = json.loads((Path(LAB_TOKENIZER_DIR) / "tokenizer.json").read_text(encoding="utf-8"))
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render_page(data: dict[str, Any], packed: wp.Packed) -> bytes:
    """The page's bytes: the template with style, data, tokenizer and scripts inlined, made windows-1252-safe, then
    the weights element and its manifest put in."""
    from .fonts import font_face_css

    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    twins = ("weights_unpack.js", "tokenizer.js", "random.js", *MODEL_SCRIPTS)  # lab/browser: the model in JavaScript
    html = inline(
        "explorer_template.html",
        {
            "/*@STYLE@*/": font_face_css() + asset("explorer.css") + asset("verdict.css"),
            "/*@DATA@*/": payload,
            "/*@TOKENIZER@*/": tokenizer_json(),
            "/*@MANIFEST@*/": wp.manifest_json(packed.manifest),
            "/*@LIB@*/": "\n".join([*(script(name) for name in twins), asset("explorer_live.js")]),
            "/*@APP@*/": asset("explorer_app.js"),
        },
    )
    html = wp.windows_1252_safe(html)
    marker = "<!--@WEIGHTS@-->"
    if html.count(marker) != 1:
        raise ValueError(f"the template must hold {marker} exactly once")
    return wp.page_bytes(html.replace(marker, wp.payload_html(packed)))


def page_bytes(model: Any | None = None) -> bytes:
    """The whole page from the trained lab model (loaded when not given)."""
    if model is None:
        from ..weights import lab_model

        model = lab_model("trained")
    packed = wp.pack(shipped_tensors(), expert_quant=model.cfg.expert_quant)
    page = render_page(build_data(model), packed)
    if len(page) > MAX_BYTES:
        raise ValueError(f"the Explorer page is {len(page):,} bytes: allowed ≤ {MAX_BYTES:,}")
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.present.explorer",
        description="Write the DSpark Explorer: one self-contained HTML page (no server, no network) that runs the "
        "trained lab model itself in the browser: its weights, tokenizer and forward are inside the page.",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / PAGE, help=f"the page to write (default: {PAGE})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if --out is not what it would be")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    page = page_bytes()
    if args.check:
        if not args.out.is_file() or wp.comparable(args.out.read_bytes()) != wp.comparable(page):
            print(f"{args.out} is out of date with the generator. Regenerate it with: {FIX_COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.out} is in sync ({len(page):,} bytes)")
        return 0
    try:
        write_atomic(args.out, page)  # written beside it and renamed: never half a page
    except OSError as e:  # a folder where the page should be, a file where its folder should be: one line
        print(f"error: --out: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(page):,} bytes); open it in a browser, no server needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
