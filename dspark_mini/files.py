"""Writing files so that nothing is lost: one file atomically, a set of files as one folder swapped in whole.

Every file the lab writes goes through here (the model's checkpoints too, so this lives in dspark_mini):
  write_atomic(path, data)     bytes, or a str written as UTF-8 (newlines as given) → path
  atomic_path(path)            the same for a writer that needs a path (safetensors' save_file): yields a temporary
                               path beside `path`, which becomes `path` when the block ends
  folder_swap(out, what)       a set of files: yields a fresh sibling folder `<out>.partial-<pid>` to write them
                               into; when the block ends the owner manifest is added, every file is fsynced and the
                               folder is swapped in for `out` (`swap_in`: the old folder renamed aside to
                               `<out>.old-<pid>`, the new one renamed in, the old one deleted; if the second
                               rename fails the old folder is put back)
One file is written as `.NAME.PID.RANDOM.tmp` in its own folder (the same filesystem, so the rename is atomic),
fsynced, given the mode of the file it replaces (a new one: what the umask gives), renamed over the target, and
the folder is fsynced. Interrupted (Ctrl-C, any exception) or out of disk, the temporary file or folder is removed
and the previous file or folder is byte for byte what it was; an OSError becomes one `WriteError` (an OSError)
whose message names the path and says that. Killed outright (SIGKILL, power loss), a `.….tmp` file or a
`<out>.partial-<pid>` folder may be left beside the previous file or folder, which is still intact.

Folders the lab owns: a folder written by `folder_swap` carries `.dspark-lab-files.json`,
{"written_by": "dspark-lab", "what": "export" | "headers" | "site" | "corpus" | …, "files": [what it wrote]}.
`check_folder` lets the swap replace only a new or empty folder, or — when the caller allows it (`--force`) — one
with that manifest of an allowed kind whose every file the manifest lists. A file the manifest does not list (one
the user added) is never deleted: the replace is refused naming it. Any other non-empty folder (a Hugging Face
checkpoint, a folder of notes) is refused with one line. A path that is a symbolic link is followed on purpose:
the folder or file it points to is replaced and the link stays a link (`symlink_target` lets a command say so).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

OWNER = ".dspark-lab-files.json"  # the manifest of a folder the lab wrote as a whole
WRITTEN_BY = "dspark-lab"
MAX_OWNER_BYTES = 1 << 20  # an owner manifest lists a few dozen names; a bigger one is not the lab's


class WriteError(OSError):
    """A file or folder could not be written (a full disk, no permission, a read-only filesystem): the message
    names the path and says that what was there before is unchanged. `path` and `reason` are kept for callers."""


class FolderError(ValueError):
    """A folder the lab would replace is not one it may replace (not its own, or holding a file it did not write)."""


def write_error(
    path: str | os.PathLike, e: BaseException, existed: bool, kind: str = "file", inner: str = ""
) -> WriteError:
    """The one error of a failed write of `path` (`inner`: the file of a folder being written when it failed)."""
    reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e) or type(e).__name__
    before = f"the previous {kind} is unchanged" if existed else "nothing was written"
    where = f", writing {inner}" if inner else ""
    err = WriteError(f"{str(path)!r} could not be written ({reason}{where}): {before}")
    err.path, err.reason = str(path), reason
    return err


def _real(path: str | os.PathLike) -> Path:
    """The path with every symbolic link followed (what a write through it reaches)."""
    return Path(os.path.realpath(path))


def symlink_target(path: str | os.PathLike) -> Path | None:
    """What a symbolic link `path` points to (every link followed); None when `path` is not a link."""
    return _real(path) if Path(path).is_symlink() else None


# ---- one file ----------------------------------------------------------------------------------------------------
def _fsync(path: Path, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(path: Path) -> None:
    """Make a rename inside `path` durable. Best effort: the rename has happened already, nothing is left to undo,
    and a filesystem that cannot fsync a folder (EINVAL) is still written correctly."""
    try:
        _fsync(path, folder=True)
    except OSError:
        pass


def _remove(path: Path) -> None:
    """Remove a temporary file or folder; a failure here never hides the error that made it a leftover."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def _new_temp(tmp: Path, target: Path) -> int:
    """Create the empty temporary file (never an existing one) → the mode the written file gets: the mode of the
    file it replaces, or what the umask gives a new file (read from the temporary file, not by changing the umask)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        mode = os.fstat(fd).st_mode & 0o777
    finally:
        os.close(fd)
    return target.stat().st_mode & 0o7777 if target.is_file() else mode


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` (a link followed) for a writer that needs a file name; when the block
    ends it is fsynced and renamed over `path`. Any exception: the temporary file goes, `path` is unchanged; an
    OSError (also the one making a missing parent folder) is raised as one `WriteError` naming `path`."""
    target = _real(path)
    existed = target.exists()
    tmp = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = _new_temp(tmp, target)
        yield tmp
        os.chmod(tmp, mode)  # safetensors writes owner-only files; the file keeps the mode it had
        _fsync(tmp)
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise write_error(path, e, existed) from e
    except BaseException:
        _remove(tmp)
        raise
    _fsync_folder(target.parent)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to `path` atomically (see `atomic_path`): a str as UTF-8, its newlines as given. → path"""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(raw)
    return Path(path)


# ---- folders the lab owns ----------------------------------------------------------------------------------------
def read_owner(folder: str | os.PathLike) -> dict | None:
    """The owner manifest of `folder` ({"written_by", "what", "files"}); None when it has none, or one the lab did
    not write (unreadable, too big, too deep, another shape)."""
    path = Path(folder) / OWNER
    try:
        if not path.is_file() or path.stat().st_size > MAX_OWNER_BYTES:
            return None
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(d, dict) and d.get("written_by") == WRITTEN_BY and isinstance(d.get("what"), str)
    if not ok or not isinstance(d.get("files"), list) or not all(isinstance(f, str) for f in d["files"]):
        return None
    return d


def owner_manifest(what: str, files: Sequence[str]) -> str:
    return json.dumps({"written_by": WRITTEN_BY, "what": what, "files": sorted(files)}, indent=1) + "\n"


def _listed(names: Sequence[str], n: int = 3) -> str:
    return ", ".join(map(repr, names[:n])) + (f" and {len(names) - n} more" if len(names) > n else "")


def check_target(out: str | os.PathLike, option: str = "--out", error: type[Exception] = FolderError) -> Path:
    """The real folder a swap at `out` replaces (a link followed) → its path. Refused with `error`, one line naming
    `option`: a file; the root or a mount point (the new folder is built beside it and renamed in, which cannot
    cross filesystems); the current folder or one holding it."""
    shown = f"{option} = {str(out)!r}"
    target = _real(out)
    if target.exists() and not target.is_dir():
        raise error(f"{shown} is a file: allowed a folder")
    if target.parent == target or os.path.ismount(target):
        raise error(
            f"{shown} is a mount point: the lab builds the new folder beside it and renames it in, which cannot "
            "cross filesystems; allowed a folder inside it"
        )
    here = _real(os.curdir)
    if target == here or target in here.parents:
        raise error(f"{shown} is the current folder or holds it: allowed a folder beside or below it")
    return target


def check_folder(
    out: str | os.PathLike,
    what: str,
    overwrite: bool = False,
    replaces: Sequence[str] = (),
    option: str = "--out",
    error: type[Exception] = FolderError,
) -> Path:
    """May `folder_swap` put a folder of kind `what` at `out`? → the real folder (`check_target`). Allowed: a new or
    empty folder; with `overwrite`, a folder whose owner manifest is of a kind in `replaces` (default: `what`) and
    lists every file in it. Refused with `error`, one line naming `option`, the path and what is allowed."""
    shown = f"{option} = {str(out)!r}"
    target = check_target(out, option, error)
    names = sorted(p.name for p in target.iterdir()) if target.is_dir() else []
    if not names:
        return target
    kinds = tuple(replaces) or (what,)
    owner = read_owner(target)
    if owner is None or owner["what"] not in kinds:
        found = f"its {OWNER} says {owner['what']!r}" if owner else f"no {OWNER}"
        raise error(
            f"{shown} is not empty and is not a folder the lab wrote as {' or '.join(kinds)} ({found}; it holds "
            f"{_listed(names)}): allowed a new or empty folder, or one the lab wrote; nothing was changed"
        )
    foreign = [n for n in names if n != OWNER and n not in owner["files"]]
    if foreign:
        raise error(
            f"{shown} holds {_listed(foreign)}, which the lab did not write (its {OWNER} does not list "
            f"{'it' if len(foreign) == 1 else 'them'}): replacing the folder would delete "
            f"{'it' if len(foreign) == 1 else 'them'}; move {'it' if len(foreign) == 1 else 'them'} away or choose "
            "another folder; nothing was changed"
        )
    if not overwrite:
        raise error(
            f"{shown} is not empty: allowed a new or empty folder (--force / overwrite=True replaces an earlier "
            f"{what} folder the lab wrote)"
        )
    return target


def _fsync_tree(work: Path) -> None:
    """Every file written into `work`, then `work` itself, on disk before it is renamed in."""
    for p in sorted(work.rglob("*")):
        try:
            _fsync(p, folder=p.is_dir())
        except OSError as e:
            raise write_error(p, e, False) from e
    _fsync_folder(work)


def _inside(work: Path, path: str) -> str:
    """`path` relative to `work` when it is inside it, else ""."""
    p = Path(path)
    return str(p.relative_to(work)) if work in p.parents else ""


def swap_in(work: Path, target: Path) -> None:
    """Put the finished folder `work` at `target` (a sibling: the same filesystem). The old folder is renamed aside,
    the new one renamed in, then the old one deleted; each rename is atomic, and if the second fails the old folder
    is put back. `target` must be the real folder (`check_target`), never a link: the link would be renamed."""
    if not target.exists():
        os.rename(work, target)
        _fsync_folder(target.parent)
        return
    old = target.parent / f"{target.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)  # a leftover of a killed run that had the same process id
    os.rename(target, old)
    try:
        os.rename(work, target)
    except BaseException:
        os.rename(old, target)
        raise
    _fsync_folder(target.parent)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def folder_swap(
    out: str | os.PathLike,
    what: str | None,
    overwrite: bool = False,
    replaces: Sequence[str] = (),
    option: str = "--out",
    error: type[Exception] = FolderError,
) -> Iterator[Path]:
    """Yield a fresh folder `<out>.partial-<pid>` beside `out` (a link followed) to write a set of files into; when
    the block ends the owner manifest of kind `what` is added, everything is fsynced and the folder is swapped in
    for `out`. `out` is checked first (`check_folder`). `what` None: the caller has checked `out` itself (a weights
    set, recorded by its own manifest.json) and no owner manifest is written.

    Any exception in the block (Ctrl-C included) removes the new folder and leaves `out` as it was; a WriteError
    from a write inside it, or a failed swap, is raised as one WriteError naming `out`."""
    if what is None:
        target = check_target(out, option, error)
    else:
        target = check_folder(out, what, overwrite, replaces, option, error)
    existed = target.is_dir()
    work = target.parent / f"{target.name}.partial-{os.getpid()}"
    try:
        _remove(work)  # a leftover of a killed run that had the same process id
        work.mkdir(parents=True)
    except OSError as e:
        raise write_error(out, e, existed, "folder") from e
    try:
        yield work
        if what is not None:
            write_atomic(work / OWNER, owner_manifest(what, [p.name for p in work.iterdir()] + [OWNER]))
        _fsync_tree(work)
    except WriteError as e:  # a write into the new folder: said of `out`, naming the file
        _remove(work)
        raise write_error(out, e, existed, "folder", _inside(work, e.path)) from e
    except BaseException:  # Ctrl-C, or anything else the block raised: as it was
        _remove(work)
        raise
    try:
        swap_in(work, target)
    except OSError as e:
        _remove(work)
        raise write_error(out, e, existed, "folder") from e
    except BaseException:
        _remove(work)
        raise
