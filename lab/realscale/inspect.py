"""Inspect a checkpoint folder from its headers alone: what it holds, by group, and what does not fit its config.

`inspect_checkpoint(dir)` reads config.json, the index and the 8-byte length + JSON header of every shard —
never the data — and reports the tensor count, the bytes by group (routed experts, Engram, DSpark, attention,
shared experts, embed, head, other), the missing / unexpected tensors and the dtype / shape mismatches against
the layout of the folder's config, with everything wrong collected in `problems` (a list of sentences naming
the file and the tensor) — also what safetensors itself refuses on load (overlapping, out-of-file or
non-contiguous offsets, a header above 100,000,000 bytes) and a shard linked from outside the folder, so "no
problems" means the folder loads. `write_header_only(cfg, dir)` writes such a folder at any size with no data (the
real `flash` checkpoint's 95,776 text tensors take ~10 MB of headers), so the report can be tried on real shapes.
"""

from __future__ import annotations

import os
from pathlib import Path

from dspark_mini.config import ModelConfig
from dspark_mini.files import folder_swap

from .export import CHECKPOINT_KINDS, config_json, read_config
from .layout import (
    GROUPS,
    LAB_KEY,
    RealScaleError,
    by_name,
    dtype_code,
    group_of,
    layout,
)
from .shards import (
    CONFIG,
    INDEX,
    assign_shards,
    read_header,
    read_index,
    shard_name,
    shard_path,
    write_header_only_shard,
    write_index,
    write_json,
)

LIST_CAP = 100  # longest list of names kept in a report (the counts are always complete)
GIB = 2**30


def _listing(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


def inspect_checkpoint(folder: str | os.PathLike) -> dict:
    """The header-only report of a checkpoint folder (a JSON-safe dict; `format_report` prints it).

    Raises RealScaleError only when there is nothing to inspect (no folder, no readable index); everything else
    wrong — a missing or truncated shard, a bad header, a tensor that does not fit the config — is a problem."""
    folder = Path(folder)
    weight_map, index_md = read_index(folder)
    problems: list[str] = []
    try:
        cfg, style, _ = read_config(folder)
    except RealScaleError as e:
        cfg, style = None, None
        problems.append(f"{e} — the tensors are not compared with a config")

    seen: dict[str, tuple[str, str, tuple[int, ...], int]] = {}  # name → (shard, dtype code, shape, bytes)
    header_only = []
    listed_in: dict[str, list[str]] = {}  # shard → the names the index maps to it
    for name, shard in weight_map.items():
        listed_in.setdefault(shard, []).append(name)
    shards = sorted(listed_in)
    for shard in shards:
        listed = listed_in[shard]
        try:
            path = shard_path(folder, shard)  # a link out of the folder is a problem, never opened
        except RealScaleError as e:
            problems.append(str(e))
            continue
        if not path.is_file():
            problems.append(
                f"shard {shard!r} is missing: the index maps {len(listed)} tensor(s) to it ({_listing(listed, 3)})"
            )
            continue
        try:
            h = read_header(path)
        except RealScaleError as e:
            problems.append(str(e))
            continue
        if h.header_only:
            header_only.append(shard)
        else:
            short = h.first_beyond_end()
            if short is not None:
                problems.append(
                    f"shard {shard!r} is truncated: tensor {short.name!r} needs data bytes "
                    f"{short.begin:,}…{short.end:,}, the file holds {h.data_size:,}"
                )
        offsets = h.offsets_problem()  # what safetensors refuses on load: "no problems" means the shard opens
        if offsets is not None:
            problems.append(offsets)
        for name, t in h.tensors.items():
            if name in seen:
                problems.append(f"tensor {name!r} is in both {seen[name][0]!r} and {shard!r}")
            elif weight_map.get(name) != shard:
                problems.append(f"tensor {name!r} is in {shard!r} but the index maps it to {weight_map.get(name)!r}")
            seen[name] = (shard, t.dtype, t.shape, t.end - t.begin)
        absent = [n for n in listed if n not in h.tensors]
        if absent:
            problems.append(f"shard {shard!r} lacks {len(absent)} tensor(s) the index maps to it: {_listing(absent)}")

    total = sum(v[3] for v in seen.values())
    if index_md.get("total_size") != total:
        size = index_md.get("total_size")
        problems.append(f"{INDEX}: metadata total_size = {size!r}, the headers hold {total:,} bytes")

    groups = {g: {"tensors": 0, "bytes": 0} for g in GROUPS}
    for name, (_, _, _, n) in seen.items():
        g = groups[group_of(name)]
        g["tensors"] += 1
        g["bytes"] += n
    for g in groups.values():
        g["gib"] = round(g["bytes"] / GIB, 2)

    missing, unexpected, mismatched = [], [], []
    if cfg is not None:
        expected = by_name(layout(cfg, style))
        missing = [n for n in expected if n not in seen]
        unexpected = [n for n in seen if n not in expected]
        for name, (shard, code, shape, _) in seen.items():
            want = expected.get(name)
            if want is not None and (code != dtype_code(want.dtype) or shape != want.shape):
                mismatched.append({
                    "name": name, "file": shard, "dtype": code, "shape": list(shape),
                    "expected_dtype": dtype_code(want.dtype), "expected_shape": list(want.shape),
                })  # fmt: skip
        if missing:
            problems.append(f"{len(missing)} tensor(s) of the config are missing: {_listing(missing)}")
        if unexpected:
            problems.append(f"{len(unexpected)} tensor(s) are not in the config's layout: {_listing(unexpected)}")
        for m in mismatched[:20]:
            problems.append(
                f"tensor {m['name']!r} in {m['file']!r} is {m['dtype']} {m['shape']}: "
                f"allowed {m['expected_dtype']} {m['expected_shape']}"
            )
        if len(mismatched) > 20:
            problems.append(f"… {len(mismatched) - 20} more dtype/shape mismatches")

    return {
        "folder": str(folder),
        "config": cfg.name if cfg is not None else None,
        "style": style,
        "n_tensors": len(seen),
        "n_shards": len(shards),
        "header_only_shards": len(header_only),
        "total_bytes": total,
        "total_gib": round(total / GIB, 2),
        "groups": groups,
        "n_missing": len(missing),
        "n_unexpected": len(unexpected),
        "n_mismatched": len(mismatched),
        "missing": missing[:LIST_CAP],
        "unexpected": unexpected[:LIST_CAP],
        "mismatched": mismatched[:LIST_CAP],
        "problems": problems,
    }


def format_report(report: dict) -> str:
    """The report as a few lines of text (what `dspark-lab inspect --checkpoint DIR` prints)."""
    r = report
    lines = [
        f"checkpoint {r['folder']}  (config {r['config']}, style {r['style']})",
        f"  {r['n_tensors']:,} tensors in {r['n_shards']} shard(s), "
        f"{r['total_bytes']:,} bytes = {r['total_gib']:.2f} GiB"
        + (f"  [{r['header_only_shards']} header-only shard(s): shapes, no data]" if r["header_only_shards"] else ""),
        f"  {'group':<16}{'tensors':>10}{'GiB':>12}{'bytes':>20}",
    ]
    for g, v in r["groups"].items():
        lines.append(f"  {g:<16}{v['tensors']:>10,}{v['gib']:>12.2f}{v['bytes']:>20,}")
    lines.append(f"  problems: {len(r['problems'])}" + ("" if r["problems"] else " (the folder fits its config)"))
    lines += [f"    - {p}" for p in r["problems"]]
    return "\n".join(lines)


def write_header_only(
    cfg: ModelConfig,
    folder: str | os.PathLike,
    shards: int = 48,
    style: str = "official",
    overwrite: bool = False,
) -> Path:
    """A checkpoint folder for `cfg` whose shards declare every tensor at its real dtype, shape and offset but
    hold no data: config.json (official keys only when style is "official", like the real one), the index and
    the header-only shards. Nothing is allocated, so `flash` takes a second. Built beside `folder` and swapped in
    whole, like an export; `overwrite` replaces only a folder the lab wrote (its .dspark-lab-files.json lists
    every file in it), never another config.json."""
    folder = Path(folder)
    entries = layout(cfg, style)
    which = assign_shards([s.nbytes for s in entries], shards)
    config = config_json(cfg, style)
    if style == "official":
        del config[LAB_KEY]  # the real checkpoint's config.json has only the official keys
    with folder_swap(folder, "headers", overwrite, CHECKPOINT_KINDS, error=RealScaleError) as work:
        weight_map, total = {}, 0
        for k in range(shards):
            file = shard_name(k, shards)
            part = [s for s, w in zip(entries, which, strict=True) if w == k]
            total += write_header_only_shard(work / file, [(s.name, dtype_code(s.dtype), s.shape) for s in part])
            weight_map.update(dict.fromkeys((s.name for s in part), file))
        write_json(work / CONFIG, config)
        write_index(work, weight_map, total)
    return folder
