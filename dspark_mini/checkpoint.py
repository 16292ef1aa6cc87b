"""Checkpoints: the model's parameters as one safetensors file, with its config and notes in the header.

  file = safetensors(tensors of one part, metadata = {format: "dspark-lab", version: "1", part, config, meta})
  part "all" = every parameter · "target" = every parameter not under `mtp.` · "draft" = only `mtp.*`
The draft shares the target's `embed` and `head` (they are not registered under `mtp`), so a draft file
holds only the draft layers and needs a target with the same config. Never pickle: safetensors stores raw
tensors and a JSON header, nothing runs on load. `load` checks everything first (format, config, the exact
set of names, every shape and dtype, every value finite) and only then copies into the model, so a bad file
leaves the model untouched; `load_model` refuses a header whose config would allocate an absurd model (its
parameters and the KV cache of one sequence) before it builds anything. The JSON strings of the header are parsed
with a size and depth limit (dspark_mini.jsonlimits): a hostile file is one clear error, never a RecursionError.
`save` writes a temporary file beside the target and renames it (dspark_mini.files), so nothing is half-written:
interrupted or out of disk, the previous file is byte for byte what it was.
A draft file may also record `target_sha256`: the sha256 of the target file it was trained against (the lab
checks it when it loads a set, lab/weights.py; `stamp_target` adds it to a file without touching a tensor).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from .config import ConfigError, ModelConfig, shown
from .files import atomic_path
from .jsonlimits import MAX_INT_DIGITS, JSONLimitError, loads
from .kv_cache import cache_bytes
from .model import Transformer
from .params import param_parts
from .presets import build_model
from .validate import is_integer

FORMAT = "dspark-lab"
VERSION = "1"
PARTS = ("all", "target", "draft")
DRAFT_PREFIX = "mtp."
SUFFIX = ".safetensors"
# config fields that shape only the draft: a "target" part loads into a model whatever they say
# fields a draft file may set for itself over its target's: the Markov head's kind and the draft's depth (with the
# draft layers' tail of compress_ratios; the backbone's entries must agree, `_draft_only_diff`)
DRAFT_ONLY_FIELDS = ("dspark_markov_kind", "n_mtp_layers", "compress_ratios")
# fields added to ModelConfig after files were written: a config without one is read with the value that file was
# computed (and its weights trained) with — the behaviour it had before the field existed
ADDED_FIELDS: dict[str, Any] = {"expert_act_quant": False}
TARGET_KEY = "target_sha256"  # header key of a draft file: the sha256 of the target file it was trained against
# the largest model a header may ask for: a bigger one is refused before anything is built (the lab model is
# 12 MB; DeepSeek-V4.1-Flash itself is far above this and is only ever built on the meta device)
MAX_MODEL_BYTES = 8 * 2**30
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit on a file's JSON header (the metadata strings are inside it)

# safetensors dtype codes → torch dtypes (for checks and messages)
ST_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


class CheckpointError(ValueError):
    """A checkpoint file is missing, is not a dspark-lab checkpoint, or does not fit the model."""


# ---- config ↔ JSON-safe dict ------------------------------------------------------------------------
def _fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(ModelConfig)}


def config_to_dict(cfg: ModelConfig) -> dict[str, Any]:
    """Every field of the config as plain JSON values (tuples → lists; `extra` kept as notes)."""
    out: dict[str, Any] = {}
    for name in _fields():
        v = getattr(cfg, name)
        out[name] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, dict) else v)
    return out


def _field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Check a JSON value against the type of the field's default; lists → tuples, ints → floats."""

    def bad(expected: str) -> CheckpointError:
        return CheckpointError(f"config field '{name}' = {shown(value)} has the wrong type: expected {expected}")

    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(default, int):
        if not is_integer(value):
            raise bad("an integer")
        return value
    if isinstance(default, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad("a number")
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float (a 400-digit number)
            raise bad("a finite number") from None
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or not all(type(x) is int for x in value):
            raise bad("a list of integers")
        return tuple(value)
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise bad("an object")
        return dict(value)
    raise bad(type(default).__name__)  # pragma: no cover - a new field type needs a rule above


def config_from_dict(d: dict[str, Any]) -> ModelConfig:
    """The validated config of a dict made by `config_to_dict` (or read from JSON).

    Every field except `extra` (free notes) must be present and no other key may be; each error names them. A field
    of `ADDED_FIELDS` missing from the dict takes the value written there (files older than the field)."""
    if not isinstance(d, dict):
        raise CheckpointError(f"config must be a JSON object (got {type(d).__name__})")
    fields = _fields()
    unknown = sorted(set(d) - set(fields))
    d = {**{n: v for n, v in ADDED_FIELDS.items() if n not in d}, **d}
    missing = [n for n in fields if n not in d and n != "extra"]
    if unknown or missing:
        parts = []
        if missing:
            parts.append(f"missing keys {shown(missing)}")
        if unknown:
            parts.append(f"unknown keys {shown(unknown)}")
        raise CheckpointError("config does not match ModelConfig: " + "; ".join(parts))
    kwargs = {n: _coerce(n, d[n], _field_default(fields[n])) for n in fields if n in d}
    try:
        return ModelConfig(**kwargs).validate()
    except ConfigError as e:
        raise CheckpointError(f"config is invalid: {e}") from e


def _config_diff(a: ModelConfig, b: ModelConfig) -> list[str]:
    """Names of the compared fields (all but `extra`) that differ."""
    return [f.name for f in dataclasses.fields(ModelConfig) if f.compare and getattr(a, f.name) != getattr(b, f.name)]


def _to_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"{what} must be JSON-serializable (plain numbers, strings, lists, dicts; no NaN): {e}"
        ) from e


# ---- which tensors belong to a part -----------------------------------------------------------------
def _check_part(part: Any) -> str:
    if part not in PARTS:
        raise CheckpointError(f"part = {part!r} is invalid: allowed one of {PARTS}")
    return part


def _in_part(name: str, part: str) -> bool:
    if part == "all":
        return True
    return name.startswith(DRAFT_PREFIX) == (part == "draft")


def part_tensors(model: nn.Module, part: str) -> dict[str, torch.Tensor]:
    """name → the model's own tensor (parameters and persistent buffers) for a part, not copies."""
    _check_part(part)
    return {n: t for n, t in model.state_dict(keep_vars=True).items() if _in_part(n, part)}


# ---- save -------------------------------------------------------------------------------------------
def save(
    model: Transformer,
    path: str | os.PathLike,
    part: str = "all",
    meta: dict | None = None,
    target_sha256: str | None = None,
) -> Path:
    """Write one part of the model to `path` (…/name.safetensors) atomically; returns the path.

    `meta` is a JSON-safe dict of notes (training steps, seed, measured accuracy, …); `target_sha256` (a draft
    part only) records the target file the draft was trained against."""
    path = Path(path)
    _check_part(part)
    if path.suffix != SUFFIX:
        raise CheckpointError(f"checkpoint path {str(path)!r} must end in {SUFFIX}")
    if path.is_dir():
        raise CheckpointError(f"checkpoint path {str(path)!r} is a directory")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CheckpointError(f"meta must be a dict (got {type(meta).__name__})")
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig):
        raise CheckpointError(f"save needs a dspark_mini Transformer with a .cfg (got {type(model).__name__})")
    header = {
        "format": FORMAT,
        "version": VERSION,
        "part": part,
        "config": _to_json(config_to_dict(cfg), "config (extra included)"),
        "meta": _to_json(meta, "meta"),
    }
    if target_sha256 is not None:
        if part != "draft":
            raise CheckpointError(f"target_sha256 is recorded in a draft file only (part = {part!r})")
        header[TARGET_KEY] = check_sha256(target_sha256)
    own = part_tensors(model, part)
    if not own:
        raise CheckpointError(f"the model has no tensors for part {part!r} (n_mtp_layers = {cfg.n_mtp_layers})")
    # own copies on CPU, contiguous, sharing no storage (safetensors refuses shared tensors)
    tensors = {n: t.detach().to("cpu").contiguous().clone() for n, t in own.items()}

    return write_tensors(tensors, path, header)


def check_sha256(value: Any) -> str:
    """A sha256 as 64 lowercase hex digits (what hashlib's hexdigest gives)."""
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise CheckpointError(f"{TARGET_KEY} = {value!r} is invalid: allowed 64 lowercase hex digits (a sha256)")
    return value


def stamp_target(path: str | os.PathLike, target_sha256: str) -> Path:
    """Record the target's sha256 in the header of a draft file (a model's draft part or a baseline drafter).

    Every tensor is copied as it is, byte for byte; only the header's `target_sha256` changes (atomically)."""
    p, handle = _open(path)
    with handle as f:
        md = dict(f.metadata() or {})
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    # a model draft part, or a baseline module (baselines.FORMAT; not imported: baselines imports this module)
    drafter = (md.get("format") == FORMAT and md.get("part") == "draft") or md.get("format") == "dspark-lab-baseline"
    if not drafter:
        raise CheckpointError(
            f"{str(p)!r} is not a drafter file (format {md.get('format')!r}, part {md.get('part')!r}): "
            "allowed a 'draft' checkpoint or a baseline drafter"
        )
    md[TARGET_KEY] = check_sha256(target_sha256)
    return write_tensors(tensors, p, md)


def write_tensors(tensors: dict[str, torch.Tensor], path: str | os.PathLike, header: dict[str, str]) -> Path:
    """safetensors written atomically (`files.atomic_path`): a reader never sees half a file; interrupted or out of
    disk, the previous file is unchanged and the error is one WriteError naming `path`. The same tensors and header
    give the same bytes (`sort_metadata`), so a seeded rebuild gives the same sha256."""
    with atomic_path(path) as tmp:
        try:
            save_file(tensors, str(tmp), metadata=header)
        except SafetensorError as e:  # an I/O error inside safetensors (a full disk) is not an OSError
            raise OSError(str(e).removeprefix("Error while serializing: ").removeprefix("I/O error: ")) from e
        sort_metadata(tmp)
    return Path(path)


def sort_metadata(path: Path) -> None:
    """Put the `__metadata__` keys of a safetensors file in sorted order, in place. safetensors writes them from a
    hash map, in an order that changes from one write to the next, so two writes of the same checkpoint would
    differ in their bytes (and sha256). Only the header's key order changes: the same text in another order has
    the same length, so the data offsets stay valid (checked)."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n)
        head = loads(raw, max(n, 1), max_int_digits=None)  # the lab's own header, through the bounded parser too
        if len(head.get("__metadata__") or {}) < 2:
            return
        ordered = {"__metadata__": dict(sorted(head.pop("__metadata__").items())), **head}
        text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (n - len(text))  # the header's own padding (safetensors pads it to a multiple of 8)
        if len(text) != n or loads(text, n, max_int_digits=None) != loads(raw, n, max_int_digits=None):
            raise OSError(f"the safetensors header of {str(path)!r} could not be put in a fixed order")
        f.seek(8)
        f.write(text)


# ---- read -------------------------------------------------------------------------------------------
def _what_is(path: Path) -> str:
    """A short guess at what a non-safetensors file is, for the error message."""
    with open(path, "rb") as f:
        head = f.read(8)
    if not head:
        return "an empty file"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (a torch.save checkpoint? those hold pickles and are never loaded here)"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return "a Python pickle (never loaded here)"
    return "unreadable as safetensors"


def _open(path: str | os.PathLike) -> tuple[Path, Any]:
    """The path and an open safetensors handle; CheckpointError if it is not a readable safetensors file."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint file at {str(path)!r}")
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} is not a file")
    try:
        handle = safe_open(str(path), framework="pt", device="cpu")
    except Exception as e:  # safetensors raises its own SafetensorError (and OSError)
        raise CheckpointError(
            f"{str(path)!r} is not a safetensors file: {_what_is(path)} ({e}); "
            "dspark-lab checkpoints are written by dspark_mini.checkpoint.save"
        ) from e
    return path, handle


def _header(path: Path, handle: Any) -> dict[str, Any]:
    md = handle.metadata() or {}
    if md.get("format") != FORMAT:
        raise CheckpointError(
            f"{str(path)!r} is a safetensors file but not a dspark-lab checkpoint: "
            f"its metadata has format = {shown(md.get('format'))} (keys {shown(sorted(md))}), expected {FORMAT!r}"
        )
    if md.get("version") != VERSION:
        raise CheckpointError(
            f"{str(path)!r} is a dspark-lab checkpoint of version {shown(md.get('version'))}: "
            f"this code reads version {VERSION!r}"
        )
    part = md.get("part")
    if part not in PARTS:
        raise CheckpointError(f"{str(path)!r} has part = {shown(part)}: allowed one of {PARTS}")
    return {"format": FORMAT, "version": VERSION, "part": part, **json_metadata(path, md)}


def json_metadata(path: Path, md: dict[str, str]) -> dict[str, Any]:
    """The header's `config` and `meta` JSON objects and its `target_sha256` (None when it has none); shared
    with the baseline drafters' files."""
    out: dict[str, Any] = {TARGET_KEY: None}
    if TARGET_KEY in md:
        try:
            out[TARGET_KEY] = check_sha256(md[TARGET_KEY])
        except CheckpointError as e:
            raise CheckpointError(f"{str(path)!r}: {e}") from e
    for key in ("config", "meta"):
        if key not in md:
            raise CheckpointError(f"{str(path)!r} has no readable '{key}' JSON in its metadata (no such key)")
        try:  # the config's numbers are bounded by its validation: Python's own digit limit only
            value = loads(md[key], MAX_HEADER_BYTES, max_int_digits=None if key == "config" else MAX_INT_DIGITS)
        except JSONLimitError as e:
            raise CheckpointError(f"{str(path)!r} has no readable '{key}' JSON in its metadata (it {e})") from None
        if not isinstance(value, dict):
            raise CheckpointError(f"{str(path)!r} has '{key}' metadata that is not a JSON object")
        out[key] = value
    return out


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """{format, version, part, config (dict), meta (dict), target_sha256} of a checkpoint, without loading
    any tensor."""
    p, handle = _open(path)
    with handle as f:
        return _header(p, f)


def _st_dtype_name(code: str) -> str:
    dt = ST_DTYPES.get(code)
    return str(dt).removeprefix("torch.") if dt is not None else code


def _listing(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


# ---- checks on values and sizes ---------------------------------------------------------------------
def check_finite(path: Path, name: str, t: torch.Tensor) -> None:
    """A stored tensor must hold finite numbers: a NaN or ±inf weight poisons every forward silently."""
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
        raise CheckpointError(
            f"{str(path)!r}: tensor {name!r} holds non-finite values ({n_nan} NaN, {n_inf} ±inf of {t.numel()}): "
            "allowed finite numbers only (a diverged training run or a damaged file)"
        )


def _part_name(cfg: ModelConfig, part: str) -> str:
    """A part of the size estimate, with the fields that drive it."""
    return {
        "vocab": f"the embedding and heads (vocab_size = {cfg.vocab_size:,})",
        "experts": f"the experts (n_routed_experts = {cfg.n_routed_experts:,}, moe_inter_dim = {cfg.moe_inter_dim:,})",
        "attention": f"the attention projections (n_heads = {cfg.n_heads:,}, head_dim = {cfg.head_dim:,})",
        "hc": f"the mHC mixes (hc_mult = {cfg.hc_mult})",
        "engram": f"the Engram tables (engram_vocab_size = {cfg.engram_vocab_size:,})",
        "cache": f"the KV cache of one sequence (max_seq_len = {cfg.max_seq_len:,})",
    }[part]


def check_size(cfg: ModelConfig, path: str | os.PathLike) -> None:
    """Refuse a header whose config would allocate more than MAX_MODEL_BYTES — its parameters and the KV cache of
    one sequence of max_seq_len tokens (`kv_cache.cache_bytes`) — before anything is built; the message names the
    part that is largest and the fields driving it."""
    itemsize, params = cfg.torch_dtype.itemsize, param_parts(cfg)
    n = sum(params.values())
    parts = {k: count * itemsize for k, count in params.items()} | {"cache": cache_bytes(cfg)}
    size = sum(parts.values())
    if size > MAX_MODEL_BYTES:
        raise CheckpointError(
            f"{str(path)!r}: its config would build a model of about {n:,} parameters ≈ {n * itemsize / 2**30:,.1f} "
            f"GiB in {cfg.dtype} and a KV cache of {parts['cache'] / 2**30:,.1f} GiB, {size / 2**30:,.1f} GiB in all "
            f"(vocab_size {cfg.vocab_size:,}, dim {cfg.dim:,}, n_layers {cfg.n_layers}), most of it "
            f"{_part_name(cfg, max(parts, key=parts.get))}: allowed at most {MAX_MODEL_BYTES / 2**30:.0f} GiB; "
            "refused before building anything"
        )


# ---- load -------------------------------------------------------------------------------------------
def _draft_only_diff(diff: list[str], a: ModelConfig, b: ModelConfig) -> list[str]:
    """The differences left once the draft's own fields are set aside: a draft's depth and its layers' ratios may
    differ from the target's, the backbone's compress_ratios (the first n_layers entries) may not."""
    backbone_differs = a.compress_ratios[: a.n_layers] != b.compress_ratios[: b.n_layers]
    return [n for n in diff if n not in DRAFT_ONLY_FIELDS or (n == "compress_ratios" and backbone_differs)]


def load(model: Transformer, path: str | os.PathLike, strict_config: bool = True) -> dict[str, Any]:
    """Load the part stored in `path` into `model` in place; returns the checkpoint's meta dict.

    Checks, before touching the model: the file is a dspark-lab safetensors checkpoint; its config equals
    the model's (with strict_config=False only `dtype` may differ, and tensors are cast to the model's
    dtypes); the exact set of tensor names of the part; every shape and dtype. Any failure raises
    CheckpointError and leaves the model unchanged."""
    p, handle = _open(path)
    with handle as f:
        return _load_open(model, p, f, strict_config)


def _load_open(model: Transformer, p: Path, handle: Any, strict_config: bool) -> dict[str, Any]:
    header = _header(p, handle)
    try:
        file_cfg = config_from_dict(header["config"])
    except CheckpointError as e:
        raise CheckpointError(f"{str(p)!r}: {e}") from e
    model_cfg = getattr(model, "cfg", None)
    if not isinstance(model_cfg, ModelConfig):
        raise CheckpointError(f"load needs a dspark_mini Transformer with a .cfg (got {type(model).__name__})")

    diff = _config_diff(file_cfg, model_cfg)
    if header["part"] == "target":
        diff = _draft_only_diff(diff, file_cfg, model_cfg)
    cast = not strict_config and diff == ["dtype"]
    if diff and not cast:
        lines = "; ".join(f"{n}: file {getattr(file_cfg, n)!r}, model {getattr(model_cfg, n)!r}" for n in diff)
        hint = " (strict_config=False allows only dtype to differ)" if "dtype" in diff else ""
        raise CheckpointError(f"{str(p)!r} was saved with a different config — {lines}{hint}")

    part = header["part"]
    own = part_tensors(model, part)
    # what the file must hold: the model's own tensors, or, when casting, those of the file's config
    ref = part_tensors(build_model(file_cfg, device="meta"), part) if cast else own
    names = set(handle.keys())
    missing = sorted(set(ref) - names)
    unexpected = sorted(names - set(ref))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} tensor(s): {_listing(missing)}")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} tensor(s): {_listing(unexpected)}")
        raise CheckpointError(f"{str(p)!r} (part {part!r}) does not fit the model: " + "; ".join(parts))

    who = f"a {file_cfg.dtype} model of this config" if cast else "the model"
    bad = []
    for name in sorted(ref):
        sl = handle.get_slice(name)
        shape, code = tuple(sl.get_shape()), sl.get_dtype()
        want_shape, want_dtype = tuple(ref[name].shape), ref[name].dtype
        if shape != want_shape or ST_DTYPES.get(code) != want_dtype or tuple(own[name].shape) != want_shape:
            bad.append(
                f"tensor {name!r}: file has shape {shape} dtype {_st_dtype_name(code)}, "
                f"{who} has shape {want_shape} dtype {str(want_dtype).removeprefix('torch.')}"
            )
    if bad:
        more = f"; … ({len(bad)} in all)" if len(bad) > 12 else ""
        raise CheckpointError(f"{str(p)!r} does not fit the model: " + "; ".join(bad[:12]) + more)

    staged = {}
    for name in ref:
        try:
            t = handle.get_tensor(name)
        except Exception as e:
            raise CheckpointError(f"{str(p)!r}: tensor {name!r} could not be read ({e})") from e
        check_finite(p, name, t)
        if cast:  # strict_config=False: the file's dtype → the model's dtype (e.g. float32 → float64)
            t = t.to(own[name].dtype)
        staged[name] = t
    with torch.no_grad():
        for name, t in staged.items():
            own[name].copy_(t)
    return header["meta"]


def load_model(
    path_target: str | os.PathLike,
    path_draft: str | os.PathLike | None = None,
    device: str | torch.device | None = None,
) -> Transformer:
    """A model built from the config stored in `path_target` (the lab tokenizer's compress map when the
    vocabulary matches), with the target part loaded (or everything, for an "all" file) and then the draft
    part from `path_draft` if given (its config must equal the target's, except the draft-only fields such as
    dspark_markov_kind: the model is then built with the draft's). Without a draft file, the draft layers of a
    "target" file keep the seed-0 init."""
    header = read_header(path_target)
    if header["part"] not in ("target", "all"):
        raise CheckpointError(
            f"{str(path_target)!r} holds part {header['part']!r}: load_model needs a 'target' or 'all' checkpoint first"
        )
    cfg_dict = header["config"]
    if path_draft is not None:
        draft_header = read_header(path_draft)
        if draft_header["part"] != "draft":
            raise CheckpointError(
                f"{str(path_draft)!r} holds part {draft_header['part']!r}: path_draft must be a 'draft' checkpoint"
            )
        if header["part"] == "target":
            cfg_dict = {
                **cfg_dict,
                **{n: draft_header["config"][n] for n in DRAFT_ONLY_FIELDS if n in draft_header["config"]},
            }
    try:
        cfg = config_from_dict(cfg_dict)
    except CheckpointError as e:
        raise CheckpointError(f"{str(path_target)!r}: {e}") from e
    check_size(cfg, path_target)  # from the header alone: nothing is allocated for an absurd config
    # every weight comes from the files when they hold the whole model: no random init to throw away
    whole = header["part"] == "all" or (path_draft is not None and cfg.n_mtp_layers > 0)
    model = build_model(cfg, init=not whole)
    meta = load(model, path_target)
    if path_draft is not None:
        meta = load(model, path_draft)
    if model.mtp is not None and meta.get("confidence_temperatures") is not None:
        try:  # STS calibration fitted after training (lab/evaluation/calibration.py)
            model.mtp.set_confidence_temperatures(meta["confidence_temperatures"])
        except ValueError as e:
            raise CheckpointError(f"{str(path_draft or path_target)!r}: {e}") from e
    return model.to(device) if device is not None else model
