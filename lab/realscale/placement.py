"""Where a model runs — its device and compute dtype — and whether this rank's share fits there, decided before
any weight is allocated.

  (the device and dtype options and `compute_config` are dspark_mini/device.py's, used by every loader)
  read_stored(folder)                                checkpoint name → (dtype, shape), from the shard headers only
  estimate_rank(cfg, par, stored, packed, dtype)     RankEstimate: the bytes rank `par.rank` reads and holds
  estimate_ranks(cfg, pars, …)                       the same for several ranks (the layout computed once)
  prepared_bytes(cfg, dtype)                         the kernel layouts the first forward builds, from a `meta` build
  room(device, free=None)                            Room: the bytes free and which limit says so — cuda:
                                                     torch.cuda.mem_get_info; cpu: the smallest of `memory_rooms`
  memory_rooms()                                     every limit of this process on the host: MemAvailable
                                                     (/proc/meminfo), RLIMIT_AS minus the address space it maps
                                                     already, the cgroup's memory.max (v2) or memory.limit_in_bytes
                                                     (v1) minus its usage (reclaimable file cache not counted as used)
  free_bytes(device)                                 room(device).bytes (None: nothing is known)
  check_fits(estimate, device, free=None)            PlacementError (a ValueError) when it does not fit: the
                                                     estimate, what is free and which limit, and what to change

What a rank holds follows the sharding rules of `ranks.rank_slice` (its experts, its tensor-parallel rows or
columns, its vocab and Engram rows; everything else in full). Each checkpoint tensor counts for that share:
  stored   the bytes of the share as the checkpoint stores it (what the rank reads: FP8 / FP4 codes + E8M0 scales,
           BF16 / FP32 for the rest) — 61.51 GiB for rank 0 of the real checkpoint on 8 ranks (notebook 09 §4);
  held     what the lab model holds after loading: packed formats as stored when `packed` (the codes and scales are
           kept), dequantized to the compute dtype otherwise; every other tensor in the dtype the model keeps it
           (the compute dtype, or fp32 for the `hp_dtype` tensors — the head stored as BF16 is held in fp32).
prepared  (one process, unpacked, when asked: `prepared=True`) the forms the first inference forward builds and keeps
           beside the weights (`quant.Prepared`: the routed experts stacked and MXFP4-QDQ'd, the attention's stacked
           and transposed projections, the FP8-QDQ'd Engram table…) — at real widths about as much again as the
           weights, so a run that counts only the weights would be refused too late.
needed = held + prepared + margin, the margin being MARGIN_FRACTION of held plus MARGIN_FLOOR bytes: the KV cache
and the activations of a short run, one dequantized weight at a time (packed), the allocator's and CUDA context's slack.
It is an estimate for refusing early, not a promise: a long context needs its KV cache on top (notebook 03).
"""

from __future__ import annotations

import math
import os
import re
import resource
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dspark_mini.config import ModelConfig
from dspark_mini.device import PlacementError, compute_config

from ..text import lang_table
from .layout import ST_DTYPES, RealScaleError, by_name, group_of, lab_tensors, layout
from .ranks import rank_slice

MARGIN_FRACTION = 0.10  # of the held bytes: KV cache + activations of a short run, one dequantized weight at a time
MARGIN_FLOOR = 512 * 2**20  # bytes: CUDA context / allocator slack, a small model's buffers
GIB = 2**30
MEMINFO = Path("/proc/meminfo")
PROC_STATUS = Path("/proc/self/status")  # VmSize: the address space this process maps now (what RLIMIT_AS counts)
PROC_CGROUP = Path("/proc/self/cgroup")  # the cgroup of this process, per hierarchy
CGROUP_ROOT = Path("/sys/fs/cgroup")  # v2 at the root (or in unified/), v1's memory controller in memory/
UNLIMITED = 2**60  # a cgroup v1 limit at or above this is "no limit" (the kernel writes 2**63 − a page)


def size(nbytes: float) -> str:
    """Bytes for a reader: GiB from 1 GiB up, MiB below."""
    return f"{nbytes / GIB:,.2f} GiB" if nbytes >= GIB else f"{nbytes / 2**20:,.2f} MiB"


# ---- the estimate -------------------------------------------------------------------------------------------------
@dataclass
class RankEstimate:
    """The bytes one rank reads and holds (see the module docstring); by group as `inspect` groups the checkpoint."""

    rank: int
    ranks: int
    tp: int
    packed: bool
    dtype: str  # compute dtype
    stored: dict[str, int] = field(default_factory=dict)  # group → bytes of this rank's share, as stored
    held: dict[str, int] = field(default_factory=dict)  # group → bytes the model holds
    prepared: int = 0  # bytes of the prepared forms the first forward builds (0: not counted)

    @property
    def stored_bytes(self) -> int:
        return sum(self.stored.values())

    @property
    def held_bytes(self) -> int:
        return sum(self.held.values())

    @property
    def margin_bytes(self) -> int:
        return int(MARGIN_FRACTION * self.held_bytes) + MARGIN_FLOOR

    @property
    def needed_bytes(self) -> int:
        return self.held_bytes + self.prepared + self.margin_bytes

    def describe(self) -> str:
        how = "packed as stored" if self.packed else f"unpacked to {self.dtype}"
        return (
            f"rank {self.rank} of {self.ranks} (tp {self.tp}) holds {size(self.held_bytes)} of weights "
            f"({how}; {size(self.stored_bytes)} read from the checkpoint)"
            + (f" + {size(self.prepared)} of prepared kernel layouts" if self.prepared else "")
            + " + a margin of "
            f"{size(self.margin_bytes)} (KV cache, activations: {MARGIN_FRACTION:.0%} + "
            f"{size(MARGIN_FLOOR)}) = {size(self.needed_bytes)}"
        )

    def to_json(self) -> dict:
        return {
            "rank": self.rank,
            "ranks": self.ranks,
            "tp": self.tp,
            "packed": self.packed,
            "dtype": self.dtype,
            "stored_bytes": self.stored_bytes,
            "held_bytes": self.held_bytes,
            "prepared_bytes": self.prepared,
            "margin_bytes": self.margin_bytes,
            "needed_bytes": self.needed_bytes,
            "stored_by_group": dict(self.stored),
            "held_by_group": dict(self.held),
        }


def read_stored(folder: str | os.PathLike) -> dict[str, tuple[str, tuple[int, ...]]]:
    """checkpoint name → (safetensors dtype code, shape) of every tensor the index lists, from the shard headers
    alone (header-only shards included: nothing is read past the headers)."""
    from .shards import read_header, read_index, shard_path

    weight_map, _ = read_index(folder)
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for shard in sorted(set(weight_map.values())):
        for name, t in read_header(shard_path(folder, shard)).tensors.items():
            if weight_map.get(name) == shard:
                out[name] = (t.dtype, tuple(t.shape))
    missing = [n for n in weight_map if n not in out]
    if missing:
        raise RealScaleError(f"the index lists {len(missing)} tensor(s) no shard header declares, e.g. {missing[0]!r}")
    return out


def estimate_rank(
    cfg: ModelConfig,
    par,
    stored: dict[str, tuple[str, tuple[int, ...]]] | None = None,
    packed: bool = True,
    dtype: str | None = None,
    style: str = "official",
    prepared: bool = False,
) -> RankEstimate:
    """The bytes rank `par` (a distributed.Parallel) reads and holds of a checkpoint of `cfg` in `style`.

    stored: the checkpoint's tensors from its headers (`read_stored`); None: the layout of `cfg` in `style` (what
    `export_checkpoint` writes; a loader checks every tensor it reads against its header). dtype: the compute dtype
    (default the config's). prepared: count the prepared forms too (one whole unpacked model: `prepared_bytes`).
    Nothing is allocated."""
    est = estimate_ranks(cfg, [par], stored, packed, dtype, style)[0]
    if prepared:
        if packed or par.size != 1:
            raise ValueError("prepared=True counts one whole unpacked model: allowed with packed=False on one rank")
        est.prepared = prepared_bytes(cfg, dtype)
    return est


def prepared_bytes(cfg: ModelConfig, dtype: str | None = None) -> int:
    """Bytes of every prepared form (`quant.Prepared`) a model of `cfg` in compute dtype `dtype` builds at its first
    inference forward: each one built on a `meta` model (shapes and dtypes only, nothing allocated), counting every
    tensor it makes and none it only refers to (a parameter itself, or a view of one)."""
    from dspark_mini import build_model
    from dspark_mini.quant import Prepared

    model = build_model(compute_config(cfg, dtype), device="meta")
    params = {id(p) for p in model.parameters()}
    total = 0
    with torch.no_grad():
        for m in model.modules():
            for v in vars(m).values():
                if isinstance(v, Prepared):
                    total += sum(t.numel() * t.element_size() for t in tensors_of(v.build()) if own(t, params))
    return total


def tensors_of(value) -> list[torch.Tensor]:
    """The tensors in a prepared value (a tensor, or tuples / lists / dicts of them and of other things)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    return []


def own(t: torch.Tensor, params: set[int]) -> bool:
    """Whether `t` is storage of its own (not a parameter, not a view of one)."""
    return id(t) not in params and (t._base is None or id(t._base) not in params)


def estimate_ranks(
    cfg: ModelConfig,
    pars: list,
    stored: dict[str, tuple[str, tuple[int, ...]]] | None = None,
    packed: bool = True,
    dtype: str | None = None,
    style: str = "official",
) -> list[RankEstimate]:
    """`estimate_rank` for several ranks at once (the layout of the real model is computed once, not per rank)."""

    ccfg = compute_config(cfg, dtype)
    entries = by_name(layout(cfg, style))
    held_dtype = {lab: dt for lab, (_, dt) in lab_tensors(ccfg).items()}
    logical = lab_tensors(cfg)
    names = stored if stored is not None else {n: (None, s.shape) for n, s in entries.items()}
    rows = []  # (group, its Stored, stored bytes, full logical shape)
    for name, (code, shape) in names.items():
        s = entries.get(name)
        if s is None:
            raise RealScaleError(f"tensor {name!r} is not in the layout of {cfg.name} ({style}): cannot place it")
        itemsize = ST_DTYPES[code].itemsize if code is not None else s.dtype.itemsize
        rows.append((group_of(name), s, math.prod(shape) * itemsize, logical[s.lab][0]))
    out = []
    for par in pars:
        est = RankEstimate(par.rank, par.size, par.tp, packed, ccfg.dtype)
        for group, s, nbytes, full in rows:
            cut = rank_slice(cfg, par, s.lab, full)
            frac = 1.0 if cut is None else (cut[2] - cut[1]) / full[cut[0]]
            if s.fmt != "float" and packed:
                held = nbytes * frac  # codes and scales, as stored
            elif s.role == "scale":
                held = 0  # unpacked: the scales are folded into the values
            else:
                held = math.prod(full) * frac * held_dtype[s.lab].itemsize
            est.stored[group] = est.stored.get(group, 0) + round(nbytes * frac)
            est.held[group] = est.held.get(group, 0) + round(held)
        out.append(est)
    return out


# ---- the device ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Room:
    """Bytes a new allocation may take before `limit` refuses it."""

    bytes: int
    limit: str  # one of LIMITS


LIMITS = lang_table("messages", "memory_limits")  # limit → {"vi": …, "en": …}: how an error names it


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _stat_value(path: Path, key: str) -> int:
    """A field of a cgroup's memory.stat (0 when absent)."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_dirs(mount: Path, path: str) -> list[Path]:
    """The folders of this process's cgroup and of each parent up to `mount`, as seen under `mount` (with a cgroup
    namespace, or a container that mounts only its own subtree, the path in /proc/self/cgroup is relative to an
    ancestor: its leading parts are dropped until a folder exists)."""
    parts = [p for p in path.split("/") if p]
    for skip in range(len(parts) + 1):
        leaf = mount.joinpath(*parts[skip:])
        if leaf.is_dir():
            dirs = [leaf]
            while dirs[-1] != mount:
                dirs.append(dirs[-1].parent)
            return dirs
    return []


def cgroup_rooms(root: Path, proc_cgroup: Path) -> list[Room]:
    """Limit minus usage of every cgroup level that limits memory: v2 memory.max − (memory.current − inactive_file),
    v1 memory.limit_in_bytes − (memory.usage_in_bytes − total_inactive_file)."""
    try:
        lines = proc_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return []
    rooms = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: the unified hierarchy
            for mount in (root, root / "unified"):
                for d in _cgroup_dirs(mount, path):
                    limit = _read_int(d / "memory.max")
                    if limit is not None:
                        used = (_read_int(d / "memory.current") or 0) - _stat_value(d / "memory.stat", "inactive_file")
                        rooms.append(Room(max(0, limit - max(0, used)), "memory.max"))
        elif "memory" in controllers.split(","):  # v1: the memory controller's hierarchy
            for d in _cgroup_dirs(root / "memory", path)[:1]:  # hierarchical_memory_limit covers the parents
                limit = _read_int(d / "memory.limit_in_bytes")
                limit = min(
                    limit or UNLIMITED, _stat_value(d / "memory.stat", "hierarchical_memory_limit") or UNLIMITED
                )
                if limit < UNLIMITED:
                    used = (_read_int(d / "memory.usage_in_bytes") or 0) - _stat_value(
                        d / "memory.stat", "total_inactive_file"
                    )
                    rooms.append(Room(max(0, limit - max(0, used)), "memory.limit_in_bytes"))
    return rooms


def memory_rooms(
    meminfo: Path | None = None,
    cgroup_root: Path | None = None,
    proc_cgroup: Path | None = None,
    status: Path | None = None,
    rlimit_as: int | None = None,
) -> list[Room]:
    """Every limit on this process's memory that the host states (see the module docstring); the arguments replace
    the files and the RLIMIT_AS soft limit read (tests)."""
    rooms = []
    try:
        for line in (meminfo or MEMINFO).read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                rooms.append(Room(int(line.split()[1]) * 1024, "MemAvailable"))  # kB
    except (OSError, ValueError, IndexError):
        pass
    soft = resource.getrlimit(resource.RLIMIT_AS)[0] if rlimit_as is None else rlimit_as
    if soft != resource.RLIM_INFINITY and soft >= 0:
        try:
            found = re.search(r"^VmSize:\s+(\d+) kB", (status or PROC_STATUS).read_text(encoding="ascii"), re.M)
            mapped = int(found.group(1)) * 1024 if found else 0
        except (OSError, ValueError):
            mapped = 0
        rooms.append(Room(max(0, soft - mapped), "RLIMIT_AS"))
    return rooms + cgroup_rooms(cgroup_root or CGROUP_ROOT, proc_cgroup or PROC_CGROUP)


def room(device: str | torch.device, free: int | None = None) -> Room | None:
    """What `device` has free, and which limit says so: `free` when given (tests); cuda → torch.cuda.mem_get_info;
    cpu → the smallest of `memory_rooms()`; None when nothing is known."""
    if free is not None:
        return Room(free, "given")
    dev = torch.device(device)
    if dev.type == "cuda":
        return Room(int(torch.cuda.mem_get_info(dev)[0]), "cuda")
    rooms = memory_rooms()
    return min(rooms, key=lambda r: r.bytes) if rooms else None


def free_bytes(device: str | torch.device) -> int | None:
    """Bytes free on `device` (`room`), None when this system does not say."""
    r = room(device)
    return None if r is None else r.bytes


def check_fits(est: RankEstimate, device: str | torch.device = "cpu", free: int | None = None) -> RankEstimate:
    """Refuse (PlacementError) a share whose estimate exceeds what `device` has free. free: the free bytes to
    compare with (tests inject it; default measured by `room`; unknown → nothing is refused)."""
    r = room(device, free)
    if r is None or est.needed_bytes <= r.bytes:
        return est
    free = r.bytes
    fixes = [f"more ranks (torchrun --nproc-per-node > {est.ranks}: the experts, Engram and vocab rows split further)"]
    if not est.packed:
        fixes.append("keep the weights packed (--packed / packed=True: FP8/FP4 codes as the checkpoint stores them)")
    if est.dtype == "float64" or (est.dtype == "float32" and not est.packed):
        fixes.append("a smaller --dtype (bfloat16)")
    raise PlacementError(
        f"does not fit: {est.describe()}, but {torch.device(device)} has {size(free)} free "
        f"({LIMITS[r.limit]['en']}). "
        f"Allowed: at most {size(free)} — use " + ", or ".join(fixes) + "; refused before allocating"
    )
