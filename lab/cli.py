"""`dspark-lab`: the ten steps of DeepSeek-V4.1-Flash in the terminal, and every command of the lab.

dspark-lab tokenize TEXT             a text through the lab's byte-level BPE: ids and token pieces
dspark-lab walk                      all steps on the tiny `lab` model (English; --lang vi for Vietnamese)
dspark-lab walk --step 2A --lang vi  one step, in Vietnamese
dspark-lab inspect --preset flash    the real-size model from its config: parameters and KV budget
dspark-lab generate                  plain vs speculative decoding, with the accept/reject strip
dspark-lab profile                   parity, tap mix, acceptance by position, verify cost (p50/p95/p99)
dspark-lab profile --sps             SPS(B): verify steps/s vs batch tokens on this machine, saved as a cost table
dspark-lab schedule                  load simulation of the verify-length policies for R = 1 … 256 requests
dspark-lab serve                     R requests decoded concurrently with confidence-scheduled verification
dspark-lab present                   the presenter deck for a class
dspark-lab data                      the real-text corpus: each source's sizes, MIX weight and licence
dspark-lab train target|draft|all    train the tiny target, one drafter against it, or the whole shipped set
dspark-lab eval                      τ, acceptance per position and tokens/s of the trained drafters
dspark-lab checkpoint export|headers the official checkpoint layout
dspark-lab paper                     the DSpark paper in miniature: Table 1, Figures 2–8, Appendix A (runs/paper)

Each group of commands owns its parser, its option checks and its handler (screens/cli.py, serving/cli.py,
training/cli.py, evaluation/cli.py, realscale/cli.py, paper/cli.py, present/presenter.py); this module puts them
together, runs the checks every command shares, and is the one error boundary: every error is one line that names
the option and what is allowed. Help and refusals follow --lang: the parsers are built in the language argv
names (lab/options.py `help_lang`, texts in lab/lang/<lang>/cli.toml) and a refusal's English words are translated
here (`error_line`; words without a translation yet stay English). Exit codes: 0 done · 2 bad input (also a path
that cannot be read or written) · 130 interrupted (Ctrl-C: one line, no traceback; every worker process stopped) ·
143 terminated (SIGTERM: the same, `interrupted`) · 141 the reader closed the pipe (`dspark-lab walk --json | head`):
a quiet stop, 128 + SIGPIPE, what `cat` or `seq` report there. --json output is strict JSON: a NaN or ±inf becomes
null and is listed under "non_finite".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from .evaluation import cli as evaluation_cli
from .options import Help, Parser, help_lang, translate, wrap
from .paper import cli as paper_cli
from .present import presenter
from .realscale import cli as realscale_cli
from .realtext import cli as realtext_cli
from .screens import cli as lesson_cli
from .screens.cli import CheckpointProblems
from .serving import cli as serving_cli
from .text import LANGS, check_lang, lang_table
from .training import cli as training_cli

# the groups, in the order `--help` lists their commands
GROUPS = (realtext_cli, lesson_cli, serving_cli, training_cli, evaluation_cli, realscale_cli, paper_cli)
COMMANDS = (
    "tokenize",
    "walk",
    "inspect",
    "generate",
    "profile",
    "schedule",
    "serve",
    "present",
    "data",
    "train",
    "eval",
    "checkpoint",
    "paper",
)


def parser(lang: str = "en") -> argparse.ArgumentParser:
    """Every command's parser, its help in `lang` (`help_lang` reads it from the command line first)."""
    h = Help("top", lang)
    p = Parser(prog="dspark-lab", description=wrap(h("description")), epilog=h("examples"), lang=lang)
    words = Help("argparse", lang)
    sub = p.add_subparsers(dest="command", metavar=words("command"), help=words("commands"))
    realtext_cli.add_parsers(sub, lang)
    lesson_cli.add_parsers(sub, lang)
    serving_cli.add_parsers(sub, lang)
    presenter.add_present_parser(sub, lang)
    training_cli.add_parsers(sub, lang)
    evaluation_cli.add_parsers(sub, lang)
    realscale_cli.add_parsers(sub, lang)
    paper_cli.add_parsers(sub, lang)
    return p


MODEL_COMMANDS = ("walk", "generate", "profile", "serve")  # what reads a model from --checkpoint (open_checkpoint)


def group_of(args: argparse.Namespace) -> Any:
    """The group that owns this command (`profile --sps` is serving's: the SPS(B) cost table)."""
    if args.command == "profile" and args.sps:
        return serving_cli
    return next(g for g in GROUPS if args.command in g.COMMANDS)


def check_args(args: argparse.Namespace) -> None:
    """The checks every command shares (seed, temperature, ℓ, device and dtype, --checkpoint), then its group's,
    before anything is built, run or written. The ranges that depend on the model come from its config."""
    from dspark_mini import get_config  # torch: only once a command runs, not for --help
    from dspark_mini.presets import PRESETS
    from dspark_mini.validate import check_seed, check_temperature, check_verify_len

    preset = getattr(args, "preset", "lab")
    if preset not in PRESETS:  # named as the option the user typed, not as a config field
        text = lang_table("messages", "cli")["preset"][check_lang(args.lang)]
        raise ValueError(text.format(p=preset, a=", ".join(PRESETS)))
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is not None:
        if not Path(checkpoint).is_dir():
            raise ValueError(
                f"--checkpoint = {checkpoint!r} is not a folder: allowed a folder written by `dspark-lab checkpoint "
                "export`"
            )
        if getattr(args, "weights", None) not in (None, "trained"):
            raise ValueError("--checkpoint and --weights untrained exclude each other: allowed one model source")
    cfg = get_config(preset)  # the config every later check reads: a checkpoint's own when a model is read from one
    if checkpoint is not None and args.command in MODEL_COMMANDS:
        from .realscale.export import read_config

        cfg = read_config(checkpoint)[0]  # config.json only, bounded; a missing one is named here, before any work
    if hasattr(args, "seed"):  # every command but tokenize
        check_seed(args.seed, "--seed")
    if getattr(args, "temperature", None) is not None:
        check_temperature(args.temperature, "--temperature")
    if getattr(args, "verify_len", None) is not None:
        check_verify_len(args.verify_len, cfg.dspark_block_size, "--verify-len")
    if hasattr(args, "dtype"):  # generate, profile, serve
        from dspark_mini.device import check_device, check_dtype

        check_device(args.device)
        check_dtype(args.dtype)
    if hasattr(args, "weights"):  # the default: trained for `lab` (or with --checkpoint), the seeded init otherwise
        from .runtime.run import preset_weights

        args.weights = preset_weights(getattr(args, "preset", "lab"), args.weights, checkpoint)
    if args.command != "present":  # the presenter checks its own options (also as `python -m lab.present`)
        group_of(args).check(args, cfg)


def error_line(args: argparse.Namespace, e: Exception) -> str:
    """The error as one line in the command's --lang (`translate`: the English words of the model package's
    refusals; words without a translation yet stay English); one about the path of --out, --target or
    --weights-dir (a missing checkpoint, a file where a folder should be) starts with that option, unless the
    message names an option already."""
    return translate(english_error_line(args, e), refusal_lang(args))


def refusal_lang(args: argparse.Namespace) -> str:
    """The language refusals are written in: --lang when it is one of LANGS, else English (an unknown --lang is
    itself the refusal, and cannot say which language it wanted)."""
    lang = getattr(args, "lang", "en")
    key = lang.strip().lower() if isinstance(lang, str) else lang
    return key if key in LANGS else "en"


def english_error_line(args: argparse.Namespace, e: Exception) -> str:
    """The error as one line, as the lab writes it (English, or the language a module already wrote it in)."""
    filename = getattr(e, "filename", None)
    strerror = getattr(e, "strerror", None)
    message = f"{strerror}: {filename!r}" if strerror and filename else str(e)
    if message.startswith("--"):
        return message
    draft = getattr(args, "what", None) == "draft"
    dests = {
        "checkpoint": ["out"],
        "data": ["out"],
        "eval": ["weights_dir"],
        "paper": ["out", "docs"],
        "train": ["out", "target"] if draft else ["out"],
        "present": ["out"],
        "profile": ["out"],
        "schedule": ["streams", "sps_table"],
        "serve": ["prompts_file", "sps_table"],
    }
    for dest in dests.get(args.command, []):
        value = getattr(args, dest, None)
        if value and (str(Path(value)) in f"{e} {filename or ''}" or (filename and str(filename) in str(value))):
            return f"--{dest.replace('_', '-')} = {str(value)!r}: {message}"
    return message


def closed_pipe() -> int:
    """The reader of stdout went away (`… | head`): stop quietly with 141 (128 + SIGPIPE, as `cat` would). stdout
    now points at /dev/null, so the interpreter's last flush cannot fail again (Python docs, "Note on SIGPIPE")."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor (a test's capture): nothing to redirect
        pass
    return 141


def stdout_console() -> Any:
    """rich's Console, except that a closed pipe raises BrokenPipeError for main() (rich itself would exit 1)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole()


# ---- the process's own command line (`main()` without argv) ----------------------------------------------------
# Both helpers below apply only there: a caller's process (a test session running many commands) is left as it was.
def freeze_startup_objects() -> None:
    """Import torch, then take every object alive now out of the cyclic garbage collector's reach (`gc.freeze`).

    torch's import leaves ≈ 165,000 tracked objects (modules, functions, classes) that live until the process
    ends; without this, every full collection the command triggers (during its own imports, while it builds
    models) and the ones at interpreter exit walk all of them again, for nothing. Collections still run, over
    the objects the command itself makes."""
    import gc

    import torch  # noqa: F401 - its import makes the objects to freeze

    gc.freeze()


def leave(rc: int) -> NoReturn:
    """End the process with exit code `rc` now that the outcome is printed, without the interpreter's teardown
    (freeing every module and object one by one, torch's included: ≈ 0.15 s that a command's user only waits
    for). Nothing is lost: stdout and stderr are flushed first, every file a command writes is closed by then,
    the lab registers no exit handlers and uses none of what torch's (logging, DataLoader workers) would finish;
    multiprocessing's, which the worker pools need, is run here (`finish_multiprocessing`).
    lab/runtime/torchrun.py leaves the same way."""
    finish_multiprocessing()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, or a stream already closed: nothing to deliver
            pass
    os._exit(rc)


def finish_multiprocessing() -> None:
    """What multiprocessing's own exit handler does, when a command used worker processes (`paper`, `train all`):
    its temporary folder (pymp-*, where the socket that passes tensors' file descriptors to the workers lives) is
    removed and any child left is waited for. `leave` skips the interpreter's exit handlers, so it runs this one."""
    util = sys.modules.get("multiprocessing.util")
    finish = getattr(util, "_exit_function", None)
    if finish is not None:
        try:
            finish()
        except Exception:  # the outcome is printed already: a failed clean-up must not change the exit code
            pass


def main(argv: list[str] | None = None) -> int:
    """The one error boundary: bad input → `error: …` and 2, Ctrl-C → `interrupted` and 130, SIGTERM →
    `interrupted` and 143, closed pipe → 141.

    argv None: the process's own command line (`dspark-lab …`, `python -m lab …`): the objects of torch's import
    are frozen before the command runs and the process ends here with the exit code (`freeze_startup_objects`,
    `leave`); with argv (a test, a notebook) it returns the exit code and changes nothing of the process."""
    lang = help_lang(argv)  # argparse writes the help before it parses: build it in --lang's language
    args = parser(lang).parse_args(argv)
    if args.command is None:
        parser(lang).print_help()
        return 0
    if argv is None:
        freeze_startup_objects()
    from rich.console import Console
    from rich.markup import escape

    from .runtime.distributed import finish_distributed, quiet_other_ranks

    quiet_other_ranks()  # under torchrun rank 0 prints; every rank's errors still reach stderr
    rc = 2
    try:
        rc = boundary(args, Console(stderr=True), escape)
    finally:
        finish_distributed(barrier=rc == 0)  # leave the process group (if torchrun made one)
    if argv is None:
        leave(rc)
    return rc


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, a scheduler stopping the job), raised where the command runs: every cleanup that Ctrl-C
    gets (workers stopped, temporary files removed) runs for it too; the boundary answers 143 (128 + SIGTERM)."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread for the block; the previous handler is back afterwards. Off
    the main thread (where no handler can be set) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def boundary(args: argparse.Namespace, err: Any, escape: Any) -> int:
    """Run the subcommand and turn what went wrong into one line and an exit code."""
    try:
        with sigterm_as_interrupt():
            run(args, stdout_console())
            sys.stdout.flush()  # a closed pipe shows up here, inside the boundary, not at the interpreter's exit
    except Terminated:
        print(Help("refusal", refusal_lang(args))("interrupted"), file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(Help("refusal", refusal_lang(args))("interrupted"), file=sys.stderr)
        return 130
    except CheckpointProblems as e:  # the report was printed: the folder does not fit its config
        err.print(f"[red]✗[/red] {escape(translate(str(e), refusal_lang(args)))}", soft_wrap=True)
        return 1
    except BrokenPipeError:
        return closed_pipe()
    except (OSError, ValueError, TypeError) as e:
        # bad input: ConfigError, TokenizerError and CheckpointError are ValueErrors; an OSError is a missing file,
        # a file where a folder should be or a path that cannot be written
        prefix = Help("refusal", refusal_lang(args))("error")
        err.print(f"[red]{escape(prefix)}[/red] {escape(error_line(args, e))}", soft_wrap=True)
        return 2
    return 0


def run(args: argparse.Namespace, console: Any) -> None:
    """One subcommand, its options already parsed: the shared checks, then its group's handler."""
    import torch  # the model runs from here on

    from .text import check_lang

    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    try:
        lang = check_lang(args.lang)
    except ValueError as e:  # the one line names the option, as every other refusal does
        raise ValueError(f"--lang: {e}") from None
    check_args(args)
    if args.command == "present":
        presenter.main_present(args)
    else:
        group_of(args).run(args, console, lang)


if __name__ == "__main__":
    sys.exit(main())
