"""Run folders the lab owns, interrupts and worker pools: each case reproduces one way output went wrong.

Run folders. `paper`, `profile --sps`, `train`, `checkpoint export`, `present --out` and `data --out` write through
dspark_mini/files.py: a folder holding files the lab did not write is refused (with --force too), an empty path, the
current folder, the root, a device node or a FIFO is refused with one line naming the option, a folder is built
beside `--out` and swapped in whole, and a swap killed between its two renames is finished (or rolled back) by the
next run, which says so in one line. A paper run's manifest lists every file with its sha256; `--docs-only` renders
only a run whose manifest is complete and matches every file.
Interrupts. Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM to the command during
`paper` or `train all` stops every worker process, leaves the last complete run byte for byte, no temporary file
or folder, and exits 130 / 143 with the one line `interrupted`. A worker killed from outside (the OOM killer's
SIGKILL) is one line naming memory and --jobs. `paper --jobs` above this machine's cores or free memory is refused
naming the range.

How: the files on disk are compared by the sha256 of every file; the workers' jobs are replaced by a function that
writes a marker file with its process id and then waits for a signal, so every signal is sent once the workers
are known to run — never after a delay (a generous deadline only stops a hung test). Processes are checked gone
through /proc, by the ids the test saw.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import lab.paper.run as paper_run
from dspark_mini.files import (
    WriteError,
    check_run,
    read_owner,
    recover_swap,
    write_atomic,
)
from lab.cli import main
from lab.paper import docs as paper_docs
from lab.serving import profile_sps as profile_sps_mod

REPO = Path(__file__).resolve().parents[1]
COMMITTED_RUN = REPO / "runs" / "paper"
DEADLINE = 300  # seconds: only a guard against a hung test, never a measurement


# ---- helpers -------------------------------------------------------------------------------------------------------
def tree(folder: Path) -> dict[str, str]:
    """Every path under `folder` (hidden ones too) → the sha256 of its bytes ("dir" for a folder)."""
    return {
        str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }


def run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def lines_of(err: str) -> list[str]:
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    return lines


def one_line(err: str) -> str:
    lines = lines_of(err)
    assert len(lines) == 1, err
    return lines[0]


def dead_pid() -> int:
    """The id of a process that has ended (started and waited for here)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, ended but not yet reaped, runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(root: int) -> set[int]:
    """Every process below `root` now (children, their children, …), read from /proc."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent[int(name)] = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        kids = {c for c, p in parent.items() if p == pid and c not in found}
        found |= kids
        todo += kids
    return found


def wait_until(done, proc: subprocess.Popen, what: str) -> None:
    """Poll `done()` until true; the child ending first, or the guard deadline, fails the test with its stderr."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        if proc.poll() is not None:
            pytest.fail(f"the command ended before {what}: rc {proc.returncode}\n{proc.stderr.read().decode()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {DEADLINE} s")
        time.sleep(0.05)


def paper_copy(folder: Path) -> Path:
    """A complete paper run the lab wrote (the committed runs/paper, with its manifest) at `folder`."""
    shutil.copytree(COMMITTED_RUN, folder)
    assert check_run(folder, "paper", "dspark-lab paper")["what"] == "paper"
    return folder


@pytest.fixture
def fake_paper(monkeypatch):
    """`paper`'s measurement replaced by the committed run's items with a changed seed (the writing is under test,
    not the measuring); → the items the run will write."""
    items = paper_docs.read_items(COMMITTED_RUN)
    new = copy.deepcopy(items)
    for item in new.values():
        item["conditions"]["seed"] = 4242
    monkeypatch.setattr(paper_run, "measure_run", lambda *a, **k: ({}, paper_run.budget("quick", 0), 1.0))
    monkeypatch.setattr(paper_run, "build_items", lambda *a, **k: copy.deepcopy(new))
    return new


def no_measuring(*args, **kwargs):
    pytest.fail("measured for an output path that is refused")


# ==== Run folders ===================================================================================================


def device_nodes(tmp_path: Path, suffix: str = "") -> list[tuple[Path, str]]:
    """A FIFO, and — where this user may make one — a character device with /dev/null's numbers, in tmp_path (the
    real /dev/null is never pointed at: a regression would replace it)."""
    fifo = tmp_path / f"pipe{suffix}"
    os.mkfifo(fifo)
    nodes = [(fifo, "a FIFO (named pipe)")]
    chr_node = tmp_path / f"null{suffix}"
    try:
        os.mknod(chr_node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes.append((chr_node, "a character device"))
    except (PermissionError, OSError):
        pass
    return nodes


def node_kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    return "fifo" if stat.S_ISFIFO(mode) else "chr" if stat.S_ISCHR(mode) else "other"


def test_profile_sps_out_refuses_a_device_node_or_fifo_and_leaves_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(profile_sps_mod, "profile_sps", no_measuring)
    for node, what in device_nodes(tmp_path):
        kind = node_kind(node)
        code, _, err = run_main(capsys, ["profile", "--sps", "--out", str(node), "--json"])
        assert code == 2 and one_line(err) == (
            f"error: --out = {str(node)!r} is {what}, not a regular file: writing there would replace it; allowed a "
            "regular file or a new path"
        )
        assert node_kind(node) == kind  # still the node, not a regular file
        with pytest.raises(WriteError) as e:  # and the writer itself never replaces one
            write_atomic(node, "{}\n")
        assert f"is {what}, not a regular file: nothing was written" in str(e.value) and node_kind(node) == kind
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_data_out_empty_is_refused_not_ignored(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, ["data", "--out", "", "--lines", "5", "--json"])
    assert (
        code == 2
        and one_line(err)
        == "error: --out is empty: allowed a path to a folder (an empty path would mean the current folder)"
    )
    assert list(tmp_path.iterdir()) == []


# ---- a swap killed between its two renames --------------------------------------------------------------------------
KILLED_SWAP = """
import os, signal, sys
from pathlib import Path
marker, out = Path(sys.argv[1]), sys.argv[2]
real = os.rename
def rename(src, dst):
    real(src, dst)
    if str(dst).endswith(f".old-{os.getpid()}"):  # the first rename of the swap is done: wait here to be killed
        marker.write_text(str(os.getpid()))
        while True:
            signal.pause()
os.rename = rename
from lab.cli import main
sys.exit(main(["checkpoint", "export", "--out", out, "--shards", "3", "--force", "--json"]))
"""


def test_export_killed_between_the_two_renames_is_finished_by_the_next_run(tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert run_main(capsys, ["checkpoint", "export", "--out", str(out), "--shards", "2", "--json"])[0] == 0
    before = tree(out)
    marker = tmp_path / "between-renames"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_SWAP), str(marker), str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(marker.exists, proc, "the first rename")
        proc.kill()  # SIGKILL: Ctrl-C and SIGTERM wait for the second rename, only a kill outright lands here
        proc.wait()
    finally:
        proc.kill()
        proc.stderr.close()
    pid = proc.pid
    old, new = tmp_path / f"ckpt.old-{pid}", tmp_path / f"ckpt.partial-{pid}"
    assert not out.exists() and tree(old) == before and new.is_dir()  # neither the old nor the new --out
    new_tree = tree(new)
    assert read_owner(new)["complete"] is True and "model-00003-of-00003.safetensors" in new_tree
    code, _, err = run_main(capsys, ["checkpoint", "export", "--out", str(out), "--json"])  # the next run
    said, error = lines_of(err)
    assert said == (
        f"--out = {str(out)!r}: a run (process {pid}) was stopped between the two renames of its swap; finished the "
        f"swap: its new folder is in place, the previous one (ckpt.old-{pid}) removed"
    )
    assert code == 2 and "is not empty" in error  # the finished folder is an export: replacing it needs --force
    assert tree(out) == new_tree  # the killed run's export, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["between-renames", "ckpt"]
    assert run_main(capsys, ["checkpoint", "export", "--out", str(out), "--force", "--json"])[0] == 0


def test_leftovers_of_a_live_process_are_left_alone(tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (tmp_path / f"site.partial-{os.getppid()}").mkdir()  # the process that started pytest runs: maybe writing
    said: list[str] = []
    assert recover_swap(out, tell=said.append) == [] and said == []
    assert (tmp_path / f"site.partial-{os.getppid()}").is_dir()


# ---- a paper run cut short, and --docs-only ------------------------------------------------------------------------
