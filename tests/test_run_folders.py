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
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import lab.paper.run as paper_run
from dspark_mini.files import (
    OWNER,
    WriteError,
    check_run,
    file_sha256,
    files_under,
    read_owner,
    recover_swap,
    write_atomic,
)
from lab import options
from lab.cli import main
from lab.paper import cli as paper_cli
from lab.paper import docs as paper_docs
from lab.present import presenter
from lab.serving import profile_sps as profile_sps_mod
from lab.weights import WEIGHTS_DIR

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
def test_paper_out_refuses_a_folder_of_someone_elses_files_even_with_force(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    out = tmp_path / "results"
    out.mkdir()
    (out / "table1.json").write_text('{"mine": "my own table"}\n')
    (out / "notes.txt").write_text("my notes\n")
    before = tree(tmp_path)
    for force in ([], ["--force"]):
        code, _, err = run_main(capsys, ["paper", "--quick", "--out", str(out), "--docs", str(tmp_path / "d"), *force])
        line = one_line(err)
        assert code == 2 and line.startswith(f"error: --out = {str(out)!r} is not empty and is not a folder the lab")
        assert f"no {OWNER}" in line and "'notes.txt'" in line and "nothing was changed" in line
    assert tree(tmp_path) == before


def test_paper_out_needs_force_for_its_own_run_and_never_deletes_an_added_file(tmp_path, capsys, fake_paper):
    out = paper_copy(tmp_path / "run")
    before = tree(tmp_path)
    code, _, err = run_main(capsys, ["paper", "--quick", "--out", str(out), "--docs", str(out), "--no-pictures"])
    assert code == 2 and "is not empty" in one_line(err) and "--force" in err and tree(tmp_path) == before
    (out / "my-plot.png").write_bytes(b"\x89PNG mine")
    before = tree(tmp_path)
    code, _, err = run_main(capsys, ["paper", "--quick", "--out", str(out), "--force", "--no-pictures"])
    line = one_line(err)
    assert code == 2 and "'my-plot.png'" in line and "did not write" in line and tree(tmp_path) == before


def test_a_paper_run_records_every_file_it_wrote_and_replaces_exactly_its_own(tmp_path, capsys, fake_paper):
    out = paper_copy(tmp_path / "run")
    old_pngs = sorted(p.name for p in out.glob("*.png"))
    code, stdout, err = run_main(
        capsys,
        ["paper", "--quick", "--out", str(out), "--docs", str(out / "pages"), "--force", "--no-pictures", "--json"],
    )
    assert code == 0, err
    on_disk = sorted(
        str(Path(root, f).relative_to(out)).replace(os.sep, "/") for root, _, files in os.walk(out) for f in files
    )
    owner = read_owner(out)
    assert owner["complete"] is True and owner["what"] == "paper" and owner["files"] == on_disk
    for name in on_disk:
        if name != OWNER:
            assert owner["sha256"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest(), name
    assert not set(old_pngs) & set(on_disk)  # the previous run's pictures went with it (--no-pictures drew none)
    for name, item in fake_paper.items():  # the new items, byte for byte what the run serialises
        assert json.loads((out / f"{name}.json").read_text())["conditions"]["seed"] == item["conditions"]["seed"]
    assert "pages/paper.md" in on_disk and "pages/paper.vi.md" in on_disk  # --docs inside --out: part of the run
    assert json.loads(stdout)["paths"][0] == str(out / "table1.json")  # paths at their final place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no partial or old folder beside it


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--docs", "", "--docs is empty: allowed a path to a folder"),
        ("--docs", ".", "--docs = '.' is the current folder or holds it: allowed a folder beside or below it"),
        ("--docs", "/", "--docs = '/' is the root folder: allowed a folder below it"),
        ("--out", "", "--out is empty: allowed a path to a folder"),
        ("--out", ".", "--out = '.' is the current folder or holds it"),
    ],
)
def test_paper_refuses_an_empty_or_current_folder_path(tmp_path, capsys, monkeypatch, option, value, expected):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    argv = {"--out": str(tmp_path / "run"), "--docs": str(tmp_path / "pages")} | {option: value}
    code, _, err = run_main(capsys, ["paper", "--quick", "--out", argv["--out"], "--docs", argv["--docs"]])
    assert code == 2 and one_line(err).startswith(f"error: {expected}")
    assert list(tmp_path.iterdir()) == []  # no page written into the current folder


def test_paper_docs_only_with_an_empty_docs_writes_nothing_into_the_current_folder(tmp_path, capsys, monkeypatch):
    run = paper_copy(tmp_path / "run")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, _, err = run_main(capsys, ["paper", "--docs-only", "--out", str(run), "--docs", "", "--lang", "vi"])
    assert code == 2 and one_line(err) == (
        "lỗi: --docs rỗng: chỉ nhận đường dẫn tới một thư mục (đường dẫn rỗng nghĩa là thư mục hiện tại)"
    )
    assert list(here.iterdir()) == []


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


def test_every_writer_refuses_a_device_node_or_fifo_naming_its_option(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(presenter, "build_data", no_measuring)
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    for node, what in device_nodes(tmp_path, ".safetensors"):  # the name `train target` asks for
        kind = node_kind(node)
        for argv, allowed in (
            (["train", "target", "--out", str(node), "--json"], "a regular file or a new path"),
            (["checkpoint", "export", "--out", str(node), "--json"], "a folder"),
            (["present", "--out", str(node)], "a folder"),
            (["data", "--out", str(node)], "a folder"),
            (["paper", "--quick", "--out", str(node)], "a folder"),
            (["paper", "--quick", "--out", str(tmp_path / "r"), "--docs", str(node)], "a folder"),
        ):
            code, _, err = run_main(capsys, argv)
            line = one_line(err)
            option = "--docs" if "--docs" in argv else "--out"
            assert code == 2 and f"{option} = {str(node)!r}" in line, (argv, line)
            assert f"is {what}" in line and f"allowed {allowed}" in line, (argv, line)
            assert node_kind(node) == kind, argv


def test_data_out_empty_is_refused_not_ignored(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, ["data", "--out", "", "--json"])
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


def test_a_swap_with_no_new_folder_is_rolled_back_and_said_in_vietnamese(tmp_path, capsys):
    run = paper_copy(tmp_path / "run")
    before = tree(run)
    pid = dead_pid()
    run.rename(tmp_path / f"run.old-{pid}")  # what a failed second rename with a failed rollback leaves
    code, _, err = run_main(
        capsys, ["paper", "--docs-only", "--out", str(run), "--docs", str(tmp_path / "pages"), "--lang", "vi", "--json"]
    )
    assert code == 0
    assert lines_of(err) == [
        f"--out = {str(run)!r}: một lần chạy (tiến trình {pid}) bị dừng giữa chừng khi hoán đổi thư mục; đã hoàn "
        "tác: thư mục trước đã trở lại chỗ cũ"
    ]
    assert tree(run) == before and sorted(p.name for p in tmp_path.iterdir()) == ["pages", "run"]


def test_leftovers_of_a_live_process_are_left_alone(tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (tmp_path / f"site.partial-{os.getppid()}").mkdir()  # the process that started pytest runs: maybe writing
    said: list[str] = []
    assert recover_swap(out, tell=said.append) == [] and said == []
    assert (tmp_path / f"site.partial-{os.getppid()}").is_dir()


# ---- a paper run cut short, and --docs-only ------------------------------------------------------------------------
def test_paper_interrupted_while_writing_keeps_the_last_complete_run(tmp_path, capsys, monkeypatch, fake_paper):
    out = paper_copy(tmp_path / "run")
    before = tree(tmp_path)
    written = []

    def ctrl_c_after_three(path, data):
        written.append(Path(path).name)
        if len(written) == 4:
            raise KeyboardInterrupt
        return write_atomic(path, data)

    monkeypatch.setattr(paper_run, "write_atomic", ctrl_c_after_three)
    code, _, err = run_main(capsys, ["paper", "--quick", "--out", str(out), "--force", "--no-pictures", "--json"])
    assert code == 130 and one_line(err) == "interrupted" and len(written) == 4
    assert tree(tmp_path) == before  # no mix: the old run whole, no partial folder beside it
    check_run(out, "paper", "dspark-lab paper")


@pytest.fixture
def tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a full disk is a small tmpfs, and mounting one needs root (CI runs as root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def test_paper_on_a_full_disk_keeps_the_last_complete_run(tmpfs, capsys, fake_paper):
    out = paper_copy(tmpfs / "run")
    with open(tmpfs / "filler", "wb", buffering=0) as f, pytest.raises(OSError) as e:
        while True:
            f.write(b"\0" * 65536)
    assert e.value.errno == errno.ENOSPC
    before = tree(tmpfs)
    code, _, err = run_main(capsys, ["paper", "--quick", "--out", str(out), "--force", "--no-pictures", "--json"])
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "No space left on device" in line
    assert "the previous folder is unchanged" in line and tree(tmpfs) == before
    check_run(out, "paper", "dspark-lab paper")


def test_docs_only_refuses_a_mix_of_runs_and_renders_a_complete_one(tmp_path, capsys, fake_paper):
    run = paper_copy(tmp_path / "run")
    pages = tmp_path / "pages"
    mixed = dict(fake_paper["fig3"], run_marker="another run")  # fig3.json of another run, as a cut run leaves it
    (run / "fig3.json").write_text(json.dumps(mixed, indent=1) + "\n")
    code, _, err = run_main(capsys, ["paper", "--docs-only", "--out", str(run), "--docs", str(pages)])
    assert code == 2 and one_line(err) == (
        f"error: --out = {str(run)!r} is not one complete run ('fig3.json' changed): a mix of runs, or files changed "
        "since it was written; allowed a folder one `dspark-lab paper` run wrote whole; run it again"
    )
    (run / OWNER).unlink()  # a folder written before manifests, or by hand
    code, _, err = run_main(capsys, ["paper", "--docs-only", "--out", str(run), "--docs", str(pages)])
    assert code == 2 and f"is not a run the lab wrote whole (no {OWNER})" in one_line(err)
    assert not pages.exists()  # nothing rendered from either
    good = paper_copy(tmp_path / "good")
    code, _, err = run_main(capsys, ["paper", "--docs-only", "--out", str(good), "--docs", str(pages), "--json"])
    assert code == 0, err
    items = paper_docs.read_items(good)
    for lang, page in paper_docs.PAGES.items():  # what the generator writes from this run, byte for byte
        assert (pages / page).read_text(encoding="utf-8") == paper_docs.render(items, lang, good, pages)


def test_docs_only_inside_the_run_keeps_it_one_complete_run(tmp_path, capsys):
    run = paper_copy(tmp_path / "run")
    code, _, err = run_main(capsys, ["paper", "--docs-only", "--out", str(run), "--docs", str(run / "pages"), "--json"])
    assert code == 0, err
    owner = check_run(run, "paper", "dspark-lab paper")
    assert {"pages/paper.md", "pages/paper.vi.md"} <= set(owner["files"]) and owner["files"] == files_under(run)
    assert owner["sha256"]["pages/paper.md"] == file_sha256(run / "pages" / "paper.md")


# ==== --jobs against this machine ===================================================================================
@pytest.fixture
def machine(tmp_path, monkeypatch):
    """set(cores, mem_available_kb, cgroup_lines, files) → this process seen as such a machine: its affinity, a
    /proc/meminfo and a cgroup folder written in tmp_path (the real readers read them)."""

    def set_machine(cores: int, available_kb: int, cgroup: str = "0::/\n", files: dict[str, str] | None = None):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
        (tmp_path / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {available_kb} kB\n")
        (tmp_path / "cgroup").write_text(cgroup)
        root = tmp_path / "sys"
        for rel, text in (files or {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        monkeypatch.setattr(options, "MEMINFO", tmp_path / "meminfo")
        monkeypatch.setattr(options, "CGROUP", tmp_path / "cgroup")
        monkeypatch.setattr(options, "CGROUP_ROOT", root)

    return set_machine


def paper_jobs(capsys, tmp_path, jobs: int, lang: str = "en") -> tuple[int, str]:
    code, _, err = run_main(
        capsys, ["paper", "--quick", "--jobs", str(jobs), "--out", str(tmp_path / "r"), "--lang", lang]
    )
    return code, one_line(err) if code == 2 else err


def test_jobs_above_the_cores_is_refused_with_the_range(tmp_path, capsys, monkeypatch, machine):
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    machine(cores=2, available_kb=16_000_000)  # 16.4 GB: room for 54 workers of 0.3 GB, but 2 cores
    code, line = paper_jobs(capsys, tmp_path, 64)
    assert code == 2 and line == (
        "error: --jobs = 64 is more than this machine runs at once: allowed 1..2 (2 CPU cores, 16.4 GB free memory "
        "at about 0.3 GB a worker: room for 54)"
    )
    code, line = paper_jobs(capsys, tmp_path, 3, "vi")
    assert code == 2 and line.startswith(
        "lỗi: --jobs = 3 vượt quá số tiến trình máy này chạy được cùng lúc: chỉ nhận 1..2"
    )
    assert not (tmp_path / "r").exists()


def test_jobs_above_what_free_memory_holds_is_refused(tmp_path, capsys, monkeypatch, machine):
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    machine(cores=16, available_kb=700_000)  # 716.8 MB: two workers of 0.3 GB, not three
    code, line = paper_jobs(capsys, tmp_path, 3)
    assert code == 2 and "allowed 1..2 (16 CPU cores, 0.7 GB free memory at about 0.3 GB a worker: room for 2)" in line
    args = paper_cli_args(tmp_path, 2)
    paper_cli.check(args, None)  # two fit: allowed
    # a cgroup v2 limit below MemAvailable: 1.0 GB allowed, 0.5 GB used → one worker
    machine(
        16,
        16_000_000,
        "0::/lab.slice\n",
        {"lab.slice/memory.max": "1000000000", "lab.slice/memory.current": "500000000"},
    )
    code, line = paper_jobs(capsys, tmp_path, 2)
    assert code == 2 and "allowed 1..1 (16 CPU cores, 0.5 GB free memory" in line
    # cgroup v1 (the limit "none" is a huge number) and a v2 cpu quota of 1.5 cores → 2
    machine(
        16,
        16_000_000,
        "4:memory:/x\n0::/\n",
        {
            "memory/x/memory.limit_in_bytes": "9223372036854771712",
            "memory/x/memory.usage_in_bytes": "1",
            "cpu.max": "150000 100000",
        },
    )
    code, line = paper_jobs(capsys, tmp_path, 3)
    assert code == 2 and "allowed 1..2 (2 CPU cores, 16.4 GB free memory" in line
    paper_cli.check(paper_cli_args(tmp_path, 1), None)  # one job runs in the command's own process: always allowed


def paper_cli_args(tmp_path: Path, jobs: int):
    from lab.cli import parser

    return parser().parse_args(["paper", "--quick", "--jobs", str(jobs), "--out", str(tmp_path / "r2")])


def test_jobs_on_this_machine_names_its_own_cores(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(paper_run, "measure_run", no_measuring)
    cores = len(os.sched_getaffinity(0))
    if cores >= paper_cli.MAX_JOBS:
        pytest.skip(f"{cores} cores: --jobs {cores + 1} is beyond the option's own range 1..{paper_cli.MAX_JOBS}")
    code, line = paper_jobs(capsys, tmp_path, cores + 1)
    top = int(re.search(r"allowed 1\.\.(\d+) ", line).group(1))
    assert code == 2 and f"--jobs = {cores + 1} is more than this machine runs at once" in line
    assert 1 <= top <= cores and f"({cores} CPU core" in line  # never more workers than cores


# ==== Interrupts and pools ==========================================================================================
STALL = """
import os, signal
from pathlib import Path
def stall(*args, **kwargs):
    Path(os.environ["DSPARK_TEST_MARKERS"], f"worker-{os.getpid()}").write_text("")
    while True:
        signal.pause()
"""
PAPER_CHILD = """
import sys
import tempfile
sys.path.insert(0, sys.argv[1])
import stall_jobs
import lab.paper.measure as m, lab.paper.run as r
m.shipped_quality = m.dspark_streams = m.mtp1_streams = r.target_cache = stall_jobs.stall
from lab.cli import main
sys.argv = ["dspark-lab", *sys.argv[2:]]
main()
"""
TRAIN_CHILD = """
import shutil, sys
sys.path.insert(0, sys.argv[1])
import stall_jobs
import lab.training.rebuild as rb
from lab.weights import CACHE_FILE, WEIGHTS_DIR
def target(work, recipe, bar, report):
    shutil.copy(WEIGHTS_DIR / "target.safetensors", work)
    report["target"], report["seconds"]["target"] = {}, 0.0
def cache(work, recipe, bar, report):
    shutil.copy(WEIGHTS_DIR / CACHE_FILE, work)
rb.train_target_file, rb.build_cache_file, rb.train_job = target, cache, stall_jobs.stall
from lab.cli import main
sys.argv = ["dspark-lab", *sys.argv[2:]]
main()
"""


def start_stalled(tmp_path: Path, child: str, argv: list[str], jobs: int = 2):
    """The command in its own process group (as a terminal runs it), its workers' jobs stalled; returns once
    `jobs` workers run their job. → (process, worker ids, every process below it, the TMPDIR it was given)"""
    if "paper" in argv and options.jobs_range()[0] < jobs:
        pytest.skip(
            f"this machine has no room for {jobs} workers (cores, free memory): `paper --jobs {jobs}` is refused"
        )
    (tmp_path / "stall_jobs.py").write_text(textwrap.dedent(STALL))
    markers, tmp = tmp_path / "markers", tmp_path / "tmp"
    markers.mkdir()
    tmp.mkdir()
    env = dict(os.environ, DSPARK_TEST_MARKERS=str(markers), TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(child), str(tmp_path), *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_until(lambda: len(list(markers.iterdir())) >= jobs, proc, f"{jobs} workers running their jobs")
    except BaseException:
        stop(proc, descendants(proc.pid))
        raise
    workers = {int(p.name.split("-")[1]) for p in markers.iterdir()}
    below = descendants(proc.pid)
    assert workers <= below
    return proc, workers, below, tmp


def stop(proc: subprocess.Popen, below: set[int]) -> None:
    """Whatever this test started and is still running, killed by its id (a failed test leaves nothing)."""
    for pid in [proc.pid, *below]:
        if running(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait()


def finished(proc: subprocess.Popen, below: set[int], workers: set[int]) -> str:
    """Wait for the command to end → its stderr. Its workers must be gone the moment it ends (it waited for them);
    any helper process of Python's own (the resource tracker) must end once its parent has."""
    try:
        proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        stop(proc, below)
        pytest.fail("the command did not end after the signal")
    still = {pid for pid in workers if running(pid)}
    if still:  # (they also hold its stderr open: killed first, then it can be read)
        stop(proc, below)
        pytest.fail(f"worker processes {sorted(still)} still run after the command ended")
    deadline = time.monotonic() + DEADLINE
    while any(running(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {pid for pid in below if running(pid)}
    stop(proc, below)
    assert not left, f"processes {sorted(left)} the command started still run"
    return proc.stderr.read().decode()


@pytest.mark.parametrize(
    ("how", "rc"),
    [("ctrl-c", 130), ("sigterm", 143)],
    ids=["Ctrl-C to the process group", "SIGTERM to the command"],
)
def test_paper_interrupted_stops_every_worker_and_keeps_the_last_run(tmp_path, how, rc):
    out = paper_copy(tmp_path / "run")
    before = tree(out)
    argv = ["paper", "--quick", "--jobs", "2", "--out", str(out), "--force", "--no-pictures", "--json"]
    proc, workers, below, tmp = start_stalled(tmp_path, PAPER_CHILD, argv)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process of the group gets it
    else:
        proc.send_signal(signal.SIGTERM)  # `kill PID`: the command only
    err = finished(proc, below, workers)
    assert proc.returncode == rc and one_line(err) == "interrupted", err
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["markers", "run", "stall_jobs.py", "tmp"]
    assert list(tmp.iterdir()) == []  # no temporary file or folder of the pool left


def test_paper_worker_killed_for_memory_is_one_line_naming_jobs(tmp_path):
    out = paper_copy(tmp_path / "run")
    before = tree(out)
    argv = ["paper", "--quick", "--jobs", "2", "--out", str(out), "--force", "--no-pictures", "--json"]
    proc, workers, below, tmp = start_stalled(tmp_path, PAPER_CHILD, argv)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)  # what the out-of-memory killer sends
    err = finished(proc, below, workers)
    assert proc.returncode == 2 and one_line(err) == (
        "error: a worker process stopped without a word (killed, most likely by the system for lack of memory: each "
        "of the 2 workers takes about 0.3 GB): allowed fewer --jobs, e.g. --jobs 1, or more free memory, then run it "
        "again"
    )
    assert tree(out) == before and list(tmp.iterdir()) == []


def test_train_all_ctrl_c_is_one_line_and_stops_its_workers(tmp_path):
    out = shutil.copytree(WEIGHTS_DIR, tmp_path / "weights")
    before = tree(out)
    proc, workers, below, tmp = start_stalled(
        tmp_path, TRAIN_CHILD, ["train", "all", "--quick", "--out", str(out), "--json"]
    )
    os.killpg(proc.pid, signal.SIGINT)
    err = finished(proc, below, workers)
    assert proc.returncode == 130 and one_line(err) == "interrupted", err  # no KeyboardInterrupt traceback
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["markers", "stall_jobs.py", "tmp", "weights"]
    assert list(tmp.iterdir()) == []


LEAVE_CHILD = """
from multiprocessing.connection import Listener
from lab.cli import leave
listener = Listener()  # what sharing a tensor's file descriptor with a worker starts: a socket in pymp-*/
print(listener.address, flush=True)
leave(0)
"""


def test_the_cli_leaves_no_temporary_folder_of_multiprocessing_behind():
    """`dspark-lab` ends without the interpreter's exit handlers (lab/cli.py `leave`); multiprocessing's temporary
    folder, which a pool run makes when it passes tensors to its workers, must still go.

    The folder is a short one under /tmp, not pytest's tmp_path: a socket's path is limited to 107 bytes, and
    pytest's folder under xdist (…/pytest-of-root/pytest-N/popen-gwN/<test name>/tmp/pymp-…/listener-…) can pass it."""
    tmp = Path(tempfile.mkdtemp(prefix="mp", dir="/tmp"))
    try:
        _leaves_no_temporary_folder(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _leaves_no_temporary_folder(tmp):
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", LEAVE_CHILD], cwd=REPO, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith(str(tmp / "pymp-")), r.stderr  # it was made there …
    assert list(tmp.iterdir()) == []  # … and removed
