"""The model a command runs on, wherever it runs: one process or a rank of torchrun, the lab's own set or a
checkpoint folder in the official layout.

  open_checkpoint(folder, device, dtype, shard=True, free=None, lang="en") → (model, tokenizer)
      the one way a command opens --checkpoint DIR: its config.json, the weights its index lists and its tokenizer
      (`export.folder_tokenizer`: DIR/tokenizer.json, or the lab's vocabulary where config.json names it), read
      together, or one error naming what is missing — never the lab's vocabulary in place of a missing file;
      under torchrun only this rank's tensors are read.
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

from pathlib import Path
from typing import Any

import torch

from dspark_mini import build_model, get_config, get_tokenizer
from dspark_mini.device import PlacementError, check_device, check_dtype, compute_config
from dspark_mini.hf_tokenizer import TOKENIZER_FILE, FolderFileError, folder_file
from dspark_mini.model import Transformer

from ..text import check_lang
from ..weights import lab_model
from .distributed import maybe_distributed, maybe_distributed_load
from .export import LAB_VOCABULARY, load_checkpoint, read_config
from .layout import RealScaleError
from .placement import GIB, LIMITS, MARGIN_FLOOR, RankEstimate, estimate_rank, prepared_bytes, room
from .ranks import SINGLE


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
    if preset != "lab":
        model = build_model(compute_config(cfg, dtype), seed, device=dev, on_device=True)
        return maybe_distributed(model, device=str(dev)) if shard else model
    model = lab_model(weights, seed, device="cpu", dtype=dtype)
    return maybe_distributed(model, device=str(dev)) if shard else model.to(dev)


PRESET_REFUSAL = {
    "en": "--preset {preset} does not fit: it needs {need} ({what}) but {limit} leaves {room}: allowed {fixes}; "
    "refused before allocating",
    "vi": "--preset {preset} không vừa bộ nhớ: cần {need} ({what}) nhưng {limit} chỉ còn {room}: chỉ nhận {fixes}; "
    "đã từ chối trước khi cấp phát",
}
WHAT = {  # counted with the prepared layouts / without (the weights alone were already too many)
    True: {
        "en": "its weights unpacked to {dtype}, the layouts its first forward prepares and a margin",
        "vi": "trọng số ở dạng {dtype}, các bố cục lượt chạy đầu chuẩn bị và phần dự phòng",
    },
    False: {
        "en": "its weights unpacked to {dtype} and a margin alone, before the layouts its first forward prepares",
        "vi": "chỉ riêng trọng số ở dạng {dtype} và phần dự phòng, chưa kể các bố cục lượt chạy đầu chuẩn bị",
    },
}
AT_LEAST = {"en": "at least {}", "vi": "ít nhất {}"}
FIXES = {
    "lab": {"en": "--preset lab", "vi": "--preset lab"},
    "dtype": {"en": "a smaller --dtype (bfloat16)", "vi": "--dtype nhỏ hơn (bfloat16)"},
    "room": {"en": "at least {need} free under that limit", "vi": "ít nhất {need} còn trống dưới giới hạn đó"},
    "or": {"en": ", or ", "vi": ", hoặc "},
}


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
            limit=LIMITS[r.limit][lang == "vi"],
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


TOKENIZER_FILE_TEXT = {  # what is wrong with DIR/tokenizer.json → (English, Vietnamese)
    "missing": (
        "{path!r} is missing: a checkpoint folder holds the tokenizer of its vocabulary ({n:,} ids) there (its "
        "config.json does not name the lab's vocabulary: a folder `dspark-lab checkpoint export` wrote from the lab "
        "model does)",
        "{path!r} không có: thư mục checkpoint giữ bộ tách từ của bộ từ vựng ({n:,} id) ở đó (config.json của nó "
        "không ghi bộ từ vựng của lab: thư mục do `dspark-lab checkpoint export` ghi từ mô hình lab thì có)",
    ),
    "dangling": (
        "{path}: a link to nothing (dangling): allowed a regular file in the folder",
        "{path}: một liên kết không trỏ tới đâu: chỉ nhận một tệp thường trong thư mục",
    ),
    "loop": (
        "{path}: cannot be resolved (a loop of links?): allowed a regular file",
        "{path}: không lần ra được (các liên kết vòng quanh?): chỉ nhận một tệp thường",
    ),
    "outside": (
        "{path}: a link that leads outside the checkpoint folder: allowed only files inside the folder (copy the file "
        "in)",
        "{path}: một liên kết dẫn ra ngoài thư mục checkpoint: chỉ nhận tệp nằm trong thư mục (hãy chép tệp vào)",
    ),
    "kind": ("{path}: is {what}: allowed a regular file", "{path}: là {what}: chỉ nhận một tệp thường"),
}
FILE_KINDS_VI = {
    "a folder": "một thư mục",
    "a FIFO (named pipe)": "một FIFO (ống có tên)",
    "a socket": "một socket",
    "a character device": "một thiết bị ký tự",
    "a block device": "một thiết bị khối",
}


def check_tokenizer_file(folder: str | Path, lang: str = "en") -> None:
    """The tokenizer rule of `export.folder_tokenizer`, checked on the file alone (nothing parsed): DIR/tokenizer.json
    is a regular file inside the folder, or absent where config.json names the lab's vocabulary; else one line in
    `lang` naming the file."""
    vi = lang == "vi"
    try:
        path = folder_file(folder, TOKENIZER_FILE)
    except FolderFileError as e:
        key = e.kind if e.kind in TOKENIZER_FILE_TEXT else "kind"
        what = FILE_KINDS_VI.get(e.kind, e.kind) if vi else e.kind
        raise RealScaleError(TOKENIZER_FILE_TEXT[key][vi].format(path=e.path, what=what)) from None
    if path is None:
        cfg, _, lab_section = read_config(folder)
        if lab_section.get("tokenizer") != LAB_VOCABULARY or get_tokenizer(cfg) is None:
            where = str(Path(folder) / TOKENIZER_FILE)
            raise RealScaleError(TOKENIZER_FILE_TEXT["missing"][vi].format(path=where, n=cfg.vocab_size))


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
