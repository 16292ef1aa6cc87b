"""Reliability (docs/reliability.md): nothing lost, nothing leaked, nothing unbounded — one file, four parts.

Nothing lost: atomic writes, folders swapped in whole, folders the lab owns.
Every case asserts the exit code (or the error), the one line naming the option or the path, and the files on disk
before and after (sha256 of every file). A full disk is a small tmpfs mounted for the test (root only, as CI runs;
skipped otherwise with the reason) and filled to the last byte; an interruption is injected at a fixed point (the
second shard's write), or a real subprocess is killed once it has written a marker file — never after a delay.

Hostile files refused early.
A config.json whose numbers would take minutes or gigabytes (experts, max_seq_len, Sinkhorn iterations, a
400-digit width) is refused by ModelConfig's bounds or by the size guard (parameters + KV cache) before anything is
built — measured with tracemalloc, not the clock. JSON nested 100,000 deep in a shard header, the index, config.json,
a lab weight file's header or a lab data file is one clear error, never a RecursionError. `inspect --checkpoint`
reports as problems exactly what safetensors refuses on load (overlapping or out-of-file offsets, a gap or trailing
bytes, a header above 100,000,000 bytes). A shard that links outside its folder is never opened, and no message
echoes a file's bytes (the 8-byte length prefix of a non-safetensors file is not printed as a number).

Serving and sweeps that free what they finished.
`serve` releases a finished request's cache the moment it finishes (its slot takes the next prompt) and streams
its result then (JSON lines); what stays alive is bounded by the slots, not by the prompts. `profile --sps`
measures one batch size at a time. `serve`, `schedule` and `profile --sps` print their estimated work first and
their progress on stderr under --json. Nothing here reads a timing value: live caches are counted with weak
references, memory with tracemalloc's peak, the estimate by its counts.

The presenter's server: `--host` must be a loopback address unless `--public` is given (then one warning line),
idle or half-sent connections time out and free their threads, at most MAX_CONNECTIONS handler threads run at once,
a client that goes away mid-response prints no traceback, and Ctrl-C is `interrupted`, 130.
The server tests serve a small fake page (`make_server` does not care what the page is) with the timeout made
small; every wait is on the server closing a socket or a thread ending, under a generous bound, never on a clock.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import heapq
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import dspark_mini.checkpoint as checkpoint_mod
import lab.cli as lab_cli
from dspark_mini import build_model, get_config, get_tokenizer
from dspark_mini import config as config_mod
from dspark_mini.checkpoint import CheckpointError, load_model, save, stamp_target
from dspark_mini.config import ConfigError
from dspark_mini.files import OWNER, WriteError, atomic_path, folder_swap, read_owner, write_atomic
from dspark_mini.jsonlimits import JSONLimitError, loads, read_json
from dspark_mini.kv_cache import KVCache, cache_bytes
from dspark_mini.speculative import generate_plain
from lab import style as lab_style
from lab.cli import main
from lab.present import presenter
from lab.realscale import export_checkpoint
from lab.serving import commands as serve_cli
from lab.serving import profile_sps as profile_sps_mod
from lab.serving.profile_sps import profile_sps
from lab.serving.serve import Reservoir, serve_stream
from lab.serving.sps import load_table
from lab.training import rebuild as train_all_mod
from lab.training.rebuild import check_shipped
from lab.weights import DRAFTERS, WEIGHTS_DIR, lab_model

# ==== Nothing lost: atomic writes, folders swapped in whole, folders the lab owns ===================================
REPO = Path(__file__).resolve().parents[1]
SHIPPED_SPS = REPO / "lab" / "serving" / "data" / "sps_lab_cpu.json"


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


def one_line(err: str) -> str:
    """The error printed: exactly one non-empty line, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def the_error(err: str) -> str:
    """The error printed after a command's own progress lines (an estimate, a bar): one `error:` line, the last."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size) → a fresh folder under tmp_path with a tmpfs of that size mounted on it; unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is a small tmpfs, and mounting one needs root (CI runs as root)")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        disk = tmp_path / f"disk{len(mounted)}"
        disk.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
        mounted.append(disk)
        return disk

    yield mount
    for disk in mounted:
        subprocess.run(["umount", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Take every free byte of the tmpfs at `disk` (unbuffered writes until ENOSPC)."""
    with open(disk / "filler", "wb", buffering=0) as f:
        chunk = b"\0" * 65536
        with pytest.raises(OSError) as e:
            while True:
                f.write(chunk)
    assert e.value.errno == errno.ENOSPC


def export_to(capsys, out: Path, *extra: str) -> tuple[int, str]:
    code, _, err = run_main(capsys, ["checkpoint", "export", "--out", str(out), "--json", *extra])
    return code, err


def hf_folder(folder: Path) -> Path:
    """A Hugging Face checkpoint folder the lab did not write: its own index, shards and config."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}\n')
    shards = [f"model-0000{k}-of-00002.safetensors" for k in (1, 2)]
    index = {"metadata": {}, "weight_map": {"a": shards[0], "b": shards[1]}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    for name in (*shards, "model-best-of-run3.safetensors"):
        (folder / name).write_bytes(os.urandom(4096))
    (folder / "tokenizer.json").write_text("{}\n")
    return folder


# ---- one file --------------------------------------------------------------------------------------------------------
def test_write_atomic_on_a_full_disk_keeps_the_old_file_byte_for_byte(tmpfs):
    disk = tmpfs("64k")
    path = disk / "table.json"
    shutil.copyfile(SHIPPED_SPS, path)  # 3,765 valid bytes
    fill(disk)
    before = tree(disk)
    with pytest.raises(WriteError) as e:
        write_atomic(path, json.dumps({"points": list(range(4000))}))
    msg = str(e.value)
    assert repr(str(path)) in msg and "No space left on device" in msg and "previous file is unchanged" in msg
    assert tree(disk) == before  # no temporary file left, the old table whole
    json.loads(path.read_text())


def test_an_interrupted_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "report.json"
    path.write_text('{"old": true}\n')
    before = tree(tmp_path)
    with pytest.raises(KeyboardInterrupt), atomic_path(path) as tmp:
        tmp.write_text('{"new": ')  # half written, then Ctrl-C
        raise KeyboardInterrupt
    assert tree(tmp_path) == before
    link = tmp_path / "link.json"
    link.symlink_to(path)
    write_atomic(link, "{}\n")  # through a link: the file it points to is replaced, the link stays
    assert link.is_symlink() and path.read_text() == "{}\n"


def test_profile_sps_out_on_a_full_disk_keeps_the_old_table(tmpfs, capsys, monkeypatch):
    disk = tmpfs("64k")
    path = disk / "sps.json"
    shutil.copyfile(SHIPPED_SPS, path)
    table = load_table(SHIPPED_SPS)
    table.name = "re-measured"
    monkeypatch.setattr(profile_sps_mod, "profile_sps", lambda *a, **k: table)  # the measurement is not under test
    fill(disk)
    before = tree(disk)
    code, _, err = run_main(capsys, ["profile", "--sps", "--out", str(path), "--json"])
    line = the_error(err)  # after the estimate line and the progress bar
    assert code == 2 and f"--out = {str(path)!r}" in line and "No space left on device" in line
    assert "the previous file is unchanged" in line
    assert tree(disk) == before
    assert load_table(path).name == load_table(SHIPPED_SPS).name  # still the valid old table


# ---- a folder of files, swapped in whole ----------------------------------------------------------------------------
def test_present_out_on_a_full_disk_keeps_the_old_site(tmpfs, capsys, monkeypatch):
    disk = tmpfs("16m")
    site = disk / "site"
    presenter.write_site("<html>the old page</html>\n", site)
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: {})  # the model run is not under test
    monkeypatch.setattr(presenter, "render_page", lambda data: "<html>the new page</html>\n" * 1000)
    fill(disk)
    before = tree(disk)
    code, _, err = run_main(capsys, ["present", "--out", str(site)])
    line = one_line(err)
    assert code == 2 and f"--out = {str(site)!r}" in line and "No space left on device" in line
    assert "the previous folder is unchanged" in line
    assert tree(disk) == before  # index.html and plotly.min.js whole, no partial folder beside them


def mib(n_bytes: int) -> str:
    """A tmpfs size for `n_bytes`, in whole MiB (rounded up)."""
    return f"{-(-n_bytes // 2**20)}m"


def test_export_on_a_full_disk_keeps_the_previous_export(tmpfs, capsys):
    # room for two exports side by side (the swap writes the new one beside the old), each about the target's size
    disk = tmpfs(mib(3 * (WEIGHTS_DIR / "target.safetensors").stat().st_size))
    out = disk / "ckpt"
    assert export_to(capsys, out, "--shards", "3")[0] == 0
    fill(disk)
    before = tree(disk)
    code, err = export_to(capsys, out, "--shards", "3", "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "No space left on device" in line
    assert "the previous folder is unchanged" in line
    assert tree(disk) == before
    (disk / "filler").unlink()  # room again: the next --force works
    assert export_to(capsys, out, "--shards", "2", "--force")[0] == 0


def fake_phases(monkeypatch, write_target=None):
    """`train all`'s phases replaced by copies of the shipped files (the swap is under test, not training)."""

    def target(work, recipe, bar, report):
        if write_target is not None:
            write_target(work)
        else:
            shutil.copy(WEIGHTS_DIR / "target.safetensors", work)
        report["target"] = {"trained": "target"}

    def drafters(work, recipe, bar, report):
        for k in DRAFTERS:
            shutil.copy(WEIGHTS_DIR / f"{k}.safetensors", work)
        report["drafters"] = json.loads((WEIGHTS_DIR / "report.json").read_text())["drafters"]

    monkeypatch.setattr(train_all_mod, "train_target_file", target)
    monkeypatch.setattr(train_all_mod, "train_drafters", drafters)
    monkeypatch.setattr(train_all_mod, "measure_speed", lambda *a: None)


def test_train_all_on_a_full_disk_keeps_the_old_set(tmpfs, capsys, monkeypatch):
    disk = tmpfs(mib(sum(p.stat().st_size for p in WEIGHTS_DIR.iterdir()) + 8 * 2**20))  # the set, and a little
    out = shutil.copytree(WEIGHTS_DIR, disk / "weights")
    model = load_model(WEIGHTS_DIR / "target.safetensors")
    fake_phases(monkeypatch, lambda work: save(model, work / "target.safetensors", part="target"))  # the lab's writer
    fill(disk)
    before = tree(disk)
    code, _, err = run_main(capsys, ["train", "all", "--quick", "--out", str(out), "--json"])
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "No space left on device" in line
    assert "writing target.safetensors" in line and "the previous folder is unchanged" in line
    assert tree(disk) == before  # the old set, and no partial or old folder beside it
    assert check_shipped(out) == []


def test_train_all_out_symlink_keeps_the_link_and_replaces_where_it_points(tmp_path, capsys, monkeypatch):
    real = shutil.copytree(WEIGHTS_DIR, tmp_path / "disk" / "weights")
    link = tmp_path / "here" / "weights"
    link.parent.mkdir()
    link.symlink_to(real)
    old_report = (real / "report.json").read_bytes()
    fake_phases(monkeypatch)
    code, out, err = run_main(capsys, ["train", "all", "--quick", "--out", str(link), "--json"])
    assert code == 0, err
    assert one_line(err) == (
        f"--out {str(link)!r} is a symbolic link to {str(real)!r}: writing into {str(real)!r}, the link is kept"
    )
    assert link.is_symlink() and os.readlink(link) == str(real)  # still the same link …
    assert (real / "report.json").read_bytes() != old_report and check_shipped(real) == []  # … to the new set
    assert (
        json.loads(out)["recipe"]["target_steps"]
        == json.loads((real / "report.json").read_text())["recipe"]["target_steps"]
    )
    assert sorted(p.name for p in link.parent.iterdir()) == ["weights"]  # no `.old-PID` link left
    assert sorted(p.name for p in real.parent.iterdir()) == ["weights"]  # no partial or old folder


# ---- folders the lab owns ------------------------------------------------------------------------------------------
def test_export_force_over_a_hugging_face_folder_is_refused_and_deletes_nothing(tmp_path, capsys):
    folder = hf_folder(tmp_path / "hf")
    before = tree(tmp_path)
    code, err = export_to(capsys, folder, "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(folder)!r}" in line and "not a folder the lab wrote" in line
    assert f"no {OWNER}" in line and "nothing was changed" in line
    assert tree(tmp_path) == before  # model-best-of-run3.safetensors, config.json … all still there


def test_export_force_over_its_own_export_replaces_exactly_its_files(tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert export_to(capsys, out, "--shards", "3")[0] == 0
    assert sorted(read_owner(out)["files"]) == sorted(p.name for p in out.iterdir())
    code, err = export_to(capsys, out, "--shards", "3")  # without --force: refused, unchanged
    before = tree(tmp_path)
    assert code == 2 and "is not empty" in one_line(err) and "--force" in err and tree(tmp_path) == before
    assert export_to(capsys, out, "--shards", "2", "--force")[0] == 0
    names = sorted(p.name for p in out.iterdir())
    assert not any("of-00003" in n for n in names)  # the old export's shards are gone (its manifest listed them)
    assert names == sorted(read_owner(out)["files"]) and read_owner(out)["what"] == "export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no partial or old folder beside it


def test_export_force_keeps_a_file_the_user_added_by_refusing(tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert export_to(capsys, out, "--shards", "2")[0] == 0
    (out / "notes.txt").write_text("my notes about this run\n")
    before = tree(tmp_path)
    code, err = export_to(capsys, out, "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "'notes.txt'" in line and "did not write" in line
    assert tree(tmp_path) == before


def test_headers_force_over_a_foreign_config_json_is_refused(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"hidden_size": 4096, "mine": true}\n')
    before = tree(tmp_path)
    code, _, err = run_main(capsys, ["checkpoint", "headers", "--out", str(out), "--force", "--json"])
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "'config.json'" in line and "not a folder" in line
    assert tree(tmp_path) == before


def test_a_forged_or_hostile_owner_manifest_owns_nothing(tmp_path, capsys):
    folder = hf_folder(tmp_path / "hf")
    (folder / OWNER).write_text("[" * 100_000 + "]" * 100_000)  # deeply nested: not the lab's manifest
    before = tree(tmp_path)
    code, err = export_to(capsys, folder, "--force")
    assert code == 2 and "not a folder the lab wrote" in one_line(err) and tree(tmp_path) == before
    (folder / OWNER).write_text(json.dumps({"written_by": "dspark-lab", "what": "site", "files": []}))
    code, err = export_to(capsys, folder, "--force")  # the lab's, but a site: an export never replaces it
    assert code == 2 and "says 'site'" in one_line(err)


def test_data_and_present_out_refuse_a_folder_the_lab_did_not_write(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "math.txt").write_text("my own math notes\n")
    before = tree(tmp_path)
    code, _, err = run_main(capsys, ["data", "--out", str(folder)])
    assert code == 2 and f"--out = {str(folder)!r}" in one_line(err) and "'math.txt'" in err
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: pytest.fail("ran the model for a refused --out"))
    code, _, err = run_main(capsys, ["present", "--out", str(folder)])
    assert code == 2 and f"--out = {str(folder)!r}" in one_line(err)
    assert tree(tmp_path) == before
    assert run_main(capsys, ["data", "--out", str(tmp_path / "corpus"), "--json"])[0] == 0
    assert run_main(capsys, ["data", "--out", str(tmp_path / "corpus"), "--json"])[0] == 0  # its own: replaced


# ---- an interrupted export -----------------------------------------------------------------------------------------
def test_export_interrupted_in_shard_2_keeps_the_previous_export(tmp_path, capsys, monkeypatch):
    out = tmp_path / "ckpt"
    assert export_to(capsys, out, "--shards", "3")[0] == 0
    before = tree(tmp_path)
    real_save, calls = checkpoint_mod.save_file, []

    def ctrl_c_in_shard_2(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            Path(filename).write_bytes(b"\x10\0\0\0\0\0\0\0{half")  # half a shard, then Ctrl-C
            raise KeyboardInterrupt
        return real_save(tensors, filename, metadata=metadata)

    monkeypatch.setattr(checkpoint_mod, "save_file", ctrl_c_in_shard_2)
    code, err = export_to(capsys, out, "--shards", "3", "--force")
    assert code == 130 and one_line(err) == "interrupted" and len(calls) == 2
    assert tree(tmp_path) == before  # byte-identical, no .tmp, no partial shard, no partial folder beside it
    monkeypatch.setattr(checkpoint_mod, "save_file", real_save)
    assert export_to(capsys, out, "--shards", "3", "--force")[0] == 0  # a second --force works


KILLED_EXPORT = """
import signal, sys, time
from pathlib import Path
import dspark_mini.checkpoint as ckpt
from lab.cli import main
marker, out = Path(sys.argv[1]), sys.argv[2]
real, calls = ckpt.save_file, []
def stall_in_shard_2(tensors, filename, metadata=None):
    calls.append(filename)
    real(tensors, filename, metadata=metadata)
    if len(calls) == 2:  # shard 2 written to its temporary file, not yet renamed: stop here until signalled
        marker.write_text(filename)
        while True:  # short naps: a signal taken by another thread is seen at the next one
            time.sleep(0.1)
ckpt.save_file = stall_in_shard_2
sys.exit(main(["checkpoint", "export", "--out", out, "--shards", "3", "--force", "--json"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_export_killed_midway_keeps_the_previous_export(tmp_path, capsys, sig):
    out = tmp_path / "ckpt"
    assert export_to(capsys, out, "--shards", "3")[0] == 0
    before = tree(out)
    marker = tmp_path / "in-shard-2"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_EXPORT), str(marker), str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120  # generous: only "it gets there" is measured, never how fast
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.stderr.read().decode() if proc.poll() is not None else "no marker in 120 s"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert tree(out) == before  # byte-identical: no .tmp, no partial shard in the folder
    beside = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("ckpt", marker.name))
    if sig == signal.SIGINT:  # Ctrl-C: cleaned up, one line, exit 130
        assert proc.returncode == 130 and one_line(err.decode()) == "interrupted" and beside == []
    else:  # killed outright: at most the new export's own partial folder beside it, never in it
        assert proc.returncode == -signal.SIGKILL and beside == [f"ckpt.partial-{proc.pid}"]
    assert export_to(capsys, out, "--shards", "2", "--force")[0] == 0  # a second --force then works
    assert read_owner(out)["files"] == sorted(p.name for p in out.iterdir())


def test_a_failed_write_in_a_folder_swap_names_the_folder_and_the_file(tmp_path):
    out = tmp_path / "site"
    with folder_swap(out, "site") as work:
        write_atomic(work / "index.html", "old\n")
    before = tree(tmp_path)
    with pytest.raises(WriteError) as e, folder_swap(out, "site", overwrite=True) as work:
        write_atomic(work / "index.html", "new\n")
        with atomic_path(work / "plotly.min.js"):
            raise OSError(errno.EACCES, "Permission denied")
    assert str(e.value) == (
        f"{str(out)!r} could not be written (Permission denied, writing plotly.min.js): "
        "the previous folder is unchanged"
    )
    assert tree(tmp_path) == before


# ==== Hostile files refused early ===================================================================================
ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "lab" / "weights"
DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH  # 100,000 levels: json.loads alone raises RecursionError
MAX_TRACED = 50 * 2**20  # bytes a refused hostile config may allocate during the call (the guard is before building)
# what an /etc/passwd shard would echo: its first 8 bytes, and those bytes read as a little-endian header length
PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
PASSWD_LENGTH = f"{struct.unpack('<Q', PASSWD[:8])[0]:,}"


# ---- helpers ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A lab model (seed 0) exported in the lab layout, 2 shards: the folder each case copies and damages."""
    return export_checkpoint(build_model(get_config("lab"), seed=0), tmp_path_factory.mktemp("hostile") / "ckpt", 2)


@pytest.fixture
def ckpt(export, tmp_path):
    out = tmp_path / "ckpt"
    shutil.copytree(export, out)
    return out


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("model-*-of-*.safetensors"))


def cli_run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in-process → (exit code, stdout, stderr); never a traceback, and stderr is one line (none on
    success)."""
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "RecursionError" not in out + err, err[-2000:]
    assert len(err.strip().splitlines()) == (rc != 0), err
    return rc, out, " ".join(err.split())


def inspect_json(capsys, folder: Path) -> tuple[int, list[str], str]:
    """`inspect --checkpoint folder --json` → (exit code, the report's problems, stderr)."""
    rc, out, err = cli_run(capsys, ["inspect", "--checkpoint", str(folder), "--json"])
    return rc, (json.loads(out)["problems"] if out.strip().startswith("{") else []), err


def traced_peak(call) -> tuple[object, int]:
    """(call(), the peak bytes Python allocated during it)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def patch_config(folder: Path, text: str | None = None, **fields) -> None:
    """Rewrite folder/config.json: the lab config's fields changed, or the whole text replaced."""
    path = folder / "config.json"
    if text is None:
        d = json.loads(path.read_text())
        d["dspark_lab"]["config"].update(fields)
        text = json.dumps(d)
    path.write_text(text)


def header_of(shard: Path) -> tuple[dict, bytes]:
    """(the JSON header, the data) of a safetensors file."""
    raw = shard.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def write_shard(shard: Path, header: dict | str, data: bytes) -> None:
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode()
    shard.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def no_bytes(text: str, *forbidden: str) -> None:
    for f in forbidden:
        assert f not in text, (f, text[:500])


# ---- a hostile config.json: refused by the bounds or the size guard, before anything is built -------------------
@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("n_routed_experts", 10**5, "≤ 8,192"),
        ("n_routed_experts", 10**7, "≤ 8,192"),
        ("max_seq_len", 2**26, "≤ 16,777,216"),
        ("hc_sinkhorn_iters", 10**9, "≤ 256"),
    ],
)
@pytest.mark.parametrize("command", ["inspect", "generate"])
def test_hostile_config_sizes_are_refused_in_bounded_memory(ckpt, capsys, field, value, allowed, command) -> None:
    patch_config(ckpt, **{field: value})
    argv = ["inspect", "--checkpoint", str(ckpt), "--json"] if command == "inspect" else []
    argv = argv or ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"]
    cli_run(capsys, argv)  # once for the imports; the second call is the one measured
    (rc, out, err), peak = traced_peak(lambda: cli_run(capsys, argv))
    assert peak < MAX_TRACED, f"{peak:,} bytes allocated for a config that is refused"
    text = "\n".join(json.loads(out)["problems"]) if command == "inspect" else err
    assert rc == (1 if command == "inspect" else 2), err
    assert f"config field '{field}' = {value}" in text and allowed in text and "config.json" in text, text


def test_max_seq_len_in_bounds_whose_cache_is_over_the_guard_names_it(ckpt, capsys) -> None:
    """2**23 positions pass the bound, but the KV cache of one sequence would take 12 GiB: refused by the size
    guard (parameters + cache) before building, naming max_seq_len."""
    patch_config(ckpt, max_seq_len=2**23)
    argv = ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"]
    cli_run(capsys, argv)
    (rc, _, err), peak = traced_peak(lambda: cli_run(capsys, argv))
    assert rc == 2 and peak < MAX_TRACED
    assert "KV cache of one sequence (max_seq_len = 8,388,608)" in err and "allowed at most 8 GiB" in err, err
    assert str(ckpt) in err and "refused before building anything" in err


def test_the_size_guard_counts_the_cache_a_model_allocates() -> None:
    """cache_bytes is exactly what KVCache allocates (rings, positions, compressed KV, index keys)."""
    for cfg in (get_config("lab"), get_config("lab", max_seq_len=1024, window_size=16)):
        cache = KVCache(cfg, 3)
        held = [r.kv for r in cache.windows.values()] + [s.kv for s in cache.sources.values()]
        held += [s.index_k for s in cache.sources.values()]
        pos = {id(r.pos): r.pos for r in cache.windows.values()}.values()  # the two shared position tensors
        assert cache_bytes(cfg, 3) == sum(t.nbytes for t in held) + sum(p.nbytes for p in pos)


def test_a_400_digit_number_is_refused_with_a_short_message(ckpt, capsys) -> None:
    digits = "9" * 400
    for field, text in (("dim", "allowed an integer ≥ 1 and ≤ 131,072"), ("rope_theta", "expected a finite number")):
        d = json.loads((ckpt / "config.json").read_text())
        d["dspark_lab"]["config"][field] = 0
        raw = json.dumps(d).replace(f'"{field}": 0', f'"{field}": {digits}')
        patch_config(ckpt, text=raw)
        for argv in (["generate", "--checkpoint", str(ckpt)], ["inspect", "--checkpoint", str(ckpt), "--json"]):
            rc, out, err = cli_run(capsys, argv)
            message = err if rc == 2 else json.loads(out)["problems"][0]
            assert f"config field '{field}' = 999999999999…(400 digits)" in message and text in message, message
            assert len(message) < 400 and digits not in out + err
    with pytest.raises(ConfigError) as e:  # the Python API: past Python's own 4,300-digit str limit too
        get_config("lab", dim=10**5000)
    assert e.value.field == "dim" and "(5,001 digits)" in str(e.value) and len(str(e.value)) < 200


def test_flash_and_its_long_context_pass_the_bounds_with_headroom() -> None:
    flash = get_config("flash")
    for ctx in (4096, 1_048_576):
        get_config("flash", max_seq_len=ctx)
    for name, (_, hi) in config_mod.INT_RANGES.items():
        assert hi >= 4 * getattr(flash, name), name  # every bound far above the real model
        with pytest.raises(ConfigError) as e:
            get_config("flash", **{name: hi + 1})
        assert e.value.field == name and f"≤ {hi:,}" in str(e.value)
    for field, value in (("vocab_size", 10**9), ("moe_inter_dim", 10**7)):
        with pytest.raises(ConfigError, match=f"config field '{field}' = {value} is invalid"):
            get_config("lab").replace(**{field: value})


def test_combined_bounds_name_a_field(capsys) -> None:
    with pytest.raises(ConfigError, match="at most 65,536 routed experts over all layers") as e:
        get_config("flash", n_routed_experts=8192)
    assert e.value.field == "n_routed_experts"
    with pytest.raises(ConfigError, match="at most 256 Engram tables") as e:
        get_config("flash", engram_n_heads=64)
    assert e.value.field == "engram_n_heads"


# ---- JSON nested 100,000 deep, in each place the lab reads JSON from a user's file ------------------------------
def deep_index(folder: Path) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text('{"weight_map": ' + DEEP + "}")
    return path


def deep_config(folder: Path) -> Path:
    patch_config(folder, text='{"text_config": ' + DEEP + "}")
    return folder / "config.json"


def deep_shard(folder: Path) -> Path:
    shard = shards(folder)[0]
    write_shard(shard, '{"__metadata__": ' + DEEP + "}", b"")
    return shard


@pytest.mark.parametrize("where", [deep_index, deep_config, deep_shard], ids=["index", "config", "shard header"])
def test_deeply_nested_json_in_a_checkpoint_folder_is_one_line(ckpt, capsys, where) -> None:
    path = where(ckpt)
    rc, problems, err = inspect_json(capsys, ckpt)
    message = err if where is deep_index else "\n".join(problems)  # no index: nothing to inspect (exit 2)
    assert rc == (2 if where is deep_index else 1), err
    assert str(path) in message and "nested deeper than 64 levels" in message, message
    rc, _, err = cli_run(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(path) in err and "nested deeper than 64 levels" in err, err
    no_bytes(message + err, "[[[[")


def lab_weights_copy(tmp_path: Path) -> Path:
    """The shipped weights, copied without their manifest (so a file may be changed on purpose)."""
    out = tmp_path / "weights"
    shutil.copytree(WEIGHTS, out)
    (out / "manifest.json").unlink()
    return out


def rewrite_metadata(path: Path, **changes: str) -> None:
    """The same tensors, some header metadata strings replaced."""
    with safe_open(str(path), "pt") as f:
        md, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata={**md, **changes})


def test_deeply_nested_json_in_a_lab_weight_file_header(tmp_path, capsys) -> None:
    """The JSON strings inside a lab .safetensors header (config, meta): eval, train draft, load_model."""
    weights = lab_weights_copy(tmp_path)
    rewrite_metadata(weights / "dspark.safetensors", meta='{"notes": ' + DEEP + "}")
    rc, _, err = cli_run(capsys, ["eval", "--weights-dir", str(weights)])
    assert rc == 2 and "dspark.safetensors" in err and "'meta' JSON" in err and "nested deeper" in err, err
    target = tmp_path / "target.safetensors"
    shutil.copy(WEIGHTS / "target.safetensors", target)
    rewrite_metadata(target, config='{"dim": ' + DEEP + "}")
    argv = ["train", "draft", "--target", str(target), "--out", str(tmp_path / "d.safetensors"), "--steps", "1"]
    rc, _, err = cli_run(capsys, argv)
    assert rc == 2 and str(target) in err and "'config' JSON" in err and "nested deeper" in err, err
    with pytest.raises(CheckpointError, match="nested deeper than 64 levels"):
        load_model(target)
    assert not (tmp_path / "d.safetensors").exists()


def test_a_400_digit_width_in_a_lab_weight_file(tmp_path, capsys) -> None:
    """A target whose header config says dim = 400 digits, its drafters re-stamped so eval gets to read it."""
    weights = lab_weights_copy(tmp_path)
    target = weights / "target.safetensors"
    with safe_open(str(target), "pt") as f:
        config = f.metadata()["config"]
    wide = re.sub(r'"dim": \d+', '"dim": ' + "7" * 400, config)
    assert wide != config
    rewrite_metadata(target, config=wide)
    sha = hashlib.sha256(target.read_bytes()).hexdigest()
    for drafter in weights.glob("*.safetensors"):
        if drafter != target and drafter.name != "target_cache.safetensors":  # the drafters, not the data
            stamp_target(drafter, sha)
    rc, _, err = cli_run(capsys, ["eval", "--weights-dir", str(weights)])
    assert rc == 2 and "config field 'dim' = 777777777777…(400 digits)" in err and len(err) < 600, err
    assert str(weights) in err


@pytest.mark.parametrize("option", ["--sps-table", "--streams"])
def test_deeply_nested_lab_data_files(tmp_path, capsys, option) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"format": ' + DEEP + "}")
    rc, _, err = cli_run(capsys, ["schedule", option, str(path), "--json"])
    assert rc == 2 and f"{option} = {str(path)!r}" in err and "nested deeper than 64 levels" in err, err


# ---- inspect reports what safetensors refuses; a load fails on the same folders --------------------------------
def overlap(folder: Path) -> str:
    """The second tensor of shard 1 moved 8 bytes back onto the first (the header keeps its length)."""
    shard = shards(folder)[0]
    header, data = header_of(shard)
    names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])
    second = header[names[1]]
    second["data_offsets"] = [second["data_offsets"][0] - 8, second["data_offsets"][1] - 8]
    write_shard(shard, json.dumps(header), data)
    return f"tensor '{names[1]}'"


def beyond_the_file(folder: Path) -> str:
    shard = shards(folder)[-1]
    shard.write_bytes(shard.read_bytes()[:-16])
    return "is truncated"


def trailing_bytes(folder: Path) -> str:
    shard = shards(folder)[-1]
    shard.write_bytes(shard.read_bytes() + b"\0" * 8)
    return "8 bytes after its last tensor's data"


def oversized_header(folder: Path) -> str:
    """A length prefix of 100,000,001 (above safetensors' limit, below the 100 MiB the lab once allowed) and a file
    that long — sparse: nothing is written but the prefix."""
    shard = shards(folder)[-1]
    n = 100_000_001
    with open(shard, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.truncate(8 + n + 64)
    return "larger than safetensors' limit of 100,000,000 bytes"


@pytest.mark.parametrize("damage", [overlap, beyond_the_file, trailing_bytes, oversized_header])
def test_inspect_reports_what_safetensors_refuses(ckpt, capsys, damage) -> None:
    rc, problems, _ = inspect_json(capsys, ckpt)
    assert rc == 0 and problems == []  # the export itself: no problems, and it loads
    needle = damage(ckpt)
    rc, problems, err = inspect_json(capsys, ckpt)
    assert rc == 1 and f"{len(problems)} problem(s)" in err, (problems, err)
    assert needle in problems[0] and not any("\n" in p for p in problems), problems
    assert len(problems) == (3 if damage is oversized_header else 1), problems  # + its tensors missing, total_size
    rc, _, err = cli_run(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(ckpt) in err, err  # what inspect calls a problem does not load either


def test_an_overlap_names_both_tensors_and_safetensors_rule(ckpt, capsys) -> None:
    name = overlap(ckpt)
    _, problems, _ = inspect_json(capsys, ckpt)
    assert name in problems[0] and "overlaps" in problems[0] and "begin where the one before ends" in problems[0]


# ---- a shard that is not in the folder, or not a safetensors file -----------------------------------------------
def test_a_shard_linked_outside_the_folder_is_never_read(ckpt, tmp_path, capsys) -> None:
    outside = tmp_path / "passwd"
    outside.write_bytes(PASSWD)
    shard = shards(ckpt)[0]
    shard.unlink()
    shard.symlink_to(outside)
    rc, problems, err = inspect_json(capsys, ckpt)
    assert rc == 1 and any(shard.name in p and "outside the checkpoint folder" in p for p in problems), problems
    no_bytes("\n".join(problems) + err, "root:x", PASSWD_LENGTH)
    rc, _, err = cli_run(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(shard) in err and "outside the checkpoint folder" in err, err
    no_bytes(err, "root:x", PASSWD_LENGTH)


def test_a_link_inside_the_folder_is_allowed(ckpt, capsys) -> None:
    shard = shards(ckpt)[0]
    shard.rename(ckpt / "real.safetensors")
    shard.symlink_to("real.safetensors")
    rc, problems, _ = inspect_json(capsys, ckpt)
    assert rc == 0 and problems == []


def test_a_text_file_as_a_shard_is_not_read_as_a_header_length(ckpt, capsys) -> None:
    shards(ckpt)[0].write_bytes(PASSWD)
    rc, problems, _ = inspect_json(capsys, ckpt)
    rc2, _, err = cli_run(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 1 and rc2 == 2 and "not a safetensors file" in err and "8-byte length prefix" in err, err
    no_bytes("\n".join(problems) + err, "root:x", PASSWD_LENGTH)


# ---- the bounded parser itself ---------------------------------------------------------------------------------
def test_bounded_json_refuses_without_quoting_the_text(tmp_path) -> None:
    cases = [
        (DEEP, "nested deeper than 64 levels"),
        ('{"a": "x"}' + " " * 2000, "larger than 1,000 bytes"),
        ('[{"a": ' * 40 + "1" + "}]" * 40, "nested deeper than 64 levels"),  # 80 levels, alternating brackets
        ("[" + "7" * 21 + "]", "an integer of 21 digits: allowed at most 20"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        ('{"secret": tru', "not valid JSON"),
    ]
    for text, why in cases:
        with pytest.raises(JSONLimitError, match=why) as e:
            loads(text, 1000 if "larger" in why else 10**6)
        no_bytes(str(e.value), "secret", "7777", "[[[")
    assert loads(json.dumps({"a": "[" * DEPTH, "n": 2**64 - 1}), 10**6) == {"a": "[" * DEPTH, "n": 2**64 - 1}
    assert loads("[" + "1" * 400 + "]", 10**6, max_int_digits=None) == [int("1" * 400)]
    with pytest.raises(JSONLimitError, match="larger than 1,000 bytes"):
        read_json("/dev/zero", 1000)  # reads 1,001 bytes, then stops


# ---- torchrun: every rank reads through the same functions -----------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_ranks(args: list[str]) -> list[tuple[int, str, str]]:
    """2 ranks of `python -m lab.runtime.torchrun ARGS` started by hand with torchrun's variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DSPARK_TP")}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1"}
    env |= {"MASTER_PORT": str(free_port()), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lab.runtime.torchrun", *args],
            cwd=ROOT,
            env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=300) for p in procs]
        return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail("2 ranks hung (no exit in 300 s)")


def test_two_torchrun_ranks_refuse_a_deeply_nested_shard_header(ckpt) -> None:
    shard = deep_shard(ckpt)
    for r, (rc, out, err) in enumerate(launch_two_ranks(["generate", "--checkpoint", str(ckpt)])):
        assert rc == 2 and "Traceback" not in err and "RecursionError" not in err and out == "", err[-2000:]
        assert f"[rank {r}/2]" in err and shard.name in err and "nested deeper than 64 levels" in err, err[-2000:]


# ==== Serving and sweeps that free what they finished ===============================================================
@pytest.fixture(scope="module")
def trained():
    return lab_model("trained").eval()


@pytest.fixture
def counted_caches(trained, monkeypatch):
    """Every cache the model makes, as weak references in order, and how many were alive at each new one."""
    made: list[weakref.ref] = []
    alive_before: list[int] = []
    real = type(trained).new_cache

    def new_cache(batch: int = 1):
        alive_before.append(sum(r() is not None for r in made))
        cache = real(trained, batch)
        made.append(weakref.ref(cache))
        return cache

    monkeypatch.setattr(trained, "new_cache", new_cache)
    return made, alive_before


@pytest.fixture
def served_model(trained, monkeypatch):
    """The CLI's `serve` / `profile --sps` on the module's model (no reload per call)."""
    monkeypatch.setattr("lab.weights.lab_model", lambda *a, **k: trained)  # profile --sps
    monkeypatch.setattr("lab.runtime.run.run_model", lambda *a, **k: trained)  # serve
    return trained


def run_lab(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def prompts_file(tmp_path, lines: list[str], name: str = "p.txt"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


PROMPTS = ["1 + 2 =", "The model predicts the next token.", "ab", "def f(x):", "User: hi", "Q", "x = 3 * 4"]


# ---- serve: caches bounded by the slots ------------------------------------------------------------------------
def test_serve_frees_each_finished_cache_before_the_next_prompt_runs(trained, counted_caches):
    """At every admission at most R − 1 caches are alive (the free slot's was released), and a request's cache is
    collected by the time it is handed over — while later prompts are still being served."""
    made, alive_before = counted_caches
    tok = get_tokenizer(trained.cfg)
    prompts = [tok.encode(p) for p in PROMPTS * 2]  # 14 prompts, 3 slots
    handed = []
    for req in serve_stream(trained, prompts, requests=3, max_new_tokens=6):
        assert req.cache is None and made[req.index]() is None, req.index  # released before it is handed over
        handed.append(req.index)
        assert sum(r() is not None for r in made) <= 3  # never more caches than slots
    assert sorted(handed) == list(range(len(prompts))) and len(made) == len(prompts)
    assert max(alive_before) <= 2  # a new prompt only ever takes a slot that was freed


def test_serve_keeps_no_request_once_it_is_handed_over(trained):
    """The stream holds a finished request (and its rounds) only until it is handed over: however many prompts
    were served, at most R of them are alive, and none once the stream ends."""
    tok = get_tokenizer(trained.cfg)
    prompts = [tok.encode(p) for p in PROMPTS * 3]  # 21 prompts, 4 slots
    handed: list[weakref.ref] = []
    rounds: list[weakref.ref] = []
    stream = serve_stream(trained, iter(prompts), requests=4, max_new_tokens=5)
    for req in stream:
        handed.append(weakref.ref(req))
        rounds += [weakref.ref(x) for x in req.rounds]
        del req  # the caller lets it go
        assert sum(r() is not None for r in handed) <= 4
    assert len(handed) == len(prompts) and all(r() is None for r in handed + rounds)


# ---- serve --json: JSON lines in order of finishing ------------------------------------------------------------
def finishing_order(rounds: list[int], slots: int) -> tuple[list[int], int, int]:
    """Continuous batching replayed from each request's round count: the first `slots` prompts start at round 0,
    each next prompt starts in the round after a slot frees; requests finishing in the same round leave in prompt
    order. → (prompt indices in order of finishing, rounds the run takes, admission times = prefill forwards)."""
    heap = [(rounds[i], i) for i in range(min(slots, len(rounds)))]
    heapq.heapify(heap)
    order, last, starts = [], 0, {0}
    nxt = len(heap)
    while heap:
        finish, i = heapq.heappop(heap)
        order.append(i)
        last = max(last, finish)
        if nxt < len(rounds):
            heapq.heappush(heap, (finish + rounds[nxt], nxt))
            starts.add(finish)
            nxt += 1
    return order, last, len(starts)


def test_serve_json_streams_one_line_per_request_in_order_of_finishing(trained, served_model, tmp_path):
    """Every stdout line is a JSON object: one per request, in the order the requests finished (replayed from
    their round counts), then the summary, whose numbers are those of the lines; greedy tokens = plain decoding."""
    path = prompts_file(tmp_path, PROMPTS[:2] + [""] + PROMPTS[2:])  # a blank line is skipped
    code, out, err = run_lab(
        "serve", "--prompts-file", str(path), "--requests", "2", "--max-new-tokens", "10", "--json"
    )
    assert code == 0, err
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    assert {r["kind"] for r in rows} == {"request"} and summary["kind"] == "summary"
    assert sorted(r["index"] for r in rows) == list(range(len(PROMPTS)))
    order, makespan, admissions = finishing_order([r["rounds"] for r in sorted(rows, key=lambda r: r["index"])], 2)
    assert [r["index"] for r in rows] == order
    assert summary["rounds"] == makespan  # a freed slot never sat out a round
    assert summary["prefill_forwards"] == admissions  # the prompts admitted together shared one prefill forward
    tok = get_tokenizer(trained.cfg)
    for r in rows:
        assert r["prompt"] == PROMPTS[r["index"]]
        plain = generate_plain(trained, torch.tensor([tok.encode(r["prompt"])]), 10).tokens[0]
        assert r["tokens"] == plain, r["index"]
    assert summary["requests"] == len(rows) and summary["new_tokens"] == sum(len(r["tokens"]) for r in rows)
    assert summary["rounds"] == sum(summary["batch_tokens_per_round"]["rounds_at"].values())
    ell = sum(r["mean_verify_len"] * r["rounds"] for r in rows) / sum(r["rounds"] for r in rows)
    assert summary["mean_verify_len"] == pytest.approx(ell)


def test_many_tiny_prompts_finish_and_memory_does_not_grow_with_their_count(served_model, tmp_path, monkeypatch):
    """300 one-character prompts are all served, and the Python memory still alive when the summary is written
    (after a full collection: no garbage, no free lists) is that of serving 50 — the file is read line by line,
    every finished request is written and let go, the summary is aggregates. (The old serve kept ≈ 6 KB of
    Python objects a prompt until the end, besides its 0.44 MB cache.) Besides, the peak of 300 is within a small
    factor of the peak of 50."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    real = lab_style.print_json
    seen: dict[str, int] = {}

    def print_json(report, *args, **kwargs):
        if report.get("kind") == "summary":
            gc.collect()
            seen["live"] = tracemalloc.get_traced_memory()[0]
        real(report, *args, **kwargs)

    monkeypatch.setattr(lab_style, "print_json", print_json)

    def measure(n: int) -> tuple[int, int]:
        path = prompts_file(tmp_path, [letters[i % len(letters)] for i in range(n)], f"p{n}.txt")
        out = tmp_path / f"out{n}.jsonl"
        argv = ["serve", "--prompts-file", str(path), "--requests", "8", "--max-new-tokens", "2", "--json"]
        with open(out, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            with contextlib.redirect_stderr(io.StringIO()):
                gc.collect()
                tracemalloc.start()
                try:
                    code = main(argv)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
        assert code == 0
        lines = out.read_text(encoding="utf-8").splitlines()
        assert len(lines) == n + 1 and json.loads(lines[-1])["requests"] == n
        return seen["live"], peak

    measure(8)  # the first run pays for lazy imports and caches
    (live_small, peak_small), (live_big, peak_big) = measure(50), measure(300)
    assert live_big - live_small < 250 * 512, (live_small, live_big)  # < 0.5 KB a prompt
    assert peak_big < 2 * peak_small, (peak_small, peak_big)


# ---- the prompts file's bounds ---------------------------------------------------------------------------------
def test_a_prompts_file_beyond_its_bounds_is_one_line_before_anything_runs(served_model, tmp_path, monkeypatch):
    long_line = prompts_file(tmp_path, ["ok", "x" * (serve_cli.MAX_LINE_CHARS + 1)], "long.txt")
    code, out, err = run_lab("serve", "--prompts-file", str(long_line), "--json")
    err = " ".join(err.split())
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--prompts-file = '{long_line}' line 2 is longer than 4,096 characters" in err
    monkeypatch.setattr(serve_cli, "MAX_PROMPTS", 3)
    many = prompts_file(tmp_path, ["a", "b", "", "c", "d"], "many.txt")
    code, out, err = run_lab("serve", "--prompts-file", str(many))
    err = " ".join(err.split())
    assert code == 2 and out == "" and f"--prompts-file = '{many}' holds more than 3 prompts: allowed at most 3" in err


# ---- profile --sps: one size at a time ---------------------------------------------------------------------
def test_profile_sps_holds_one_size_of_caches_at_a_time(trained, counted_caches):
    """Each size's caches are made only after the previous size's are gone: peak memory = the largest size's."""
    made, alive_before = counted_caches
    table = profile_sps([24, 1, 12, 6], reps=2, cache_len=8, model=trained)
    assert table.batch_tokens == (1, 6, 12, 24) and all(s["n"] == 2 for s in table.step_stats)
    assert len(made) == 4 and alive_before == [0, 0, 0, 0]
    assert all(r() is None for r in made)
    assert "one size at a time" in table.conditions["order"]


# ---- the estimate first, the progress on stderr ----------------------------------------------------------------
def test_schedule_prints_its_estimate_first_and_its_progress_on_stderr():
    argv = ["schedule", "--requests", "1,4", "--policies", "fixed,dspark", "--rounds", "3"]
    code, out, err = run_lab(*argv)
    assert code == 0, err
    first = out.splitlines()[0]
    want = "2 loads R = 1 … 4 × 2 policies × 3 tables × 3 rounds → 36 simulated rounds over 90 request-rounds"
    assert first.startswith("estimate: ") and want in first
    code, out, err = run_lab(*argv, "--json", "--lang", "vi")
    assert code == 0, err
    report = json.loads(out)  # stdout is the JSON alone
    assert report["estimate"]["counts"]["plans"] == 36 and report["estimate"]["counts"]["request_rounds"] == 90
    lines = err.splitlines()
    assert lines[0].startswith("ước tính: 2 mức tải R = 1 … 4") and "36 vòng mô phỏng" in lines[0]
    assert "90/90" in err  # the bar's last state


def test_serve_prints_its_estimate_first_and_its_progress_on_stderr(served_model, tmp_path):
    path = prompts_file(tmp_path, PROMPTS)
    argv = ["serve", "--prompts-file", str(path), "--requests", "3", "--max-new-tokens", "8"]
    code, out, err = run_lab(*argv, "--json")
    assert code == 0, err
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    n = len(PROMPTS)
    per = -(-7 // 3.5)  # ⌈(8 − 1) / τ⌉ rounds a request at τ = 3.5
    drafts = int(n * per)
    line = err.splitlines()[0]
    assert line.startswith(f"estimate: {n} prompts × 8 new tokens, R = 3 in flight → ≤ {n} prefill forwards")
    assert f"≈ {drafts} draft passes and ≈ {-(-drafts // 3)} verify forwards" in line
    assert summary["estimate"]["counts"]["prefills"] == n == len(rows) and 1 <= summary["prefill_forwards"] <= n
    assert f"{n * 8}/{n * 8}" in err  # the bar counted every new token
    code, out, err = run_lab(*argv, "--lang", "vi")
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"ước tính: {n} prompt × 8 token mới")
    assert out.splitlines()[1] == "serve · chính sách dspark · R = 3"
    assert sum(line.startswith("#") for line in out.splitlines()) == n  # a line per request as it finished


def test_profile_sps_prints_its_estimate_first(served_model, tmp_path):
    out_path = str(tmp_path / "t.json")
    code, out, err = run_lab("profile", "--sps", "--batch-tokens", "1,6,12", "--reps", "2", "--out", out_path, "--json")
    assert code == 0, err
    report = json.loads(out)
    line = err.splitlines()[0]
    assert line.startswith("estimate: 3 sizes B = 1 … 12, one at a time, 1 warm-up + 2 reps each")
    assert "3 prefill forwards and 9 verify forwards over 57 batch tokens" in line  # (1 + 6 + 12) × 3
    assert report["estimate"]["counts"]["forwards"] == 9 and "57/57" in err


# ---- the summary's parts ---------------------------------------------------------------------------------------
def test_the_scheduler_time_sample_is_bounded_and_exact_while_small():
    r = Reservoir(size=100)
    for x in range(51):
        r.add(float(x))
    assert r.median() == 25.0  # every value kept: the exact (upper) median
    for x in range(10_000):
        r.add(float(x))
    assert len(r.values) == 100 and r.seen == 10_051
    assert Reservoir().median() is None


# ==== The presenter's server ========================================================================================
BOUND_S = 60.0  # "it finishes": far beyond what any of these waits takes on a loaded machine
PAGE = "<!doctype html><p>presenter</p>"


def no_model(*args, **kwargs):
    pytest.fail("ran the model on bad input")


@pytest.fixture
def serve(monkeypatch) -> Iterator:
    """serve(page) → a running presenter server on 127.0.0.1 with a 0.5 s connection timeout; shut down after."""
    monkeypatch.setattr(presenter, "CONNECTION_TIMEOUT_S", 0.5)
    servers = []

    def start(page: str = PAGE):
        servers.append(presenter.serve_in_thread(page))
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def connect(server, payload: bytes = b"") -> socket.socket:
    sock = socket.create_connection(server.server_address[:2], timeout=BOUND_S)
    if payload:
        sock.sendall(payload)
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (BOUND_S of silence fails the test)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def still_alive(threads: list[threading.Thread]) -> list[threading.Thread]:
    for t in threads:
        t.join(BOUND_S)
    return [t for t in threads if t.is_alive()]


# ---- --host and --public ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["python -m lab.present", "dspark-lab present"])
def test_present_empty_host_is_refused(entry, capsys, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "build_data", no_model)
    rc = presenter.main(["--host", ""]) if entry.startswith("python") else lab_cli.main(["present", "--host", ""])
    assert rc == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host") and "loopback" in lines[0], err
    assert out == ""


def test_present_every_interface_is_refused_without_public(capsys, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "build_data", no_model)
    assert presenter.main(["--host", "0.0.0.0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host = '0.0.0.0'") and "--public" in lines[0]
    for host in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.1"):
        with pytest.raises(ValueError, match="^--host"):
            presenter.check_host(host, public=False)
        assert presenter.check_host(host, public=True) is True  # allowed, and main_present warns


def test_present_loopback_hosts_are_allowed_and_names_are_not_looked_up(monkeypatch) -> None:
    for host in ("127.0.0.1", "127.4.5.6", "::1", "localhost"):
        assert presenter.check_host(host, public=False) is False  # nothing to warn about
        assert presenter.check_host(host, public=True) is False
    for host in ("example.com", "my-laptop", " 127.0.0.1", "127.1"):
        with pytest.raises(ValueError, match=f"^--host = {host!r} is not an IP address"):
            presenter.check_host(host, public=True)
    # "localhost" is loopback only if every address it names is one
    monkeypatch.setattr(presenter.socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("192.168.1.20", 0))])
    with pytest.raises(ValueError, match="^--host = 'localhost' is not a loopback address"):
        presenter.check_host("localhost", public=False)


class FakeServer:
    """A server that is already listening on `host` (nothing is bound) and is then stopped with Ctrl-C."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.server_address = (host, 8765)
        self.closed = False

    def serve_forever(self) -> None:
        raise KeyboardInterrupt

    def server_close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_server(monkeypatch) -> Iterator[list[FakeServer]]:
    """main_present with a fake page and FakeServer: no model run, no socket."""
    made: list[FakeServer] = []

    def make(page: str, host: str, port: int) -> FakeServer:
        made.append(FakeServer(host))
        return made[-1]

    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: {})
    monkeypatch.setattr(presenter, "render_page", lambda data: PAGE)
    monkeypatch.setattr(presenter, "make_server", make)
    return made


@pytest.mark.parametrize("lang", ["vi", "en"])
def test_present_public_prints_one_warning_line_in_its_language(lang, fake_server, capsys) -> None:
    assert presenter.main(["--host", "0.0.0.0", "--public", "--lang", lang]) == 130
    out, err = capsys.readouterr()
    interrupted = {"vi": "đã ngắt", "en": "interrupted"}[lang]  # the boundary's word, in --lang too
    assert err.splitlines() == [presenter.PUBLIC_WARNING[lang].format(host="0.0.0.0", port=8765), interrupted]
    assert "--public" in err and "0.0.0.0" in err
    assert out.startswith("Serving the DSpark presenter at http://0.0.0.0:8765/")  # the URL stays stdout's first line
    assert fake_server[0].closed


def test_present_public_on_loopback_prints_no_warning(fake_server, capsys) -> None:
    assert presenter.main(["--public"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# ---- Ctrl-C ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["python -m lab.present", "dspark-lab present"])
def test_present_ctrl_c_is_interrupted_and_130(entry, fake_server, capsys) -> None:
    rc = presenter.main([]) if entry.startswith("python") else lab_cli.main(["present"])
    assert rc == 130
    out, err = capsys.readouterr()
    assert err == "interrupted\n"
    assert "stopped" not in out and out.startswith("Serving the DSpark presenter at http://127.0.0.1:8765/")
    assert fake_server[0].closed  # the socket is closed on the way out


# ---- timeouts, the thread bound, clients that go away ------------------------------------------------------------
@pytest.mark.parametrize(
    "payload", [b"", b"GET / HT", b"GET / HTTP/1.0\r\nHost: x\r\n"], ids=["idle", "half", "no-end"]
)
def test_present_idle_or_half_sent_connection_is_closed(payload, serve) -> None:
    server = serve()
    with connect(server, payload) as sock:
        assert read_to_end(sock) == b""  # closed by the server after its timeout, nothing answered


def test_present_many_idle_sockets_release_their_threads(serve) -> None:
    server = serve()
    before = set(threading.enumerate())
    socks = [connect(server) for _ in range(50)]
    try:
        assert all(read_to_end(s) == b"" for s in socks)
        handlers = [t for t in threading.enumerate() if t not in before]
        assert still_alive(handlers) == []
    finally:
        for s in socks:
            s.close()
    assert set(threading.enumerate()) <= before  # no thread is left from the 50 connections


def test_present_connections_beyond_the_bound_wait_for_a_free_thread(serve, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "MAX_CONNECTIONS", 2)
    server = serve()
    monkeypatch.setattr(server.RequestHandlerClass, "timeout", BOUND_S)  # the two idle ones hold their threads
    idle = [connect(server) for _ in range(2)]
    try:
        with connect(server, b"GET / HTTP/1.0\r\n\r\n") as waiting:
            waiting.settimeout(1.0)
            with pytest.raises(TimeoutError):
                waiting.recv(1)  # the third is not served while two threads are busy
            for s in idle:
                s.close()  # their handlers end (the client closed): the third gets a thread
            waiting.settimeout(BOUND_S)
            reply = read_to_end(waiting)
    finally:
        for s in idle:
            s.close()
    assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(PAGE.encode())


@pytest.mark.parametrize("how", ["reset", "stops-reading"])
def test_present_client_gone_mid_response_prints_no_traceback(how, serve, capsys) -> None:
    big = "x" * (32 << 20)  # far beyond what the socket buffers hold: the server is still writing when it goes
    server = serve(big)
    before = set(threading.enumerate())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(BOUND_S)
    sock.connect(server.server_address[:2])
    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
    assert sock.recv(16).startswith(b"HTTP/1.0 200")  # the handler thread runs and is writing the page
    handlers = [t for t in threading.enumerate() if t not in before]
    if how == "reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
        sock.close()
        assert still_alive(handlers) == []
    else:
        assert still_alive(handlers) == []  # it stopped reading: the write times out and the thread ends
        sock.close()
    out, err = capsys.readouterr()
    assert err == "" and out == "", err  # no traceback, no line at all


@pytest.mark.parametrize("gone", [BrokenPipeError, ConnectionResetError, TimeoutError])
def test_present_server_is_quiet_only_about_clients_that_went_away(gone, serve, capsys) -> None:
    """handle_error, where socketserver sends what a handler raised (a reset while reading the request, too)."""
    server = serve()
    for error, printed in ((gone("the client went away"), False), (RuntimeError("a bug in the server"), True)):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
        err = capsys.readouterr().err
        assert ("Traceback" in err and "a bug in the server" in err) if printed else err == "", err


def test_present_serves_on_ipv6_loopback(serve) -> None:
    try:
        server = presenter.make_server(PAGE, "::1", 0)
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    try:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        assert presenter.url_of(server).startswith("http://[::1]:")
        with socket.create_connection(server.server_address[:2], timeout=BOUND_S) as sock:
            sock.sendall(b"GET /nothing HTTP/1.0\r\n\r\n")
            assert read_to_end(sock).startswith(b"HTTP/1.0 404")
    finally:
        server.shutdown()
        server.server_close()
