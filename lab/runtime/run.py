"""The model a command runs on, wherever it runs: one process or a rank of torchrun, the lab's own set or a
checkpoint folder in the official layout.

  open_checkpoint(folder, device, dtype, shard=True, free=None, lang="en") → (model, tokenizer)
      the one way a command opens --checkpoint DIR: its config.json, the weights its index lists and its tokenizer
      (`export.folder_tokenizer`: DIR/tokenizer.json, or the lab's vocabulary where config.json names it), read
      together, or one error naming what is missing — never the lab's vocabulary in place of a missing file;
      under torchrun only this rank's tensors are read.
  open_preset(preset, weights, checkpoint, seed, device, dtype, lang, before=None) → (model, tokenizer, checked)
      the one way a command opens what --preset / --weights / --checkpoint name: a checkpoint's model and tokenizer
      (open_checkpoint), or the preset's model (run_model) and the lab's tokenizer for its vocabulary; `before(cfg,
      tok)`, the command's own checks that need the config and tokenizer (a prompt, ℓ), runs before a preset's model
      is built and as soon as a checkpoint is read; what it returns comes back as `checked`.
  run_model(weights, seed, checkpoint, device, dtype, shard=True, free=None, preset="lab")
      checkpoint given → open_checkpoint's model (its tokenizer kept as `model.tokenizer`);
      otherwise      → `lab.weights.lab_model` (the shipped set or the seeded init), its memory estimate checked
                       against what the device has free first, sharded under torchrun with several ranks;
      another preset → its seeded init, built and drawn on the device itself (`flash-cpu`: the real widths; no
                       trained set exists for them), after the same memory check (`flash` is refused there).
  check_preset_fits(preset, dtype, device, free=None, lang="en")
      the memory check of a preset, before anything of its size is allocated: its weights unpacked, the prepared
      layouts its first forward builds and a margin (`placement`), against the tightest limit the host states
      (`placement.room`: RLIMIT_AS, the cgroup's memory.max or memory.limit_in_bytes minus usage, MemAvailable);
      a refusal names --preset, the need and the room in GiB and which limit, in English or Vietnamese.
`shard=False` keeps the whole model on every rank. In one process every step is a no-op but the checks, so a plain
CPU run pays nothing for the real-scale path; `lab_model` itself never imports this package.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from dspark_mini import build_model, get_config, get_tokenizer
from dspark_mini.device import PlacementError, check_device, check_dtype, compute_config
from dspark_mini.hf_tokenizer import TOKENIZER_FILE, FolderFileError, folder_file
from dspark_mini.model import Transformer

from ..measured import flash_cpu_peak
from ..realscale.export import LAB_VOCABULARY, load_checkpoint, read_config
from ..realscale.layout import RealScaleError
from ..realscale.placement import GIB, LIMITS, MARGIN_FLOOR, RankEstimate, estimate_rank, prepared_bytes, room
from ..realscale.ranks import SINGLE
from ..style import phase
from ..text import check_lang, lang_string, lang_table
from ..weights import lab_model
from .distributed import maybe_distributed, maybe_distributed_load


def open_preset(
    preset: str = "lab",
    weights: str | None = None,
    checkpoint: str | Path | None = None,
    seed: int = 0,
    device: str | None = None,
    dtype: str | None = None,
    lang: str = "en",
    before: Callable[[Any, Any], Any] | None = None,
) -> tuple[Transformer, Any, Any]:
    """(model, tokenizer, what `before` returned): see the module docstring. weights None: "trained" for `lab` (or
    with a checkpoint), the seeded init for another preset (`preset_weights`)."""
    from dspark_mini.presets import text_tokenizer

    weights = preset_weights(preset, weights, checkpoint)
    if checkpoint is not None:  # the checkpoint's config, weights and tokenizer, together
        model, tok = open_checkpoint(checkpoint, device, dtype, lang=lang)
        return model, tok, before(model.cfg, tok) if before is not None else None
    cfg = get_config(preset)
    tok = text_tokenizer(cfg)
    checked = before(cfg, tok) if before is not None else None  # before the model: a refusal costs nothing
    return run_model(weights, seed, device=device, dtype=dtype, preset=preset, lang=lang), tok, checked


def run_model(
    weights: str | None = "trained",
    seed: int = 0,
    checkpoint: str | Path | None = None,
    device: str | None = None,
    dtype: str | None = None,
    shard: bool = True,
    free: int | None = None,
    preset: str = "lab",
    lang: str = "en",
) -> Transformer:
    """See the module docstring. free: injected free bytes (tests); default measured on the device. lang: the
    language of a memory refusal."""
    dev = check_device(device, "device")
    check_dtype(dtype, "dtype")
    if checkpoint is not None:
        return open_checkpoint(checkpoint, device, dtype, shard, free, lang=lang)[0]
    cfg = get_config(preset)
    weights = preset_weights(preset, weights)
    check_preset_fits(preset, dtype, dev, free, lang)
    if preset != "lab":  # minutes at the real widths: a bar of the values drawn, where a command shows progress
        peak = {"peak": flash_cpu_peak(lang)} if preset == "flash-cpu" else {}
        with phase("draw_peak" if peak else "draw", **peak) as advance:
            model = build_model(compute_config(cfg, dtype), seed, device=dev, on_device=True, progress=advance)
        return maybe_distributed(model, device=str(dev)) if shard else model
    model = lab_model(weights, seed, device="cpu", dtype=dtype)
    return maybe_distributed(model, device=str(dev)) if shard else model.to(dev)


PRESET_REFUSAL = lang_string("realscale", "preset_refusal")
# counted with the prepared layouts (True) / without (False: the weights alone were already too many)
WHAT = {
    counted: lang_table("realscale", "what")[key] for counted, key in ((True, "with_layouts"), (False, "weights_alone"))
}
AT_LEAST = lang_string("realscale", "at_least")
FIXES = lang_table("realscale", "fixes")


def gib(nbytes: int) -> str:
    return f"{nbytes / GIB:,.2f} GiB"


def check_preset_fits(
    preset: str,
    dtype: str | None = None,
    device: str | torch.device | None = None,
    free: int | None = None,
    lang: str = "en",
) -> RankEstimate:
    """See the module docstring; the estimate when it fits (or when nothing is known of the host's memory)."""
    lang = check_lang(lang)
    dev = check_device(device, "device")
    cfg = get_config(preset)
    est = estimate_rank(cfg, SINGLE, packed=False, dtype=dtype, style="lab")
    r = room(dev, free)
    if r is not None and est.needed_bytes <= r.bytes and est.held_bytes > MARGIN_FLOOR:
        est.prepared = prepared_bytes(cfg, dtype)  # a smaller model's prepared layouts are of its size: the margin
    if r is None or est.needed_bytes <= r.bytes:
        return est
    fixes = [] if preset == "lab" else [FIXES["lab"][lang]]
    if est.dtype in ("float64", "float32"):
        fixes.append(FIXES["dtype"][lang])
    fixes.append(FIXES["room"][lang].format(need=gib(est.needed_bytes)))
    counted = bool(est.prepared) or est.held_bytes <= MARGIN_FLOOR
    need = gib(est.needed_bytes) if counted else AT_LEAST[lang].format(gib(est.needed_bytes))
    raise PlacementError(
        PRESET_REFUSAL[lang].format(
            preset=preset,
            need=need,
            what=WHAT[counted][lang].format(dtype=est.dtype),
            limit=LIMITS[r.limit][lang],
            room=gib(r.bytes),
            fixes=FIXES["or"][lang].join(fixes),
        )
    )


def open_checkpoint(
    folder: str | Path,
    device: str | None = None,
    dtype: str | None = None,
    shard: bool = True,
    free: int | None = None,
    option: str = "--checkpoint",
    lang: str = "en",
) -> tuple[Transformer, Any]:
    """(model, tokenizer) of a checkpoint folder: see the module docstring. free: injected free bytes (tests);
    lang: the language of a refusal about its tokenizer file."""
    if not Path(folder).is_dir():
        raise ValueError(
            f"{option} = {str(folder)!r} is not a folder: allowed a folder written by `dspark-lab checkpoint export` "
            "(config.json, model.safetensors.index.json, its shards and, for a vocabulary not the lab's, "
            "tokenizer.json)"
        )
    dev = check_device(device, "device")
    check_dtype(dtype, "dtype")
    check_tokenizer_file(folder, check_lang(lang))  # the same rule as the loader's, named in `lang`, before any work
    if shard:  # under torchrun only this rank's tensors are read
        model = maybe_distributed_load(folder, device=str(dev), dtype=dtype, tokenizer_required=True)
    else:
        model = load_checkpoint(folder, device=dev, dtype=dtype, free=free, tokenizer_required=True)
    return model, model.tokenizer


TOKENIZER_FILE_TEXT = lang_table("messages", "tokenizer_file")  # what is wrong with DIR/tokenizer.json
FILE_KINDS = {  # FolderFileError.kind → its id in the messages' file_kinds
    "a folder": "folder",
    "a FIFO (named pipe)": "fifo",
    "a socket": "socket",
    "a character device": "char_device",
    "a block device": "block_device",
}
FILE_KIND_TEXT = lang_table("messages", "file_kinds")


def check_tokenizer_file(folder: str | Path, lang: str = "en") -> None:
    """The tokenizer rule of `export.folder_tokenizer`, checked on the file alone (nothing parsed): DIR/tokenizer.json
    is a regular file inside the folder, or absent where config.json names the lab's vocabulary; else one line in
    `lang` naming the file."""
    lang = check_lang(lang)
    try:
        path = folder_file(folder, TOKENIZER_FILE)
    except FolderFileError as e:
        key = e.kind if e.kind in TOKENIZER_FILE_TEXT else "kind"
        what = FILE_KIND_TEXT[FILE_KINDS[e.kind]][lang] if e.kind in FILE_KINDS else e.kind
        raise RealScaleError(TOKENIZER_FILE_TEXT[key][lang].format(path=e.path, what=what)) from None
    if path is None:
        cfg, _, lab_section = read_config(folder)
        if lab_section.get("tokenizer") != LAB_VOCABULARY or get_tokenizer(cfg) is None:
            where = str(Path(folder) / TOKENIZER_FILE)
            raise RealScaleError(TOKENIZER_FILE_TEXT["missing"][lang].format(path=where, n=cfg.vocab_size))


def preset_weights(preset: str, weights: str | None, checkpoint: str | Path | None = None) -> str:
    """--weights for `preset`: None → "trained" for `lab` (or with a checkpoint), "untrained" for the other presets,
    whose only weights are the seeded init; an explicit "trained" for another preset is refused."""
    if weights is None:
        return "trained" if preset == "lab" or checkpoint is not None else "untrained"
    if preset != "lab" and weights != "untrained":
        raise ValueError(
            f"--weights {weights}: preset {preset!r} has no trained weights (the shipped set is the `lab` model's): "
            "allowed --weights untrained (the seeded init, the default for that preset)"
        )
    return weights
