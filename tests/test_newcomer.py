"""A newcomer's first hour: every command the lab tells them to type works as printed from the repository root.

The walk's closing lines (what `make lab` ends with) are run literally — each command with `--help` added, or
`make -n` for a make target — and the quick starts (README.md, README.vi.md, docs/install.md) say how the
virtualenv's `dspark-lab` is reached; `make test` lists every skip with its reason.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lab.screens import render
from lab.screens.render import lab_command, next_lines
from lab.text import LANGS

ROOT = Path(__file__).resolve().parents[1]
HAS_MAKE = shutil.which("make") is not None
# a command inside a closing line: the lab's own (as lab_command types it), a make target, or sourcing activate
MAKE = re.compile(r"make [a-z-]+(?: [A-Z_]+=\w+)*")


def commands(lang: str) -> list[list[str]]:
    """Every command the closing lines print, split as a shell splits it."""
    cli, activate = lab_command(ROOT)
    found = []
    for line in next_lines(lang, ROOT):
        for part in line.split(" · "):
            part = re.sub(r"^[^:]*: ", "", part.strip())  # "next: …", "in Vietnamese: …"
            part = re.sub(r"\s*\(.*?\)$", "", part)  # the "(what it does)" after a command
            if part.startswith(cli + " ") or MAKE.fullmatch(part):
                found.append(shlex.split(part))
        if activate is not None and f"source {activate}" in line:
            found.append(["source", *shlex.split(activate)])
    return found


def resolves(word: str) -> bool:
    """The executable a shell at the repository root runs for `word`: a path there, or a name on PATH."""
    if "/" in word:
        path = Path(word) if Path(word).is_absolute() else ROOT / word
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(word) is not None


@pytest.mark.parametrize("lang", LANGS)
def test_the_walks_closing_commands_run_as_printed(lang) -> None:
    found = commands(lang)
    cli = shlex.split(lab_command(ROOT)[0])
    lab_lines = [c for c in found if c[: len(cli)] == cli]
    assert len(lab_lines) >= 4 and any(c[0] == "make" for c in found), found
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the lab of this checkout, whichever install the script is
    for argv in found:
        if argv[0] == "source":
            assert (ROOT / argv[1]).is_file() or Path(argv[1]).is_file(), argv
            continue
        assert resolves(argv[0]), f"{argv[0]!r} is neither a file at the repository root nor on PATH"
        if argv[0] == "make":
            if not HAS_MAKE:
                continue
            done = subprocess.run(["make", "-n", "-o", "install", *argv[1:]], cwd=ROOT, capture_output=True, text=True)
        else:
            done = subprocess.run([*argv, "--help"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr[-600:]}"


def fake_venv(tmp_path: Path) -> Path:
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "dspark-lab"
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bindir / "activate").write_text("")
    return bindir


def test_a_fresh_clone_is_told_the_venv_path_and_how_to_activate(tmp_path, monkeypatch) -> None:
    """`make lab` in a fresh clone: the script is in .venv/bin, not on PATH → `.venv/bin/dspark-lab` and activate."""
    bindir = fake_venv(tmp_path)
    monkeypatch.setattr(render.sysconfig, "get_path", lambda name: str(bindir))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert lab_command(tmp_path) == (".venv/bin/dspark-lab", ".venv/bin/activate")
    for lang in LANGS:
        first, second = next_lines(lang, tmp_path)
        assert ".venv/bin/dspark-lab walk" in first and "source .venv/bin/activate" in second
    # outside the clone: the absolute path, which works from any folder
    (tmp_path / "elsewhere").mkdir()
    assert lab_command(tmp_path / "elsewhere")[0] == shlex.quote(str(bindir / "dspark-lab"))


def test_an_active_venv_is_told_plain_dspark_lab(tmp_path, monkeypatch) -> None:
    bindir = fake_venv(tmp_path)
    monkeypatch.setattr(render.sysconfig, "get_path", lambda name: str(bindir))
    monkeypatch.setenv("PATH", str(bindir))
    assert lab_command(tmp_path) == ("dspark-lab", None)
    assert len(next_lines("en", tmp_path)) == 1 and "next: dspark-lab walk --step 6B" in next_lines("en", tmp_path)[0]


def test_without_an_installed_script_the_module_is_named(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(render.sysconfig, "get_path", lambda name: str(tmp_path / "nothing"))
    cli, activate = lab_command(tmp_path)
    assert cli.endswith(" -m lab") and activate is None and resolves(shlex.split(cli)[0])


QUICK_STARTS = ("README.md", "README.vi.md", "docs/install.md")


@pytest.mark.parametrize("name", QUICK_STARTS)
def test_the_quick_starts_say_how_the_venv_command_is_reached(name) -> None:
    """Their `dspark-lab …` lines assume the venv is active: each page says so, and names both ways."""
    text = (ROOT / name).read_text(encoding="utf-8")
    assert "`.venv/bin/dspark-lab" in text and "source .venv/bin/activate" in text
    for line in re.findall(r"```bash\n(.*?)```", text, re.S):
        for cmd in line.splitlines():
            word = cmd.split("#")[0].split()
            assert not word or word[0] in ("make", "dspark-lab", "source", "python3", ".venv/bin/pip"), cmd


@pytest.mark.skipif(not HAS_MAKE, reason="no make on this machine")
def test_the_quick_starts_make_targets_exist() -> None:
    for target in ("lab", "test", "install", "notebooks", "present", "clean-venv"):
        done = subprocess.run(["make", "-n", "-o", "install", target], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, f"make {target}: {done.stderr}"


def test_make_test_lists_every_skip_with_its_reason() -> None:
    """README's "Why some tests skip" promises the reasons in `make test`'s own output: pytest's -rs summary."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (line,) = [x for x in makefile.splitlines() if "-m pytest" in x and not x.lstrip().startswith("#")]
    assert re.search(r"\s-r\w*s", line), line
    for readme in ("README.md", "README.vi.md"):
        assert "`-rs`" in (ROOT / readme).read_text(encoding="utf-8"), readme


# ---- flash-cpu's memory: one measured figure, the walk's peak RSS in docs/flash_cpu.json --------------------------
FIGURE = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)?)\s*(?:GB|GiB)\b")
MARKER = re.compile(r"<!--n:(?P<key>[^>\s]*)-->(?P<value>.*?)<!--/n-->")
# the keys a page may quote for it: the peak, and the estimate the check before a build compares with free memory
QUOTABLE = re.compile(r"flash_cpu\.(?:\w+\.peak_rss_bytes|estimate(?:_needed_bytes|\.\w+_bytes)):gib")
# figures beside flash-cpu that are not its memory
OTHER = {
    "4 GiB": "the address-space limit of a test's child process",
    "40 GiB": "the real widths in float64, not the preset's bfloat16",
}


def places() -> list[Path]:
    """Where the lab states a figure to a reader: the pages, the notebooks' sources, the text files, the code."""
    return [
        ROOT / "README.md",
        ROOT / "README.vi.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "notebooks").glob("*.py")),
        *sorted((ROOT / "lab" / "lang").glob("*/*.toml")),
        *sorted(p for d in ("lab", "bench", "dspark_mini") for p in (ROOT / d).rglob("*.py")),
    ]


def typed_figures(text: str) -> list[str]:
    """The memory figures of each paragraph that names flash-cpu, other than the quotable markers' values."""
    found = []
    for para in re.split(r"\n[ \t]*#?[ \t]*\n", text):  # a blank line, or a blank comment line of a notebook
        if "flash-cpu" not in para and "flash_cpu" not in para:
            continue
        bare = MARKER.sub(lambda m: "" if QUOTABLE.fullmatch(m["key"]) else m["value"], para)
        found += [m[0] for m in FIGURE.finditer(bare) if m[0] not in OTHER]
    return found


def test_flash_cpus_memory_has_one_figure_everywhere() -> None:
    """No page, text file or help states flash-cpu's memory as a typed number (16 GB, ~13 GiB, ≈ 12 GB were): the
    pages quote docs/flash_cpu.json through prose markers, help and screens format it from the same file."""
    stray = {str(p.relative_to(ROOT)): figs for p in places() if (figs := typed_figures(p.read_text(encoding="utf-8")))}
    assert not stray, stray
    markers = [m["key"] for p in places() for m in MARKER.finditer(p.read_text(encoding="utf-8"))]
    assert markers.count("flash_cpu.walk.peak_rss_bytes:gib") >= 4  # README, README.vi, the notebook, reliability


def test_the_scan_finds_a_typed_figure() -> None:
    assert typed_figures("`--preset flash-cpu` runs within 16 GB") == ["16 GB"]
    assert typed_figures("flash-cpu (~13 GiB)\n\nelsewhere 8 GiB") == ["13 GiB"]
    quoted = "flash-cpu: <!--n:flash_cpu.walk.peak_rss_bytes:gib-->11.23<!--/n--> GiB"
    assert typed_figures(quoted) == []
    assert typed_figures(quoted.replace("walk.peak_rss", "walk.wall_s")) == ["11.23 GiB"]


@pytest.mark.parametrize("lang", LANGS)
def test_help_gives_the_measured_peak(lang) -> None:
    import json

    from lab.measured import flash_cpu_peak

    peak = json.loads((ROOT / "docs" / "flash_cpu.json").read_text(encoding="utf-8"))["walk"]["peak_rss_bytes"]
    number = f"{peak / 2**30:.2f}"
    assert flash_cpu_peak(lang) == (number.replace(".", ",") if lang == "vi" else number) + " GiB"
    done = subprocess.run(
        [sys.executable, "-m", "lab", "walk", "--help", "--lang", lang],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0 and flash_cpu_peak(lang) in " ".join(done.stdout.split())
    assert not FIGURE.findall(done.stdout.replace(flash_cpu_peak(lang), ""))


def test_without_the_record_the_help_names_where_it_is_measured(tmp_path) -> None:
    from lab.measured import flash_cpu_peak

    assert flash_cpu_peak("en", tmp_path / "missing.json") == "see docs/real-scale.md"
    (tmp_path / "bad.json").write_text('{"walk": {"peak_rss_bytes": "many"}}')
    assert "docs/real-scale.md" in flash_cpu_peak("vi", tmp_path / "bad.json")
