"""Nothing lost (issue 19, items 1–2): atomic writes, folders swapped in whole, folders the lab owns.

Every case asserts the exit code (or the error), the one line naming the option or the path, and the files on disk
before and after (sha256 of every file). A full disk is a small tmpfs mounted for the test (root only, as CI runs;
skipped otherwise with the reason) and filled to the last byte; an interruption is injected at a fixed point (the
second shard's write), or a real subprocess is killed once it has written a marker file — never after a delay.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import dspark_mini.checkpoint as ckpt
from dspark_mini.checkpoint import load_model, save
from dspark_mini.files import OWNER, WriteError, atomic_path, folder_swap, read_owner, write_atomic
from lab.cli import main
from lab.present import presenter
from lab.serving import profile_sps as profile_sps_mod
from lab.serving.sps import load_table
from lab.training import rebuild as train_all_mod
from lab.training.rebuild import check_shipped
from lab.weights import DRAFTERS, WEIGHTS_DIR

REPO = Path(__file__).resolve().parents[1]
SHIPPED_SPS = REPO / "lab" / "serving" / "data" / "sps_lab_cpu.json"


# ---- helpers -------------------------------------------------------------------------------------------------------
def tree(folder: Path) -> dict[str, str]:
    """Every path under `folder` (hidden ones too) → the sha256 of its bytes ("dir" for a folder)."""
    return {
        str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
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


def export(capsys, out: Path, *extra: str) -> tuple[int, str]:
    code, _, err = run(capsys, ["checkpoint", "export", "--out", str(out), "--json", *extra])
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
    code, _, err = run(capsys, ["profile", "--sps", "--out", str(path), "--json"])
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
    code, _, err = run(capsys, ["present", "--out", str(site)])
    line = one_line(err)
    assert code == 2 and f"--out = {str(site)!r}" in line and "No space left on device" in line
    assert "the previous folder is unchanged" in line
    assert tree(disk) == before  # index.html and plotly.min.js whole, no partial folder beside them


def test_export_on_a_full_disk_keeps_the_previous_export(tmpfs, capsys):
    disk = tmpfs("16m")
    out = disk / "ckpt"
    assert export(capsys, out, "--shards", "3")[0] == 0
    fill(disk)
    before = tree(disk)
    code, err = export(capsys, out, "--shards", "3", "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "No space left on device" in line
    assert "the previous folder is unchanged" in line
    assert tree(disk) == before
    (disk / "filler").unlink()  # room again: the next --force works
    assert export(capsys, out, "--shards", "2", "--force")[0] == 0


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
    disk = tmpfs("24m")
    out = shutil.copytree(WEIGHTS_DIR, disk / "weights")
    model = load_model(WEIGHTS_DIR / "target.safetensors")
    fake_phases(monkeypatch, lambda work: save(model, work / "target.safetensors", part="target"))  # the lab's writer
    fill(disk)
    before = tree(disk)
    code, _, err = run(capsys, ["train", "all", "--quick", "--out", str(out), "--json"])
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
    code, out, err = run(capsys, ["train", "all", "--quick", "--out", str(link), "--json"])
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
    code, err = export(capsys, folder, "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(folder)!r}" in line and "not a folder the lab wrote" in line
    assert f"no {OWNER}" in line and "nothing was changed" in line
    assert tree(tmp_path) == before  # model-best-of-run3.safetensors, config.json … all still there


def test_export_force_over_its_own_export_replaces_exactly_its_files(tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert export(capsys, out, "--shards", "3")[0] == 0
    assert sorted(read_owner(out)["files"]) == sorted(p.name for p in out.iterdir())
    code, err = export(capsys, out, "--shards", "3")  # without --force: refused, unchanged
    before = tree(tmp_path)
    assert code == 2 and "is not empty" in one_line(err) and "--force" in err and tree(tmp_path) == before
    assert export(capsys, out, "--shards", "2", "--force")[0] == 0
    names = sorted(p.name for p in out.iterdir())
    assert not any("of-00003" in n for n in names)  # the old export's shards are gone (its manifest listed them)
    assert names == sorted(read_owner(out)["files"]) and read_owner(out)["what"] == "export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no partial or old folder beside it


def test_export_force_keeps_a_file_the_user_added_by_refusing(tmp_path, capsys):
    out = tmp_path / "ckpt"
    assert export(capsys, out, "--shards", "2")[0] == 0
    (out / "notes.txt").write_text("my notes about this run\n")
    before = tree(tmp_path)
    code, err = export(capsys, out, "--force")
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "'notes.txt'" in line and "did not write" in line
    assert tree(tmp_path) == before


def test_headers_force_over_a_foreign_config_json_is_refused(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"hidden_size": 4096, "mine": true}\n')
    before = tree(tmp_path)
    code, _, err = run(capsys, ["checkpoint", "headers", "--out", str(out), "--force", "--json"])
    line = one_line(err)
    assert code == 2 and f"--out = {str(out)!r}" in line and "'config.json'" in line and "not a folder" in line
    assert tree(tmp_path) == before


def test_a_forged_or_hostile_owner_manifest_owns_nothing(tmp_path, capsys):
    folder = hf_folder(tmp_path / "hf")
    (folder / OWNER).write_text("[" * 100_000 + "]" * 100_000)  # deeply nested: not the lab's manifest
    before = tree(tmp_path)
    code, err = export(capsys, folder, "--force")
    assert code == 2 and "not a folder the lab wrote" in one_line(err) and tree(tmp_path) == before
    (folder / OWNER).write_text(json.dumps({"written_by": "dspark-lab", "what": "site", "files": []}))
    code, err = export(capsys, folder, "--force")  # the lab's, but a site: an export never replaces it
    assert code == 2 and "says 'site'" in one_line(err)


def test_data_and_present_out_refuse_a_folder_the_lab_did_not_write(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "math.txt").write_text("my own math notes\n")
    before = tree(tmp_path)
    code, _, err = run(capsys, ["data", "--out", str(folder), "--lines", "5"])
    assert code == 2 and f"--out = {str(folder)!r}" in one_line(err) and "'math.txt'" in err
    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: pytest.fail("ran the model for a refused --out"))
    code, _, err = run(capsys, ["present", "--out", str(folder)])
    assert code == 2 and f"--out = {str(folder)!r}" in one_line(err)
    assert tree(tmp_path) == before
    assert run(capsys, ["data", "--out", str(tmp_path / "corpus"), "--lines", "5", "--json"])[0] == 0
    assert run(capsys, ["data", "--out", str(tmp_path / "corpus"), "--lines", "6", "--json"])[0] == 0  # its own


# ---- an interrupted export -----------------------------------------------------------------------------------------
def test_export_interrupted_in_shard_2_keeps_the_previous_export(tmp_path, capsys, monkeypatch):
    out = tmp_path / "ckpt"
    assert export(capsys, out, "--shards", "3")[0] == 0
    before = tree(tmp_path)
    real_save, calls = ckpt.save_file, []

    def ctrl_c_in_shard_2(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            Path(filename).write_bytes(b"\x10\0\0\0\0\0\0\0{half")  # half a shard, then Ctrl-C
            raise KeyboardInterrupt
        return real_save(tensors, filename, metadata=metadata)

    monkeypatch.setattr(ckpt, "save_file", ctrl_c_in_shard_2)
    code, err = export(capsys, out, "--shards", "3", "--force")
    assert code == 130 and one_line(err) == "interrupted" and len(calls) == 2
    assert tree(tmp_path) == before  # byte-identical, no .tmp, no partial shard, no partial folder beside it
    monkeypatch.setattr(ckpt, "save_file", real_save)
    assert export(capsys, out, "--shards", "3", "--force")[0] == 0  # a second --force works


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
        while True:
            time.sleep(60)
ckpt.save_file = stall_in_shard_2
sys.exit(main(["checkpoint", "export", "--out", out, "--shards", "3", "--force", "--json"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_export_killed_midway_keeps_the_previous_export(tmp_path, capsys, sig):
    out = tmp_path / "ckpt"
    assert export(capsys, out, "--shards", "3")[0] == 0
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
    assert export(capsys, out, "--shards", "2", "--force")[0] == 0  # a second --force then works
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
