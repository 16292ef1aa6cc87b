"""Export a lab model in the official checkpoint layout, and load one back lazily.

  export_checkpoint(model, out_dir, shards=N, style="lab")
      → out_dir/config.json, model.safetensors.index.json, model-0000k-of-0000N.safetensors (and, for a model of
        the lab's vocabulary, its tokenizer.json + tokenizer_config.json: a folder like any real checkpoint's)
  load_checkpoint(out_dir, select=None, packed=False)  → a lab Transformer
  CheckpointReader(out_dir)                            → one rank's view: tensors (or row / column slices of
                                                         them) read only when asked for
  build_on_meta(cfg)                                   → the model with its weights on `meta`, buffers real: what
                                                         each rank of `distributed.load_sharded` starts from

Names, dtypes and shapes are `layout.py`'s. Style "lab" (the default) is exact: the model read back gives the
same logits and tokens as the model exported. Style "official" writes the real checkpoint's dtypes (FP8 dense
projections, BF16/FP32 for the rest), which rounds lab weights that are not already on those grids.
A packed model (dspark_mini.packed) exports its codes and scales as they are; a plain one is packed on the way.
Loading opens each shard with safetensors' `safe_open` (memory-mapped) only when one of its tensors is asked
for, checks every requested tensor's header (present, dtype, shape, inside the file) before reading any data,
and reads exactly the requested tensors — so a rank that holds a shard of the model reads only its shard.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from torch.overrides import TorchFunctionMode

from dspark_mini.checkpoint import CheckpointError, check_size, config_from_dict, config_to_dict, write_tensors
from dspark_mini.config import ModelConfig, shown
from dspark_mini.files import folder_swap, write_atomic
from dspark_mini.hf_tokenizer import CONFIG_FILE, TOKENIZER_FILE, HFTokenizer, folder_file
from dspark_mini.jsonlimits import read_json
from dspark_mini.model import Transformer
from dspark_mini.packed import (
    PACKED_FORMATS,
    PackedWeight,
    drop_weight_caches,
    pack,
    packed_module,
    packed_ranges,
    replace_module,
    unpack,
)
from dspark_mini.presets import build_model, get_tokenizer
from dspark_mini.tokenizer import LAB_TOKENIZER_DIR, TokenizerError

from .layout import (
    LAB_FORMAT,
    LAB_KEY,
    LAB_VERSION,
    MXFP4_STORED,
    ST_DTYPES,
    RealScaleError,
    Stored,
    by_name,
    check_style,
    config_from_official,
    dtype_code,
    layout,
    official_text_config,
    quantization_config,
)
from .placement import check_fits, estimate_rank
from .ranks import SINGLE
from .shards import (
    CONFIG,
    INDEX,
    assign_shards,
    read_header,
    read_index,
    shard_name,
    shard_path,
    write_index,
    write_json,
)

MAX_CONFIG = 2**24  # bytes of a config.json: the real one has ~4 KB, the lab's own section as much again
LAB_VOCABULARY = "lab"  # config.json's "dspark_lab" → "tokenizer": the model reads the lab's built-in vocabulary


# ---- config.json -------------------------------------------------------------------------------------
def config_json(cfg: ModelConfig, style: str, confidence_temperatures=None, tokenizer: str | None = None) -> dict:
    """config.json in the official shape (architectures, model_type, quantization_config, text_config), plus the
    lab's full config under "dspark_lab" so the lab model is rebuilt exactly (its fields are a superset).
    tokenizer: LAB_VOCABULARY when the model reads the lab's built-in vocabulary (an export writes its tokenizer.json
    beside it; a folder without one, an older export, is read with the lab tokenizer); None: the folder's
    tokenizer.json is its vocabulary."""
    return {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "quantization_config": quantization_config(cfg, style),
        "text_config": official_text_config(cfg),
        LAB_KEY: {
            "format": LAB_FORMAT,
            "version": LAB_VERSION,
            "style": style,
            "config": config_to_dict(cfg),
            "confidence_temperatures": list(confidence_temperatures) if confidence_temperatures else None,
            "tokenizer": tokenizer,
        },
    }


def read_config(folder: str | os.PathLike) -> tuple[ModelConfig, str, dict]:
    """(config, style, the "dspark_lab" section or {}) of a checkpoint folder's config.json. A config.json
    without the lab's section (the real checkpoint's) is read from its official `text_config`, style official."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise RealScaleError(f"{str(path)!r} is missing: a checkpoint folder needs its {CONFIG}")
    try:  # the config's numbers are bounded by its validation: Python's own digit limit only
        d = read_json(path, MAX_CONFIG, max_int_digits=None)
        if not isinstance(d, dict):
            raise ValueError("is not a JSON object")
    except ValueError as e:
        raise RealScaleError(f"{str(path)!r} is not readable JSON: it {e}") from None
    lab = d.get(LAB_KEY)
    if lab is None:
        if not isinstance(d.get("text_config"), dict):
            raise RealScaleError(f"{str(path)!r} has neither a {LAB_KEY!r} section nor an official 'text_config'")
        return config_from_official(d["text_config"]), "official", {}
    if not isinstance(lab, dict) or lab.get("format") != LAB_FORMAT or lab.get("version") != LAB_VERSION:
        raise RealScaleError(
            f"{str(path)!r}: its {LAB_KEY!r} section is not format {LAB_FORMAT!r} version {LAB_VERSION} "
            f"(got {shown(lab.get('format') if isinstance(lab, dict) else lab)})"
        )
    try:
        cfg = config_from_dict(lab.get("config"))
    except CheckpointError as e:
        raise RealScaleError(f"{str(path)!r}: {e}") from e
    return cfg, check_style(lab.get("style")), lab


# ---- export ------------------------------------------------------------------------------------------
def _logical(model: nn.Module, lab: str, state: dict[str, torch.Tensor]) -> torch.Tensor:
    """The value of a lab tensor: the parameter, or the dequantized weight of the packed module holding it."""
    if lab in state:
        return state[lab]
    path = lab.rpartition(".")[0]
    mod = model.get_submodule(path)
    if not isinstance(mod, PackedWeight):
        raise RealScaleError(f"the model has no tensor {lab!r} (nor a packed module at {path!r})")
    return mod.weight


def stored_tensors(model: nn.Module, style: str = "lab") -> dict[str, torch.Tensor]:
    """name → the tensor a checkpoint of `model` in `style` stores (CPU, contiguous), in layout order."""
    cfg = model.cfg
    state = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    entries = layout(cfg, check_style(style))
    for i, s in enumerate(entries):
        if s.role == "scale":
            continue  # written with its weight
        if s.fmt == "float":
            out[s.name] = _logical(model, s.lab, state).detach().to("cpu", s.dtype).contiguous()
            continue
        mod = model.get_submodule(s.lab.rpartition(".")[0])
        if isinstance(mod, PackedWeight) and mod.fmt == s.fmt:
            q, sc = mod.qweight, mod.scale  # packed already: exported as held
        else:
            q, sc = pack(s.fmt, _logical(model, s.lab, state).detach(), s.lab)
        if s.fmt == "mxfp4":
            q = q.view(MXFP4_STORED)  # the same bytes, the checkpoint's I8
        out[s.name] = q.to("cpu").contiguous()
        out[entries[i + 1].name] = sc.to("cpu").contiguous()
    return out


CHECKPOINT_KINDS = ("export", "headers")  # owner kinds a checkpoint folder may replace (with overwrite)


@torch.no_grad()
def export_checkpoint(
    model: Transformer, out_dir: str | os.PathLike, shards: int = 1, style: str = "lab", overwrite: bool = False
) -> Path:
    """Write `model` (target + DSpark draft) as sharded safetensors + index + config.json; returns out_dir.

    Shards hold about equal bytes, in layout order (embed, layers 0…, norm, head, mtp.*). The folder is built
    beside `out_dir` and swapped in whole (dspark_mini.files.folder_swap), so a folder with an index is complete
    and an interrupted or out-of-disk export leaves the previous one byte for byte. `overwrite` replaces only a
    folder the lab wrote (its .dspark-lab-files.json lists every file in it); any other non-empty folder — a
    Hugging Face checkpoint, say — is refused and nothing in it is touched. A model of the lab's vocabulary gets the
    lab tokenizer's files too (tokenizer.json, tokenizer_config.json: copies of dspark_mini/lab_tokenizer/), so the
    folder loads through `HFTokenizer.from_folder` like any real checkpoint."""
    if not isinstance(getattr(model, "cfg", None), ModelConfig):
        raise RealScaleError(f"export needs a dspark_mini Transformer with a .cfg (got {type(model).__name__})")
    out_dir = Path(out_dir)
    tensors = stored_tensors(model, style)
    names = list(tensors)
    which = assign_shards([tensors[n].nbytes for n in names], shards)
    temps = getattr(getattr(model, "mtp", None), "confidence_temperatures", None)
    with folder_swap(out_dir, "export", overwrite, CHECKPOINT_KINDS, error=RealScaleError) as work:
        weight_map: dict[str, str] = {}
        for k in range(shards):
            file = shard_name(k, shards)
            part = {n: tensors[n] for n, w in zip(names, which, strict=True) if w == k}
            write_tensors(part, work / file, {"format": "pt"})
            weight_map.update(dict.fromkeys(part, file))
        vocabulary = vocabulary_of(model)
        write_json(work / CONFIG, config_json(model.cfg, style, temps, vocabulary))
        if vocabulary == LAB_VOCABULARY:
            for name in (TOKENIZER_FILE, CONFIG_FILE):
                write_atomic(work / name, (LAB_TOKENIZER_DIR / name).read_bytes())
        write_index(work, weight_map, sum(t.nbytes for t in tensors.values()))
    return out_dir


# ---- load --------------------------------------------------------------------------------------------
class CheckpointReader:
    """A checkpoint folder opened lazily. Opening reads config.json and the index only; a shard's header is
    read the first time one of its tensors is checked, its data only by `raw` / `lab_value` / `packed_value`."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.weight_map, self.index_metadata = read_index(self.folder)
        self.cfg, self.style, self.lab_section = read_config(self.folder)
        self.entries = layout(self.cfg, self.style)
        self.expected = by_name(self.entries)
        self.by_lab: dict[str, list[Stored]] = {}
        for s in self.entries:
            self.by_lab.setdefault(s.lab, []).append(s)
        self._headers: dict = {}
        self._handles: dict = {}
        self.bytes_read = 0  # bytes of tensor data read so far (the headers not counted)

    def lab_names(self) -> list[str]:
        """Every lab tensor this checkpoint's config has, in state-dict order."""
        return list(self.by_lab)

    def _where(self, name: str) -> str:
        if name not in self.weight_map:
            raise RealScaleError(f"tensor {name!r} is missing: {str(self.folder / INDEX)!r} does not list it")
        return self.weight_map[name]

    def header(self, shard: str):
        if shard not in self._headers:
            h = read_header(shard_path(self.folder, shard))  # clear errors: outside the folder, missing, truncated
            if h.header_only:
                raise RealScaleError(
                    f"shard {str(h.path)!r} is header-only (real shapes, no data: written for inspection); "
                    "it cannot be loaded"
                )
            offsets = h.offsets_problem()
            if offsets is not None:
                raise RealScaleError(offsets)
            self._headers[shard] = h
        return self._headers[shard]

    def check(self, names: Iterable[str]) -> None:
        """Check the headers of these checkpoint tensors against the layout, reading no data."""
        for name in names:
            shard = self._where(name)
            try:
                h = self.header(shard)
            except RealScaleError as e:
                raise RealScaleError(f"tensor {name!r}: {e}") from e
            want = self.expected[name]
            t = h.tensors.get(name)
            if t is None:
                raise RealScaleError(f"tensor {name!r} is missing from shard {str(h.path)!r} (the index maps it there)")
            if t.dtype != dtype_code(want.dtype) or t.shape != want.shape:
                raise RealScaleError(
                    f"tensor {name!r} in {str(h.path)!r} is {t.dtype} {list(t.shape)}: "
                    f"allowed {dtype_code(want.dtype)} {list(want.shape)} for this config"
                )
            if t.end > h.data_size:
                raise RealScaleError(
                    f"shard {str(h.path)!r} is truncated: tensor {name!r} needs data bytes {t.begin:,}…{t.end:,}, "
                    f"the file holds {h.data_size:,}"
                )

    def _handle(self, shard: str):
        if shard not in self._handles:
            try:
                self._handles[shard] = safe_open(str(shard_path(self.folder, shard)), framework="pt", device="cpu")
            except Exception as e:  # safetensors' own error type
                raise RealScaleError(f"shard {str(self.folder / shard)!r} cannot be opened ({e})") from e
        return self._handles[shard]

    def raw(self, name: str, cut: tuple[int, int, int] | None = None) -> torch.Tensor:
        """One stored tensor as it is in the file (checked first) — or only rows (dim 0) / columns (dim 1)
        start … stop − 1 of it, cut = (dim, start, stop): a safetensors slice, only those bytes are copied."""
        self.check([name])
        handle = self._handle(self.weight_map[name])
        if cut is None:
            t = handle.get_tensor(name)
        else:
            dim, start, stop = cut
            part = handle.get_slice(name)
            t = part[start:stop] if dim == 0 else part[:, start:stop]
        if ST_DTYPES[dtype_code(t.dtype)] != self.expected[name].dtype:  # pragma: no cover - checked above
            raise RealScaleError(f"tensor {name!r} read back as {t.dtype}")
        self.bytes_read += t.nbytes
        return t

    def stored_of(self, lab: str) -> list[Stored]:
        if lab not in self.by_lab:
            raise RealScaleError(f"{lab!r} is not a tensor of this config ({self.cfg.name})")
        return self.by_lab[lab]

    def packed_value(self, lab: str) -> tuple[str, torch.Tensor, torch.Tensor]:
        """(format, codes, scales) of a packed lab tensor, as stored (MXFP4 bytes viewed as uint8)."""
        w, s = self.stored_of(lab)
        q = self.raw(w.name)
        return w.fmt, (q.view(torch.uint8) if w.fmt == "mxfp4" else q), self.raw(s.name)

    def packed_slice(self, lab: str, cut: tuple[int, int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes, scales) of rows / columns cut = (dim, start, stop) of a packed lab tensor (None: all of it): only
        the slices of its two stored tensors are read; a cut through a scale block is a PackError."""
        w, s = self.stored_of(lab)
        if cut is None:
            return self.packed_value(lab)[1:]
        q_cut, s_cut = packed_ranges(w.fmt, *cut, name=w.name)
        q = self.raw(w.name, q_cut)
        return (q.view(torch.uint8) if w.fmt == "mxfp4" else q), self.raw(s.name, s_cut)

    def lab_slice(self, lab: str, cut: tuple[int, int, int] | None, dtype: torch.dtype) -> torch.Tensor:
        """Rows / columns cut = (dim, start, stop) of a lab tensor in `dtype` (None: `lab_value`), dequantized if
        packed; only those ranges of its stored tensors are read."""
        entries = self.stored_of(lab)
        if cut is None:
            return self.lab_value(lab, dtype)
        if entries[0].fmt == "float":
            t = self.raw(entries[0].name, cut).to(dtype)
        else:
            t = unpack(entries[0].fmt, *self.packed_slice(lab, cut), dtype, entries[0].name)
        return self._finite(t, entries[0].name)

    def lab_value(self, lab: str, dtype: torch.dtype) -> torch.Tensor:
        """A lab tensor's values in `dtype` (dequantized if packed); only its stored tensors are read."""
        entries = self.stored_of(lab)
        if entries[0].fmt == "float":
            t = self.raw(entries[0].name).to(dtype)
        else:
            fmt, q, s = self.packed_value(lab)
            t = unpack(fmt, q, s, dtype, entries[0].name)
        return self._finite(t, entries[0].name)

    def _finite(self, t: torch.Tensor, name: str) -> torch.Tensor:
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise RealScaleError(
                f"tensor {name!r} in {str(self.folder / self.weight_map[name])!r} holds NaN "
                "or ±inf values: allowed finite numbers only"
            )
        return t

    def close(self) -> None:
        self._handles.clear()


def _selector(select) -> Callable[[str], bool]:
    if select is None:
        return lambda name: True
    if callable(select):
        return select
    wanted = set(select)
    return lambda name: name in wanted


class _EmptyOnMeta(TorchFunctionMode):
    """While a model is built: `torch.empty` — what every weight (nn.Linear, nn.Embedding, nn.Parameter(torch.empty
    …)) is made of — allocates on `meta`; the small buffers made from torch.tensor / arange / zeros (RoPE
    frequencies, the compress map, the Engram multipliers, mHC's constants) stay real."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.empty:
            kwargs = {**kwargs, "device": "meta"}
        return func(*args, **kwargs)


def build_on_meta(cfg: ModelConfig) -> Transformer:
    """The model of `cfg` with its weights on `meta` (shapes, no storage: the real `flash` costs nothing) and its
    buffers real, not initialized: to be sharded (`distributed.shard_model`) and filled from a checkpoint."""
    with _EmptyOnMeta():
        model = build_model(cfg, init=False)
    small = 2 * cfg.hc_mult * cfg.dim  # the largest weight made by zeros / ones: Engram q/k [hc, D], norms, gate bias
    real = [n for n, p in model.named_parameters() if not p.is_meta and p.numel() > small]
    if real:  # a weight made some other way than torch.empty would be allocated in full on every rank
        raise RealScaleError(f"build_on_meta: {real[0]!r} was allocated in full ({len(real)} such weights)")
    lost = [n for n, b in model.named_buffers() if b.is_meta]
    if lost:
        raise RealScaleError(f"build_on_meta: buffer {lost[0]!r} landed on meta; its value would be lost")
    return model


@torch.no_grad()
def load_checkpoint(
    folder: str | os.PathLike,
    select: Iterable[str] | Callable[[str], bool] | None = None,
    packed: bool = False,
    device: str | torch.device | None = None,
    dtype: str | None = None,
    free: int | None = None,
    tokenizer_required: bool = False,
) -> Transformer:
    """A lab model built from the folder's config with its tensors read from the shards, its Engram reading the
    compressed ids of the folder's tokenizer (`folder_tokenizer`, kept as `model.tokenizer`; None when the folder
    has none and `tokenizer_required` is False: then Engram folds ids mod its size).

    select: lab state-dict names (or a predicate on them) to read — a rank asks only for its share; the others
            keep the seed-0 init. Unknown names are an error. Every selected tensor's header is checked first.
    packed: keep what the checkpoint stores packed as `PackedLinear` / `PackedEmbedding` modules holding the
            stored codes and scales (nothing re-quantized; memory ≈ the checkpoint's bytes).
    dtype:  the compute dtype the model is built in (default the config's; `placement.compute_config`).
    Before anything is built, the memory estimate of the whole model (`placement`) is compared with what `device`
    has free (`free`: injected free bytes, for tests) and refused when it does not fit."""
    from dspark_mini.device import check_device, compute_config

    dev = check_device(device, "device")
    reader = CheckpointReader(folder)
    cfg = reader.cfg
    keep = _selector(select)
    if select is not None and not callable(select):
        unknown = sorted(set(select) - set(reader.by_lab))
        if unknown:
            raise RealScaleError(f"select names tensors this config does not have: {unknown[:8]}")
    labs = [lab for lab in reader.lab_names() if keep(lab)]
    reader.check(s.name for lab in labs for s in reader.by_lab[lab])  # every header before any data
    check_size(cfg, reader.folder)  # refuse a config too big to build here, before allocating it
    est = estimate_rank(cfg, SINGLE, packed=packed, dtype=dtype, style=reader.style)  # from config.json alone
    check_fits(est, dev, free)
    model = build_model(compute_config(cfg, dtype))
    tok = folder_tokenizer(reader.folder, cfg, reader.lab_section, tokenizer_required)
    if tok is not None:  # Engram reads the compressed ids of the checkpoint's own vocabulary
        model.compress_map.copy_(torch.tensor(tok.compress_map))  # [V]
    state = model.state_dict()
    for lab in labs:
        fmt = reader.by_lab[lab][0].fmt
        if packed and fmt in PACKED_FORMATS:
            path = lab.rpartition(".")[0]
            dtype_of = model.get_submodule(path).weight.dtype
            _, q, s = reader.packed_value(lab)
            replace_module(model, path, packed_module(fmt, q, s, dtype_of, lab))
        else:
            state[lab].copy_(reader.lab_value(lab, state[lab].dtype))
    if packed:
        drop_weight_caches(model)
    temps = reader.lab_section.get("confidence_temperatures")
    if model.mtp is not None and temps is not None:
        model.mtp.set_confidence_temperatures(temps)
    reader.close()
    model = model.to(dev)
    model.tokenizer = tok
    return model


def vocabulary_of(model: Transformer) -> str | None:
    """LAB_VOCABULARY when `model` reads the lab's built-in vocabulary (its size and its Engram compress map), else
    None (its folder must then hold the tokenizer.json of its vocabulary)."""
    lab = get_tokenizer(model.cfg)
    if lab is None or model.compress_map.tolist() != list(lab.compress_map):
        return None
    return LAB_VOCABULARY


def folder_tokenizer(
    folder: str | os.PathLike, cfg: ModelConfig, lab_section: dict | None = None, required: bool = False
) -> HFTokenizer | None:
    """The checkpoint's tokenizer, the one rule every command that opens a folder follows:

    - a `tokenizer.json` in the folder (a regular file inside it: a FIFO, a folder, a dangling link or a link out
      of the folder is an error, never taken as "absent"), read with `tokenizers` (`dspark_mini.hf_tokenizer`);
      its vocabulary must be the config's, and the Engram compressed vocabulary derived from it must have the
      config's size (every Engram hash multiplier depends on that number);
    - none, in a folder `dspark-lab checkpoint export` wrote from a model of the lab's vocabulary before exports
      carried the lab's tokenizer.json (its config.json says "tokenizer": "lab"): the lab tokenizer;
    - otherwise None, or with `required` a RealScaleError naming the missing tokenizer.json (nothing falls back to
      the lab's vocabulary)."""
    folder = Path(folder)
    try:
        path = folder_file(folder, TOKENIZER_FILE)
        tok = None if path is None else HFTokenizer.from_folder(folder, vocab_size=cfg.vocab_size)
    except TokenizerError as e:
        raise RealScaleError(str(e)) from None
    if tok is None:
        lab = get_tokenizer(cfg)
        if (lab_section or {}).get("tokenizer") == LAB_VOCABULARY and lab is not None:
            return lab
        if required:
            raise RealScaleError(
                f"{str(folder / TOKENIZER_FILE)!r} is missing: a checkpoint folder holds the tokenizer of its "
                f"vocabulary ({cfg.vocab_size:,} ids) there (its config.json does not name the lab's vocabulary: "
                "a folder `dspark-lab checkpoint export` wrote from the lab model does)"
            )
        return None
    if tok.compressed_vocab_size != cfg.engram_compressed_vocab_size:
        raise RealScaleError(
            f"{path}: its Engram compressed vocabulary has {tok.compressed_vocab_size:,} ids, but config.json says "
            f"engram_compressed_vocab_size = {cfg.engram_compressed_vocab_size:,}: allowed the tokenizer the "
            "checkpoint was built with"
        )
    return tok
