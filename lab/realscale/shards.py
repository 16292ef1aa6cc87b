"""The files of a sharded safetensors checkpoint, read without touching the tensor data.

  folder/config.json                          the model config (official keys; the lab's own under "dspark_lab")
  folder/model.safetensors.index.json         {"metadata": {"total_size": bytes of all tensors},
                                               "weight_map": {tensor name: shard file}}
  folder/model-00001-of-0000N.safetensors …   the shards

A safetensors file is: 8 bytes (little-endian uint64) = N, then N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the data; offsets
count from the first byte after the JSON. `read_header` reads only the first 8 + N bytes, so a header of the
real 475 GiB checkpoint costs a few hundred KB; N is at most safetensors' own 100,000,000 and the JSON is parsed with
a depth limit (dspark_mini.jsonlimits). `ShardHeader.offsets_problem` applies safetensors' rule for the offsets
(contiguous from 0, covering the data exactly), and `shard_path` keeps every shard inside its folder (a link out of
it is refused, never opened). A "header-only" shard (written by `write_header_only` for tests
and teaching: real shapes, no data) says so in its metadata; readers refuse its data and inspect allows it.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from dspark_mini.config import shown
from dspark_mini.files import write_atomic
from dspark_mini.jsonlimits import JSONLimitError, loads, read_json
from dspark_mini.validate import check_int

from .layout import ST_DTYPES, RealScaleError

INDEX = "model.safetensors.index.json"
CONFIG = "config.json"
HEADER_ONLY = "dspark_lab_header_only"  # metadata key of a shard that declares tensors but holds no data
MAX_HEADER = 100_000_000  # bytes: safetensors' own limit on the JSON header (its MAX_HEADER_SIZE, not 100 MiB)
MAX_INDEX = 100_000_000  # bytes of model.safetensors.index.json: it lists the names the headers hold (flash: 7 MB)


def shard_name(i: int, n: int) -> str:
    """The i-th (0-based) of n shard files, named as the Hugging Face checkpoints are."""
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


@dataclass
class TensorHeader:
    name: str
    dtype: str  # safetensors code: "BF16", "F8_E4M3", …
    shape: tuple[int, ...]
    begin: int  # data offsets, from the start of the data section
    end: int


@dataclass
class ShardHeader:
    path: Path
    tensors: dict[str, TensorHeader]
    metadata: dict[str, str]
    data_size: int  # bytes present after the header (the file may be shorter than the header needs)

    @property
    def header_only(self) -> bool:
        return self.metadata.get(HEADER_ONLY) == "true"

    @property
    def data_end(self) -> int:
        return max((t.end for t in self.tensors.values()), default=0)

    def first_beyond_end(self) -> TensorHeader | None:
        """The first tensor (by offset) whose data runs past the end of the file, if any."""
        short = [t for t in self.tensors.values() if t.end > self.data_size]
        return min(short, key=lambda t: t.begin) if short else None

    def offsets_problem(self) -> str | None:
        """Why safetensors would refuse these offsets, or None. Its rule (`Metadata::validate`): the tensors, sorted
        by offsets, start at 0 and each begins where the one before ends — no overlap, no gap — and the data ends
        exactly at the end of the file (a header-only shard holds no data; a short file is `first_beyond_end`'s)."""
        end, before = 0, None
        for t in sorted(self.tensors.values(), key=lambda t: (t.begin, t.end)):
            if t.begin != end:
                how = (
                    f"overlaps {shown(before.name)} (bytes {before.begin:,}…{before.end:,})"
                    if t.begin < end
                    else f"leaves a gap of {t.begin - end:,} bytes after "
                    + (shown(before.name) if before is not None else "the header")
                )
                return (
                    f"shard {str(self.path)!r}: tensor {shown(t.name)} at data bytes {t.begin:,}…{t.end:,} {how}: "
                    "safetensors needs each tensor to begin where the one before ends"
                )
            end, before = t.end, t
        if not self.header_only and end < self.data_size:
            return (
                f"shard {str(self.path)!r} holds {self.data_size - end:,} bytes after its last tensor's data: "
                "safetensors needs the tensors to cover the data exactly"
            )
        return None


def shard_path(folder: str | os.PathLike, shard: str) -> Path:
    """folder/shard — refused when it resolves outside the (resolved) folder: a shard that is a symbolic link out of
    the checkpoint is never opened (inspect, load and every torchrun rank go through here)."""
    folder = Path(folder)
    path = folder / shard
    try:
        inside = path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as e:  # a loop of links
        raise RealScaleError(f"shard {str(path)!r} cannot be resolved ({type(e).__name__}: a loop of links?)") from None
    if not inside:
        raise RealScaleError(
            f"shard {str(path)!r} is a link that leads outside the checkpoint folder {str(folder)!r}: "
            "allowed only files inside the folder (copy the file in; a Hugging Face cache snapshot links into its "
            "blobs: download with --local-dir)"
        )
    return path


def read_header(path: str | os.PathLike) -> ShardHeader:
    """The JSON header of one safetensors file (8 + N bytes read, never the data); RealScaleError naming the
    file and the tensor if it is missing, truncated or malformed."""
    path = Path(path)
    if not path.is_file():
        raise RealScaleError(f"shard {str(path)!r} is missing")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise RealScaleError(
                f"shard {str(path)!r} is truncated: {size} bytes, shorter than the 8-byte header length"
            )
        (n,) = struct.unpack("<Q", head)  # the number is not shown: in a file that is not safetensors it is noise
        if n > MAX_HEADER:
            raise RealScaleError(
                f"shard {str(path)!r} is not a safetensors file: its 8-byte length prefix asks for a header larger "
                f"than safetensors' limit of {MAX_HEADER:,} bytes"
            )
        if 8 + n > size:
            raise RealScaleError(
                f"shard {str(path)!r} is truncated or not a safetensors file: its 8-byte length prefix gives a header "
                f"that does not fit in the file ({size:,} bytes)"
            )
        raw = f.read(n)
    try:
        obj = loads(raw, MAX_HEADER)
        if not isinstance(obj, dict):
            raise ValueError("is not a JSON object")
    except ValueError as e:
        raise RealScaleError(f"shard {str(path)!r} has an unreadable JSON header: it {e}") from None
    metadata = obj.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise RealScaleError(f"shard {str(path)!r}: its __metadata__ is not an object of strings (safetensors' rule)")
    tensors = {}
    for name, e in obj.items():
        try:
            dtype, shape, (begin, end) = e["dtype"], tuple(e["shape"]), e["data_offsets"]
            if not all(type(d) is int and d >= 0 for d in shape):
                raise ValueError("its shape is not a list of integers ≥ 0")
            if dtype not in ST_DTYPES:
                raise ValueError(f"unknown dtype {shown(dtype)}: allowed {sorted(ST_DTYPES)}")
            want = math.prod(shape) * ST_DTYPES[dtype].itemsize
            if not (type(begin) is int and type(end) is int and 0 <= begin and end - begin == want):
                raise ValueError(
                    f"data_offsets {shown([begin, end])} do not hold {want:,} bytes of {dtype} {shown(list(shape))}"
                )
        except (KeyError, TypeError, ValueError) as err:
            raise RealScaleError(
                f"shard {str(path)!r}: tensor {shown(name)} has a malformed header entry ({err})"
            ) from None
        tensors[name] = TensorHeader(name, dtype, shape, begin, end)
    return ShardHeader(path, tensors, dict(metadata), size - 8 - n)


def read_index(folder: str | os.PathLike) -> tuple[dict[str, str], dict]:
    """(weight_map, metadata) of `folder/model.safetensors.index.json`."""
    path = Path(folder) / INDEX
    if not Path(folder).is_dir():
        raise RealScaleError(f"checkpoint folder {str(folder)!r} does not exist")
    if not path.is_file():
        raise RealScaleError(f"{str(path)!r} is missing: a sharded checkpoint folder needs its index ({INDEX})")
    try:
        obj = read_json(path, MAX_INDEX)
        wm, md = obj["weight_map"], obj.get("metadata", {})
        if not isinstance(wm, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in wm.items()):
            raise TypeError("weight_map must map tensor names to shard file names")
        if not isinstance(md, dict):
            raise TypeError("metadata must be an object")
    except JSONLimitError as e:
        raise RealScaleError(f"{str(path)!r} is not a readable index: it {e}") from None
    except (KeyError, TypeError, AttributeError) as e:
        raise RealScaleError(
            f"{str(path)!r} is not a readable index ({e!r}): allowed {{metadata, weight_map}}"
        ) from None
    for shard in set(wm.values()):
        if Path(shard).name != shard:
            raise RealScaleError(
                f"{str(path)!r} maps tensors to {shown(shard)}: allowed plain file names in the folder"
            )
    return wm, md


def write_index(folder: Path, weight_map: dict[str, str], total_size: int) -> Path:
    text = json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map}, indent=2)
    return write_atomic(folder / INDEX, text + "\n")


def write_json(path: Path, obj: dict) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")


def write_header_only_shard(path: Path, entries: list[tuple[str, str, tuple[int, ...]]]) -> int:
    """A safetensors file that declares (name, dtype code, shape) tensors at their real offsets but holds no
    data (marked in its metadata). Returns the bytes its tensors would take."""
    header: dict = {"__metadata__": {"format": "pt", HEADER_ONLY: "true"}}
    offset = 0
    for name, code, shape in entries:
        n = math.prod(shape) * ST_DTYPES[code].itemsize
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
    write_atomic(path, struct.pack("<Q", len(raw)) + raw)
    return offset


def assign_shards(sizes: list[int], n: int) -> list[int]:
    """Shard index of each tensor (in order): about total/n bytes per shard, every shard non-empty."""
    check_int(n, "shards", 1, len(sizes), "the number of tensors", bare=True, error=RealScaleError)
    total, cum, shard, out = sum(sizes), 0, 0, []
    for i, b in enumerate(sizes):
        later = n - 1 - shard  # shards still empty after the current one
        if i and later and (cum >= total * (shard + 1) / n or len(sizes) - i <= later):
            shard += 1
        out.append(shard)
        cum += b
    return out
