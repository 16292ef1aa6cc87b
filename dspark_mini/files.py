"""Writing files so that nothing is lost: one file atomically, a set of files as one folder swapped in whole.

Every file the lab writes goes through here (the model's checkpoints too, so this lives in dspark_mini):
  check_out_path(path, option, kind)  an output path before anything runs: refused, one line naming `option`, when
                               it is empty, the root, the current folder (or holds it), a device node, a FIFO or a
                               socket, or a file where a folder should be (and the other way round)
  write_atomic(path, data)     bytes, or a str written as UTF-8 (newlines as given) → path
  atomic_path(path)            the same for a writer that needs a path (safetensors' save_file): yields a temporary
                               path beside `path`, which becomes `path` when the block ends
  folder_swap(out, what)       a set of files: yields a fresh sibling folder `<out>.partial-<pid>` to write them
                               into; when the block ends the owner manifest is added, every file is fsynced and the
                               folder is swapped in for `out` (`swap_in`: the old folder renamed aside to
                               `<out>.old-<pid>`, the new one renamed in, the old one deleted; if the second
                               rename fails the old folder is put back)
  recover_swap(out)            what a run killed outright (SIGKILL, power loss) left beside `out`, put right: a swap
                               stopped between its two renames is finished, a half-deleted old folder or an
                               unfinished new one removed, each said in one line (`check_target` runs it)
  check_run(out, what)         a folder one run wrote whole (its manifest complete, every file as it wrote it) → its
                               manifest; a mix of runs or files changed since is refused naming them
One file is written as `.NAME.PID.RANDOM.tmp` in its own folder (the same filesystem, so the rename is atomic),
fsynced, given the mode of the file it replaces (a new one: what the umask gives), renamed over the target, and
the folder is fsynced. A target that exists and is not a regular file (a device node such as /dev/null, a FIFO, a
socket) is never replaced: the write is refused. Interrupted (Ctrl-C, SIGTERM, any exception) or out of disk, the
temporary file or folder is removed and the previous file or folder is byte for byte what it was; an OSError
becomes one `WriteError` (an OSError) whose message names the path and says that. Ctrl-C and SIGTERM are held
back during the two renames of a swap, so only a kill outright can stop it between them; then `<out>` is missing
until the next run's `recover_swap` finishes the swap.

Folders the lab owns: a folder written by `folder_swap` carries `.dspark-lab-files.json`,
{"written_by": "dspark-lab", "what": "export" | "headers" | "site" | "corpus" | "paper" | …, "complete": true,
"files": [every file it wrote, subfolders as a/b], "sha256": {file: its sha256}}.
`check_folder` lets the swap replace only a new or empty folder, or — when the caller allows it (`--force`) — one
with that manifest of an allowed kind whose every file the manifest lists. A file the manifest does not list (one
the user added) is never deleted: the replace is refused naming it. Any other non-empty folder (a Hugging Face
checkpoint, a folder of notes) is refused with one line. A path that is a symbolic link is followed on purpose:
the folder or file it points to is replaced and the link stays a link (`symlink_target` lets a command say so).
Every refusal and every line `recover_swap` prints is in the caller's `lang` ("en" or "vi").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .jsonlimits import read_json

OWNER = ".dspark-lab-files.json"  # the manifest of a folder the lab wrote as a whole
WRITTEN_BY = "dspark-lab"
MAX_OWNER_BYTES = 1 << 20  # an owner manifest lists a few dozen names; a bigger one is not the lab's
LEFTOVER = re.compile(r"\.(old|partial)-([0-9]{1,10})$")  # `<out>.old-<pid>`, `<out>.partial-<pid>` beside `out`

# every line this module shows a user, in both languages: {key: (en, vi)}
TEXT = {
    "folder": ("folder", "thư mục"),
    "file": ("file", "tệp"),
    "empty": (
        "{option} is empty: allowed a path to a {thing} (an empty path would mean the current folder)",
        "{option} rỗng: chỉ nhận đường dẫn tới một {thing} (đường dẫn rỗng nghĩa là thư mục hiện tại)",
    ),
    "root": (
        "{shown} is the root folder: allowed a folder below it",
        "{shown} là thư mục gốc: chỉ nhận một thư mục bên dưới nó",
    ),
    "here": (
        "{shown} is the current folder or holds it: allowed a folder beside or below it",
        "{shown} là thư mục hiện tại hoặc chứa nó: chỉ nhận một thư mục bên cạnh hoặc bên dưới nó",
    ),
    "mount": (
        "{shown} is a mount point: the lab builds the new folder beside it and renames it in, which cannot cross "
        "filesystems; allowed a folder inside it",
        "{shown} là một điểm gắn kết (mount point): lab dựng thư mục mới bên cạnh rồi đổi tên vào chỗ, việc này không "
        "thể vượt qua hệ thống tệp; chỉ nhận một thư mục bên trong nó",
    ),
    "special": (
        "{shown} is {kind}, not a regular {thing}: writing there would replace it; allowed {allowed}",
        "{shown} là {kind}, không phải {thing} thường: ghi vào đó sẽ thay thế nó; chỉ nhận {allowed}",
    ),
    "allowed_file": ("a regular file or a new path", "một tệp thường hoặc một đường dẫn mới"),
    "allowed_folder": ("a folder", "một thư mục"),
    "chr": ("a character device", "một tệp thiết bị ký tự"),
    "blk": ("a block device", "một tệp thiết bị khối"),
    "fifo": ("a FIFO (named pipe)", "một ống có tên (FIFO)"),
    "sock": ("a socket", "một socket"),
    "other": ("not a regular file", "không phải tệp thường"),
    "is_file": ("{shown} is a file: allowed a folder", "{shown} là một tệp: chỉ nhận một thư mục"),
    "is_folder": ("{shown} is a folder: allowed a file path", "{shown} là một thư mục: chỉ nhận đường dẫn tới một tệp"),
    "or": (" or ", " hoặc "),
    "no_owner": ("no {owner}", "không có {owner}"),
    "owner_says": ("its {owner} says {what!r}", "{owner} của nó ghi {what!r}"),
    "not_complete": ("its {owner} does not say it is complete", "{owner} của nó không ghi là đã trọn vẹn"),
    "not_lab": (
        "{shown} is not empty and is not a folder the lab wrote as {kinds} ({found}; it holds {names}): allowed a new "
        "or empty folder, or one the lab wrote; nothing was changed",
        "{shown} không rỗng và không phải thư mục lab đã ghi dưới dạng {kinds} ({found}; nó chứa {names}): chỉ nhận "
        "một thư mục mới hoặc rỗng, hoặc một thư mục do lab ghi; không có gì bị thay đổi",
    ),
    "foreign": (
        "{shown} holds {names}, which the lab did not write (its {owner} does not list {it}): replacing the folder "
        "would delete {it}; move {it} away or choose another folder; nothing was changed",
        "{shown} chứa {names}, không do lab ghi ({owner} của nó không liệt kê): thay thư mục sẽ xoá chúng; hãy chuyển "
        "chúng đi hoặc chọn thư mục khác; không có gì bị thay đổi",
    ),
    "not_empty": (
        "{shown} is not empty: allowed a new or empty folder (--force / overwrite=True replaces an earlier {what} "
        "folder the lab wrote)",
        "{shown} không rỗng: chỉ nhận một thư mục mới hoặc rỗng (--force / overwrite=True thay một thư mục {what} do "
        "lab ghi trước đó)",
    ),
    "finished": (
        "{shown}: a run (process {pid}) was stopped between the two renames of its swap; finished the swap: its new "
        "folder is in place, the previous one ({old}) removed",
        "{shown}: một lần chạy (tiến trình {pid}) bị dừng giữa hai lần đổi tên khi hoán đổi thư mục; đã hoàn tất: thư "
        "mục mới của nó đã vào chỗ, thư mục trước ({old}) đã được xoá",
    ),
    "rolled_back": (
        "{shown}: a run (process {pid}) was stopped in the middle of its swap; rolled it back: the previous folder is "
        "in place again",
        "{shown}: một lần chạy (tiến trình {pid}) bị dừng giữa chừng khi hoán đổi thư mục; đã hoàn tác: thư mục trước "
        "đã trở lại chỗ cũ",
    ),
    "old_left": (
        "{shown}: a run (process {pid}) was stopped after its swap, while deleting the previous folder; removed what "
        "was left of it ({old})",
        "{shown}: một lần chạy (tiến trình {pid}) bị dừng sau khi hoán đổi, lúc đang xoá thư mục trước; đã xoá phần "
        "còn lại của nó ({old})",
    ),
    "partial_left": (
        "{shown}: a run (process {pid}) was stopped before its swap; removed its unfinished folder ({partial}), the "
        "folder itself was not touched",
        "{shown}: một lần chạy (tiến trình {pid}) bị dừng trước khi hoán đổi; đã xoá thư mục dở dang của nó "
        "({partial}), bản thân thư mục không bị động đến",
    ),
    "not_run": (
        "{shown} is not a run the lab wrote whole ({found}): allowed a folder one `{command}` run wrote; run it again",
        "{shown} không phải một lần chạy lab ghi trọn vẹn ({found}): chỉ nhận một thư mục do một lần chạy "
        "`{command}` ghi; hãy chạy lại",
    ),
    "mixed": (
        "{shown} is not one complete run ({problems}): a mix of runs, or files changed since it was written; allowed "
        "a folder one `{command}` run wrote whole; run it again",
        "{shown} không phải một lần chạy trọn vẹn ({problems}): lẫn nhiều lần chạy, hoặc tệp đã đổi sau khi ghi; chỉ "
        "nhận một thư mục do một lần chạy `{command}` ghi trọn vẹn; hãy chạy lại",
    ),
    "changed": ("{name!r} changed", "{name!r} đã đổi"),
    "missing": ("{name!r} missing", "thiếu {name!r}"),
    "extra": ("{name!r} not written by it", "{name!r} không do nó ghi"),
}


def say(key: str, lang: str = "en", **fmt: object) -> str:
    """One line of TEXT in `lang` ("en" or "vi"; anything else reads as English)."""
    en, vi = TEXT[key]
    return (vi if lang == "vi" else en).format(**fmt)


class WriteError(OSError):
    """A file or folder could not be written (a full disk, no permission, a read-only filesystem): the message
    names the path and says that what was there before is unchanged. `path` and `reason` are kept for callers."""


class FolderError(ValueError):
    """A folder the lab would replace is not one it may replace (not its own, or holding a file it did not write),
    or an output path the lab never writes to (empty, the root, the current folder, a device node, a FIFO)."""


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


def _special(path: Path) -> str | None:
    """The TEXT key of what `path` is when it exists and is neither a regular file nor a folder, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, key in ((stat.S_ISCHR, "chr"), (stat.S_ISBLK, "blk"), (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "sock")):
        if test(mode):
            return key
    return "other"


def check_out_path(
    path: str | os.PathLike,
    option: str = "--out",
    kind: str = "folder",
    lang: str = "en",
    error: type[Exception] = FolderError,
) -> Path:
    """An output path (`kind` "folder" or "file"), checked before anything runs → the real path it reaches (a link
    followed). Refused with `error`, one line naming `option` and what is allowed: an empty path, the root, the
    current folder or one holding it (a folder), a device node, a FIFO or a socket (writing would replace it), a
    file where a folder should be and a folder where a file should be."""
    if isinstance(path, str) and not path.strip():
        raise error(say("empty", lang, option=option, thing=say(kind, lang)))
    shown = f"{option} = {str(path)!r}"
    target = _real(path)
    if target.parent == target:
        raise error(say("root", lang, shown=shown))
    special = _special(target)
    if special is not None:
        allowed = say(f"allowed_{kind}", lang)
        raise error(say("special", lang, shown=shown, kind=say(special, lang), thing=say(kind, lang), allowed=allowed))
    if kind == "folder":
        if target.exists() and not target.is_dir():
            raise error(say("is_file", lang, shown=shown))
        here = _real(os.curdir)
        if target == here or target in here.parents:
            raise error(say("here", lang, shown=shown))
    elif target.is_dir():
        raise error(say("is_folder", lang, shown=shown))
    return target


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
    OSError (also the one making a missing parent folder) is raised as one `WriteError` naming `path`. A `path`
    that is a device node, a FIFO or a socket is refused (a WriteError) before anything is written."""
    target = _real(path)
    existed = target.exists()
    special = _special(target)
    if special is not None:
        err = WriteError(
            f"{str(path)!r} is {say(special)}, not a regular file: nothing was written (allowed a regular file or a "
            "new path)"
        )
        err.path, err.reason = str(path), say(special)
        raise err
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
    """The owner manifest of `folder` ({"written_by", "what", "files", and "complete", "sha256" when a run wrote
    it whole}); None when it has none, or one the lab did not write (unreadable, too big, too deep, another shape)."""
    path = Path(folder) / OWNER
    try:
        if not path.is_file() or path.stat().st_size > MAX_OWNER_BYTES:
            return None
        d = read_json(path, MAX_OWNER_BYTES, regular_only=True)  # bounded: size, depth, integer digits
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(d, dict) and d.get("written_by") == WRITTEN_BY and isinstance(d.get("what"), str)
    if not ok or not isinstance(d.get("files"), list) or not all(isinstance(f, str) for f in d["files"]):
        return None
    sha = d.get("sha256", {})
    if not isinstance(sha, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sha.items()):
        return None
    return d


def owner_manifest(what: str, files: Sequence[str], sha256: dict[str, str] | None = None) -> str:
    """The manifest text: `files` every file written (the manifest itself included), `sha256` their hashes."""
    d: dict = {"written_by": WRITTEN_BY, "what": what, "complete": True, "files": sorted(files)}
    if sha256 is not None:
        d["sha256"] = dict(sorted(sha256.items()))
    return json.dumps(d, indent=1) + "\n"


def files_under(folder: Path) -> list[str]:
    """Every file under `folder`, subfolders included, as a relative path a/b (links are listed, not followed)."""
    out = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        out += [(rel / f).as_posix() for f in files]
        out += [(rel / d).as_posix() for d in dirs if (Path(root) / d).is_symlink()]
    return sorted(out)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _unlisted(folder: Path, listed: set[str]) -> list[str]:
    """What is under `folder` that the manifest's `listed` files do not account for (a folder holding none of them
    is named once, as a/)."""
    out = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        out += [r for f in files if (r := (rel / f).as_posix()) not in listed and r != OWNER]
        for d in list(dirs):
            r = (rel / d).as_posix()
            if r in listed:  # a listed link to a folder
                dirs.remove(d)
            elif not any(x.startswith(r + "/") for x in listed):
                out.append(r + "/")
                dirs.remove(d)
    return sorted(out)


def _listed(names: Sequence[str], n: int = 3) -> str:
    return ", ".join(map(repr, names[:n])) + (f" and {len(names) - n} more" if len(names) > n else "")


def _alive(pid: int) -> bool:
    """Whether another process `pid` runs now (this process's own id counts as not: its swap is not under way)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    try:  # a zombie (dead, not yet reaped by its parent) runs nothing
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def recover_swap(
    out: str | os.PathLike, option: str = "--out", lang: str = "en", tell: Callable[[str], None] = _stderr
) -> list[str]:
    """Put right what a run killed outright left beside `out` (`<out>.old-<pid>`, `<out>.partial-<pid>` of a
    process that no longer runs) and say each in one line (`tell`, stderr by default) → the lines.

    Killed between the two renames of its swap, a run leaves no `out`, its previous folder as `.old-<pid>` and its
    new one, complete (it was fsynced before the first rename), as `.partial-<pid>`: the swap is finished. No new
    folder (a rollback that failed): the previous one is put back. With `out` in place, an `.old-<pid>` is what was
    left of a previous folder being deleted and a `.partial-<pid>` a new folder never finished: both are removed.
    A leftover of a process that still runs (a run writing now) is left alone."""
    target = _real(out)
    shown = f"{option} = {str(out)!r}"
    parent = target.parent
    found: dict[int, dict[str, Path]] = {}
    try:
        names = [n for n in os.listdir(parent) if n.startswith(target.name + ".")]
    except OSError:
        return []
    for name in names:
        m = LEFTOVER.search(name)
        if m and name[: m.start()] == target.name and (parent / name).is_dir() and not (parent / name).is_symlink():
            found.setdefault(int(m.group(2)), {})[m.group(1)] = parent / name
    lines = []
    for pid, left in sorted(found.items()):
        if _alive(pid):
            continue
        old, partial = left.get("old"), left.get("partial")
        if old is not None and not os.path.lexists(target):
            if partial is not None and _may_finish(partial):
                os.rename(partial, target)
                _fsync_folder(parent)
                shutil.rmtree(old, ignore_errors=True)
                lines.append(say("finished", lang, shown=shown, pid=pid, old=old.name))
            else:
                os.rename(old, target)
                _fsync_folder(parent)
                if partial is not None:
                    shutil.rmtree(partial, ignore_errors=True)
                lines.append(say("rolled_back", lang, shown=shown, pid=pid))
            continue
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            lines.append(say("old_left", lang, shown=shown, pid=pid, old=old.name))
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
            lines.append(say("partial_left", lang, shown=shown, pid=pid, partial=partial.name))
    for line in lines:
        tell(line)
    return lines


def _may_finish(partial: Path) -> bool:
    """A new folder left between the two renames is complete by construction; one that carries an owner manifest
    must also match it (every file as the run wrote it), else the swap is rolled back instead."""
    if not (partial / OWNER).exists():
        return True
    return _run_problems(partial, read_owner(partial)) == []


def check_target(
    out: str | os.PathLike, option: str = "--out", error: type[Exception] = FolderError, lang: str = "en"
) -> Path:
    """The real folder a swap at `out` replaces (a link followed) → its path, once what a killed run left beside it
    is put right (`recover_swap`). Refused with `error`, one line naming `option` (`check_out_path`): an empty path,
    the root, the current folder or one holding it, a file, a device node or a FIFO; and a mount point (the new
    folder is built beside it and renamed in, which cannot cross filesystems)."""
    target = check_out_path(out, option, "folder", lang, error)
    if os.path.ismount(target):
        raise error(say("mount", lang, shown=f"{option} = {str(out)!r}"))
    recover_swap(out, option, lang)
    return target


def check_folder(
    out: str | os.PathLike,
    what: str,
    overwrite: bool = False,
    replaces: Sequence[str] = (),
    option: str = "--out",
    error: type[Exception] = FolderError,
    lang: str = "en",
) -> Path:
    """May `folder_swap` put a folder of kind `what` at `out`? → the real folder (`check_target`). Allowed: a new or
    empty folder; with `overwrite`, a folder whose owner manifest is of a kind in `replaces` (default: `what`) and
    lists every file in it. Refused with `error`, one line naming `option`, the path and what is allowed."""
    shown = f"{option} = {str(out)!r}"
    target = check_target(out, option, error, lang)
    names = sorted(os.listdir(target)) if target.is_dir() else []
    if not names:
        return target
    kinds = tuple(replaces) or (what,)
    owner = read_owner(target)
    if owner is None or owner["what"] not in kinds:
        found = (
            say("owner_says", lang, owner=OWNER, what=owner["what"]) if owner else say("no_owner", lang, owner=OWNER)
        )
        raise error(
            say("not_lab", lang, shown=shown, kinds=say("or", lang).join(kinds), found=found, names=_listed(names))
        )
    foreign = _unlisted(target, set(owner["files"]))
    if foreign:
        it = "it" if len(foreign) == 1 else "them"
        raise error(say("foreign", lang, shown=shown, names=_listed(foreign), owner=OWNER, it=it))
    if not overwrite:
        raise error(say("not_empty", lang, shown=shown, what=what))
    return target


def _run_problems(folder: Path, owner: dict | None, lang: str = "en") -> list[str] | None:
    """How `folder` differs from what its manifest says the run wrote: [] when it is that run whole; None when the
    manifest does not record a complete run (no hashes, not marked complete)."""
    if owner is None or owner.get("complete") is not True or "sha256" not in owner:
        return None
    sha = owner["sha256"]
    problems = []
    for name in sorted(set(owner["files"]) - {OWNER}):
        path = folder / name
        if name not in sha or not path.is_file():
            problems.append(say("missing", lang, name=name))
        elif file_sha256(path) != sha[name]:
            problems.append(say("changed", lang, name=name))
    problems += [say("extra", lang, name=name) for name in _unlisted(folder, set(owner["files"]))]
    return problems


def check_run(
    out: str | os.PathLike,
    what: str,
    command: str,
    option: str = "--out",
    error: type[Exception] = FolderError,
    lang: str = "en",
) -> dict:
    """Is `out` a folder one run of kind `what` wrote whole (`command` names the run in the message)? → its owner
    manifest. Refused with `error`, one line naming `option`: no manifest, one of another kind or not marked complete
    (a folder from before manifests, or written by hand), and a mix — a file changed, missing or not the run's."""
    recover_swap(out, option, lang)
    shown = f"{option} = {str(out)!r}"
    folder = Path(out)
    owner = read_owner(folder)
    if owner is None or owner["what"] != what:
        found = (
            say("owner_says", lang, owner=OWNER, what=owner["what"]) if owner else say("no_owner", lang, owner=OWNER)
        )
        raise error(say("not_run", lang, shown=shown, found=found, command=command))
    problems = _run_problems(folder, owner, lang)
    if problems is None:
        raise error(say("not_run", lang, shown=shown, found=say("not_complete", lang, owner=OWNER), command=command))
    if problems:
        shown_problems = ", ".join(problems[:3]) + (f" (+{len(problems) - 3})" if len(problems) > 3 else "")
        raise error(say("mixed", lang, shown=shown, problems=shown_problems, command=command))
    return owner


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


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM held back for the block (delivered when it ends): a swap's two renames are not
    split by an interrupt. Where signals cannot be masked, the block runs as it is."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def swap_in(work: Path, target: Path) -> None:
    """Put the finished folder `work` at `target` (a sibling: the same filesystem). The old folder is renamed aside,
    the new one renamed in, then the old one deleted; each rename is atomic, and if the second fails the old folder
    is put back. Ctrl-C and SIGTERM wait until both renames are done (`_signals_held`); a kill outright between
    them leaves `<target>.old-<pid>` and `work`, which the next run's `recover_swap` swaps in. `target` must be the
    real folder (`check_target`), never a link: the link would be renamed."""
    if not target.exists():
        os.rename(work, target)
        _fsync_folder(target.parent)
        return
    old = target.parent / f"{target.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)  # a leftover of a killed run that had the same process id
    with _signals_held():
        os.rename(target, old)
        try:
            os.rename(work, target)
        except BaseException:
            os.rename(old, target)
            raise
        _fsync_folder(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def _manifest_for(work: Path, what: str) -> str:
    files = [f for f in files_under(work) if f != OWNER]
    return owner_manifest(what, [*files, OWNER], {f: file_sha256(work / f) for f in files})


@contextmanager
def folder_swap(
    out: str | os.PathLike,
    what: str | None,
    overwrite: bool = False,
    replaces: Sequence[str] = (),
    option: str = "--out",
    error: type[Exception] = FolderError,
    lang: str = "en",
) -> Iterator[Path]:
    """Yield a fresh folder `<out>.partial-<pid>` beside `out` (a link followed) to write a set of files into; when
    the block ends the owner manifest of kind `what` is added (every file and its sha256, marked complete),
    everything is fsynced and the folder is swapped in for `out`. `out` is checked first (`check_folder`). `what`
    None: the caller has checked `out` itself (a weights set, recorded by its own manifest.json) and no owner
    manifest is written.

    Any exception in the block (Ctrl-C included) removes the new folder and leaves `out` as it was; a WriteError
    from a write inside it, or a failed swap, is raised as one WriteError naming `out`."""
    if what is None:
        target = check_target(out, option, error, lang)
    else:
        target = check_folder(out, what, overwrite, replaces, option, error, lang)
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
            write_atomic(work / OWNER, _manifest_for(work, what))
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
