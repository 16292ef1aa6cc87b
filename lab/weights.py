"""The shipped trained weights of the `lab` model and how the lab loads them.

`lab/weights/` holds what `dspark-lab train all` writes (nothing is downloaded):
  target.safetensors                     the trained backbone (part "target")
  dspark.safetensors, dspark-rnn.…,      drafts that live in the model (`mtp.*`, part "draft"); DSpark ones carry
  dflash.safetensors                     their STS temperatures in the header
  eagle3.safetensors, mtp1.safetensors   baseline drafters (their own modules)
  report.json                            the training settings and every number measured after training
  manifest.json                          every file above with its sha256 and size: the set belongs together
The files are one set: each drafter's header also records the sha256 of the target it was trained against.
Every load checks both (`verify_file`, `verify_binding`), so a folder with a new target beside old drafters, or a
changed byte, is a clear error instead of a quietly wrong τ. `stamp_set` records a set (train all calls it).
`weights="trained"` (the default of walk / generate / the notebooks / the inspector) loads the target with the
DSpark draft; `weights="untrained"` builds the seeded random init instead (the picture of noise).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dspark_mini import Transformer, build_model, get_config
from dspark_mini.baselines import Eagle3Drafter, MTP1Drafter, load_baseline, read_baseline_header
from dspark_mini.checkpoint import TARGET_KEY, load_model, read_header, stamp_target
from dspark_mini.device import check_device, check_dtype, compute_config
from dspark_mini.drafters import Drafter, DSparkDrafter
from dspark_mini.files import check_out_path, write_atomic
from dspark_mini.jsonlimits import MAX_DATA_BYTES, JSONLimitError, read_json

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
WEIGHTS = ("trained", "untrained")
MODEL_DRAFTERS = ("dspark", "dspark-rnn", "dflash")  # stored as the model's own draft part (`mtp.*`)
BASELINE_DRAFTERS = ("eagle3", "mtp1")  # separate modules
DRAFTERS = MODEL_DRAFTERS + BASELINE_DRAFTERS
# each drafter's name as the pages and screens print it (the lab's Eagle3 is a smaller cousin of the paper's)
DRAFTER_LABEL = {
    "dspark": "DSpark",
    "dspark-rnn": "DSpark-RNN",
    "dflash": "DFlash",
    "eagle3": "Eagle3-lite",
    "mtp1": "MTP-1",
}
MANIFEST = "manifest.json"
CACHE_FILE = "target_cache.safetensors"  # the windows every drafter of a set trained on (lab.training.target_cache)
SET_FILES = ("target.safetensors", CACHE_FILE, *(f"{k}.safetensors" for k in DRAFTERS), "report.json")  # manifest


class WeightSetError(ValueError):
    """The files of a weights folder do not belong together (a changed file, a drafter of another target)."""


def check_weights(weights: str) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"weights = {weights!r} is invalid: allowed {', '.join(map(repr, WEIGHTS))}")
    return weights


def check_drafter(name: str) -> str:
    if name not in DRAFTERS:
        raise ValueError(f"drafter = {name!r} is invalid: allowed {', '.join(map(repr, DRAFTERS))}")
    return name


def weight_file(name: str, weights_dir: str | Path | None = None) -> Path:
    """The path of one shipped file ("target", a drafter name, or "report"); a clear error if it is missing."""
    d = Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR
    path = d / ("report.json" if name == "report" else f"{name}.safetensors")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the trained weights come with the repository (lab/weights/); "
            "`dspark-lab train all` rebuilds them, or use --weights untrained"
        )
    return path


# ---- the set: hashes, manifest, target binding -----------------------------------------------------------
def file_sha256(path: str | Path) -> str:
    """The sha256 of a file (hex), hashed once per process while the file stays the same (same size, mtime, inode)."""
    st = os.stat(path)
    return _sha256(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


# The key holds the file's size, mtime and inode: every writer here writes a new file and renames it over the
# old one (a new inode), so a rewritten file is hashed again; a small cache, so hashing stays once per file.
@functools.lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int, ino: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _short(sha: str | None) -> str:
    return f"{sha[:16]}…" if sha else "none"


def read_manifest(folder: str | Path) -> dict[str, dict[str, Any]] | None:
    """file name → {sha256, bytes} from `folder/manifest.json`; None when the folder has no manifest."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        files = read_json(path, MAX_DATA_BYTES)["files"]
        if not all(isinstance(e["sha256"], str) and isinstance(e["bytes"], int) for e in files.values()):
            raise TypeError("an entry is not {sha256: str, bytes: int}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise WeightSetError(f"{path} is not a readable weights manifest ({e}): allowed what stamp_set writes") from e
    return files


def verify_file(path: str | Path) -> None:
    """A file of a folder that has a manifest must match its entry (size and sha256); without one, nothing to check."""
    path = Path(path)
    files = read_manifest(path.parent)
    if files is None:
        return
    manifest = path.parent / MANIFEST
    entry = files.get(path.name)
    if entry is None:
        raise WeightSetError(f"{path} is not listed in {manifest}: allowed only the files of the recorded set")
    size, sha = path.stat().st_size, file_sha256(path)
    if size != entry["bytes"] or sha != entry["sha256"]:
        raise WeightSetError(
            f"{path} does not match {manifest}: the manifest records sha256 {_short(entry['sha256'])} "
            f"({entry['bytes']} bytes), the file has sha256 {_short(sha)} ({size} bytes). It changed after the set "
            "was written: restore the folder or rebuild it (`dspark-lab train all`); `lab.weights.stamp_set` "
            "re-records a set changed on purpose"
        )


def drafter_header(path: str | Path) -> dict[str, Any]:
    """The header of a drafter file of either kind (a model's draft part, or a baseline module)."""
    name = Path(path).name.removesuffix(".safetensors")
    return read_baseline_header(path) if name in BASELINE_DRAFTERS else read_header(path)


def verify_binding(target: str | Path, drafter: str | Path) -> None:
    """A drafter that records its target's sha256 loads only beside that very target file."""
    want = drafter_header(drafter)[TARGET_KEY]
    if want is None:  # a drafter saved before the binding existed (or by hand): nothing to check
        return
    got = file_sha256(target)
    if got != want:
        raise WeightSetError(
            f"{drafter} was trained against another target: its header records target sha256 {_short(want)}, "
            f"but {target} has sha256 {_short(got)}; the two files are not one set. Retrain the drafter against "
            "this target (`dspark-lab train draft --target …`) or rebuild the folder (`dspark-lab train all`)"
        )


def verified(target: Path, drafter: Path | None = None) -> None:
    """The checks of one load: each file against the manifest, then the drafter against the target."""
    for path in (target, drafter):
        if path is not None:
            verify_file(path)
    if drafter is not None:
        verify_binding(target, drafter)


def verify_set(folder: str | Path) -> None:
    """Every file of a complete set: the manifest entries and each drafter's target."""
    folder = Path(folder)
    for name in SET_FILES:
        verify_file(folder / name)
    for k in DRAFTERS:
        verify_binding(folder / "target.safetensors", folder / f"{k}.safetensors")


def stamp_set(folder: str | Path) -> Path:
    """Record a complete set: the target's sha256 into each drafter's header (tensors untouched), then
    `manifest.json` with every file's sha256 and size. A drafter that already records *another* target is
    refused, never re-stamped: that is exactly the mismatch the binding is there to catch. Returns the manifest."""
    folder = Path(folder)
    missing = [n for n in SET_FILES if not (folder / n).is_file()]
    if missing:
        raise WeightSetError(f"{folder} is not a complete weights set: missing {missing}")
    target = folder / "target.safetensors"
    sha = file_sha256(target)
    for k in DRAFTERS:
        path = folder / f"{k}.safetensors"
        recorded = drafter_header(path)[TARGET_KEY]
        if recorded is None:
            stamp_target(path, sha)
        else:
            verify_binding(target, path)
    return write_manifest(folder, {n: _entry(folder / n) for n in SET_FILES})


def _entry(path: Path) -> dict[str, Any]:
    return {"sha256": file_sha256(path), "bytes": path.stat().st_size}


def write_manifest(folder: Path, files: dict[str, dict[str, Any]]) -> Path:
    """`folder/manifest.json`, written atomically (dspark_mini.files): never half a manifest."""
    text = json.dumps({"format": "dspark-lab-weights", "version": "1", "files": files}, indent=1) + "\n"
    return write_atomic(folder / MANIFEST, text)


def record_file(path: str | Path) -> None:
    """After `train target/draft --force` rewrote one file of a recorded set: update its manifest entry (the
    drafters' target binding still guards the set)."""
    path = Path(path)
    files = read_manifest(path.parent)
    if files is None or path.name not in files:
        return
    write_manifest(path.parent, {**files, path.name: _entry(path)})


# ---- where a training run may write ----------------------------------------------------------------------
def check_out(out: str | Path, folder: bool, force: bool = False) -> Path:
    """Check `--out` before a long run: the right kind of path, a writable place, never the shipped weights
    without `force`. `folder`: `train all` writes a folder, `train target/draft` one .safetensors file.
    `train all` replaces a folder only when it is new or empty or holds nothing but a set's files (its manifest.json
    is the set's record of what the lab wrote, so the shipped lab/weights is replaceable with `force`); any other
    file in it is refused by name, never deleted. A link is followed: the folder it points to is replaced."""
    check_out_path(out, "--out", "folder" if folder else "file", error=ValueError)  # not '', '.', '/', a device, a FIFO
    out = Path(out)
    shown = f"--out = {str(out)!r}"
    if out.exists() and out.is_dir() != folder:
        raise ValueError(
            f"{shown} is a {'file' if folder else 'folder'}: allowed "
            + ("a folder (train all writes a set of files)" if folder else "a .safetensors file path")
        )
    here = out.absolute().parent
    while not here.exists():  # the first ancestor that exists must be a folder we may write in
        here = here.parent
    if not here.is_dir():
        raise ValueError(f"{shown}: {here} is a file, so no folder can be made there: allowed a path under a folder")
    if not os.access(here, os.W_OK | os.X_OK):
        raise ValueError(f"{shown}: {here} is not writable: allowed a folder you can write in")
    if folder and out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in (*SET_FILES, MANIFEST))
        if others:
            raise ValueError(
                f"{shown} holds other files ({', '.join(others[:5])}{', …' if len(others) > 5 else ''}): train all "
                "replaces the whole folder, so allowed a new or empty folder or an existing weights set"
            )
    shipped = WEIGHTS_DIR.resolve()
    resolved = out.resolve()
    if not force and (resolved == shipped or shipped in resolved.parents):
        raise ValueError(
            f"{shown} {'is' if resolved == shipped else 'is inside'} the shipped weights folder {shipped}: writing "
            "there replaces the weights the lab ships; "
            "add --force to do it on purpose (as `make weights` does)"
        )
    return out


# ---- loading -----------------------------------------------------------------------------------------------
def lab_model(
    weights: str = "trained",
    seed: int = 0,
    weights_dir: str | Path | None = None,
    device: str | None = None,
    dtype: str | None = None,
) -> Transformer:
    """The `lab` model in this process: the trained target + DSpark draft (the shipped set, or the set in
    `weights_dir`), or the untrained init of `seed`.

    device: cpu (default), cuda or cuda:N; dtype: the compute dtype the model is built in — float64 (the lab's),
    float32 or bfloat16; mHC, router, sinks and head stay fp32 (`dspark_mini.device`). A checkpoint folder in the
    official layout, a memory check against the device and a rank's shard under torchrun are the real-scale path's
    (`lab.realscale.run_model`), which calls this for the lab's own set."""
    dev = check_device(device, "device")
    check_dtype(dtype, "dtype")
    check_weights(weights)
    if weights == "untrained":
        model = build_model(get_config("lab"), seed=seed)
    else:
        target, draft = weight_file("target", weights_dir), weight_file("dspark", weights_dir)
        verified(target, draft)
        model = load_model(target, draft)
    return in_dtype(model, dtype).to(dev)


def in_dtype(model: Transformer, dtype: str | None) -> Transformer:
    """The same weights in a model built in compute dtype `dtype` (None or the model's own: the model itself); the
    high-precision tensors keep their fp32 (`hp_dtype`), the STS temperatures are carried over."""
    cfg = compute_config(model.cfg, dtype)
    if cfg is model.cfg:
        return model
    out = build_model(cfg, init=False)
    out.load_state_dict(model.state_dict())  # copy_ casts each tensor to the new model's dtype
    if model.mtp is not None and model.mtp.confidence_temperatures is not None:
        out.mtp.set_confidence_temperatures(model.mtp.confidence_temperatures)
    return out


def load_drafter(name: str, weights_dir: str | Path | None = None) -> tuple[Transformer, Drafter]:
    """A trained target with one trained drafter: (model, drafter) ready for `generate_speculative`."""
    check_drafter(name)
    target, path = weight_file("target", weights_dir), weight_file(name, weights_dir)
    verified(target, path)
    if name in MODEL_DRAFTERS:
        model = load_model(target, path)
        return model, DSparkDrafter(name)
    model = load_model(target)
    module = load_baseline(path, model)
    return model, (Eagle3Drafter(module) if name == "eagle3" else MTP1Drafter(module))


def training_streams(seed: int) -> tuple[Any, Any]:
    """(train, val) token streams of the lab model's data: the real-text corpus's training documents, every source
    mixed and shuffled by `seed`, and its `val` documents (`train all`'s data, and the split the perplexity's
    unigram baseline is fitted on: lab/realtext/).  → ([N] int64, [M] int64)"""
    from .realtext import token_stream

    return token_stream("train", seed), token_stream("val")


def drafter_speeds(rep: dict[str, Any]) -> dict[str, float]:
    """Each drafter's tokens/s, speculative ÷ plain decoding, mean over the domains (report.json's `summary`),
    fastest first."""
    means = {d: sum(v.values()) / len(v) for d, v in rep["summary"]["tokens_per_s_ratio"].items()}
    return dict(sorted(means.items(), key=lambda kv: -kv[1]))


def report(weights_dir: str | Path | None = None) -> dict[str, Any]:
    """The numbers recorded when the shipped weights were made (lab/weights/report.json)."""
    path = weight_file("report", weights_dir)
    verify_file(path)
    try:
        return read_json(path, MAX_DATA_BYTES)
    except JSONLimitError as e:
        raise WeightSetError(f"{path} is not a readable report: it {e}") from None
