"""The official-layout path from the command line: export, inspect --checkpoint, --checkpoint on the runs."""

from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.options import CHECKPOINT_STYLES
from lab.realscale.layout import STYLES


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "lab"
    assert main(["checkpoint", "export", "--out", str(out), "--shards", "3", "--json"]) == 0
    return out


def run_json(capsys, argv: list[str]) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    return code, (json.loads(out) if code == 0 or out.strip().startswith("{") else {})


def test_the_cli_knows_every_style_without_importing_torch() -> None:
    assert tuple(CHECKPOINT_STYLES) == tuple(STYLES)


def test_export_then_inspect_reports_no_problems(exported, capsys) -> None:
    code, report = run_json(capsys, ["inspect", "--checkpoint", str(exported), "--json"])
    assert code == 0 and report["problems"] == [] and report["n_shards"] == 3
    assert sum(g["tensors"] for g in report["groups"].values()) == report["n_tensors"] > 0
    assert (exported / "model.safetensors.index.json").is_file() and (exported / "config.json").is_file()


def test_generate_on_the_export_equals_the_shipped_weights(exported, capsys) -> None:
    argv = ["generate", "--max-new-tokens", "24", "--json"]
    _, shipped = run_json(capsys, argv)
    _, back = run_json(capsys, argv + ["--checkpoint", str(exported)])
    assert back["plain"]["tokens"] == shipped["plain"]["tokens"]
    assert back["speculative"]["tokens"] == shipped["speculative"]["tokens"] == shipped["plain"]["tokens"]


def test_walk_and_profile_run_on_the_export(exported, capsys) -> None:
    code, walk = run_json(capsys, ["walk", "--step", "6B", "--json", "--checkpoint", str(exported)])
    assert code == 0 and walk["weights"].startswith("checkpoint")
    assert all(c["ok"] for c in walk["steps"]["6B"]["checks"])


def test_a_tampered_export_fails_inspect_with_exit_1(exported, tmp_path, capsys) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(exported, bad)
    index = json.loads((bad / "model.safetensors.index.json").read_text())
    name = sorted(index["weight_map"])[0]
    del index["weight_map"][name]
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))
    code = main(["inspect", "--checkpoint", str(bad)])
    captured = capsys.readouterr()
    assert code == 1 and "problem" in captured.err and "Traceback" not in captured.err


def test_header_only_flash_set_reads_as_the_real_checkpoint_without_data(tmp_path, capsys) -> None:
    out = tmp_path / "flash"
    code, report = run_json(capsys, ["checkpoint", "headers", "--out", str(out), "--json"])
    assert code == 0 and report["problems"] == [] and report["header_only_shards"] == 48
    assert round(report["total_gib"], 2) == 474.34  # the real checkpoint's 475.24 GiB without the vision tower
    assert sum(p.stat().st_size for p in out.iterdir()) < 64 * 2**20  # headers only


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["generate", "--checkpoint", "/nonexistent/ckpt"], "--checkpoint"),
        (["walk", "--checkpoint", "/nonexistent/ckpt"], "--checkpoint"),
        (["generate", "--checkpoint", ".", "--weights", "untrained"], "--checkpoint and --weights"),
        (["checkpoint", "export", "--out", "{tmp}/x", "--shards", "0"], "--shards = 0 is invalid"),
        (["checkpoint", "export", "--out", "{file}"], "--out"),
        (["inspect", "--checkpoint", "{tmp}/missing"], "missing"),
    ],
)
def test_bad_checkpoint_input_is_one_clear_line(argv, needle, tmp_path, capsys) -> None:
    f = tmp_path / "a-file"
    f.write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{file}", str(f)) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
