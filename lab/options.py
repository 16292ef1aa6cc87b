"""The command line's shared pieces: how a command's help reads, in which language, and the options several
commands take.

  help_lang(argv)                                   the language of the help: `--lang vi` / `--lang=vi` anywhere
                                                     in argv (the last one wins, as argparse's); anything else en
  Help(section, lang)                                the help texts of one command (lab/lang/<lang>/cli.toml)
  command(sub, h, **fmt)                             one subcommand: its description wrapped at 80 columns, its
                                                     own few examples and the exit codes below the options
  localize(parser, lang)                             argparse's own words (usage, options, -h) in `lang`
  translate(message, lang)                           a refusal's English words in `lang` (cli.toml's [phrases])
  add_seed, add_lang, add_json, add_weights, add_checkpoint, add_placement, add_temperature, add_verify_len
                                                     the options that mean the same in every command
  check_jobs(jobs, option, lang)                     worker processes this machine runs at once: its CPU cores
                                                     and free memory (MemAvailable, a cgroup's memory.max), about
                                                     MEMORY_PER_JOB each; more is refused naming the range
  worker_pool(jobs, option, lang)                    the pool those workers run in → (pool, progress queue): an
                                                     interrupt stops every worker before it goes on, a worker the
                                                     system killed is one line naming memory and `option`
Each group of commands (lesson, evaluation, serving, training, realscale, present) builds its own parsers from
these, in the language of the help, checks its own options and runs them; `lab/cli.py` only puts the groups
together. Nothing here imports torch, so `dspark-lab --help` stays fast.
"""

from __future__ import annotations

import argparse
import multiprocessing.context as mp_context
import os
import re
import signal
import string
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .text import LANGS, Texts, lang_table, lang_tables

MESSAGES = Texts(lang_table("messages", "options"), "message")  # lab/lang/<lang>/messages.toml
CLI = lang_tables("cli")  # lab/lang/<lang>/cli.toml: every help text of the command line, and a refusal's words

WIDTH = 80
# lab.realscale.layout.STYLES (a test keeps them equal; --help stays torch-free)
CHECKPOINT_STYLES = ("lab", "official")
MAX_REPS = 1000  # `profile`: timing repetitions per block size (and per batch size with --sps)


def help_lang(argv: Sequence[str] | None) -> str:
    """The language the parsers are built in: argparse writes the help before it parses, so --lang is read from
    argv first (`--lang vi`, `--lang=vi`, the last one wins; argv None: the process's own). A missing or unknown
    value gives English; the command itself still refuses an unknown one when it runs."""
    args = list(sys.argv[1:] if argv is None else argv)
    lang = "en"
    for i, arg in enumerate(args):
        if arg == "--":
            break
        value = args[i + 1] if arg == "--lang" and i + 1 < len(args) else None
        if arg.startswith("--lang="):
            value = arg.split("=", 1)[1]
        if value is not None:
            key = value.strip().lower()
            lang = key if key in LANGS else "en"
    return lang


class Help:
    """The help texts of one section of cli.toml in one language: h(key, **fmt) → the text (formatted when fmt
    is given)."""

    def __init__(self, section: str, lang: str = "en") -> None:
        if section not in CLI:
            raise ValueError(f"cli.toml has no section {section!r}: allowed {', '.join(sorted(CLI))}")
        self.section, self.lang = section, lang if lang in LANGS else "en"

    def __call__(self, key: str, **fmt: object) -> str:
        table = CLI[self.section]
        if key not in table:
            raise ValueError(f"cli.toml [{self.section}] has no text {key!r}: allowed {', '.join(table)}")
        text = table[key][self.lang]
        return text.format(**fmt) if fmt else text

    def number(self, n: int) -> str:
        """A count with thousands grouped as the language writes them: 100,000 in English, 100.000 in Vietnamese."""
        return f"{n:,}".replace(",", "." if self.lang == "vi" else ",")


def exit_codes(lang: str = "en") -> str:
    return Help("argparse", lang)("exit_codes")


EXIT_CODES = exit_codes("en")
TEMPERATURE_HELP = Help("common")("temperature")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Help at 80 columns in the parser's language; descriptions come wrapped (`wrap`), examples keep their lines."""

    lang = "en"

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH, max_help_position=32)

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        if prefix is None:
            prefix = Help("argparse", self.lang)("usage")
        super().add_usage(usage, actions, groups, prefix)


FORMATTERS = {lang: type(f"Formatter_{lang}", (Formatter,), {"lang": lang}) for lang in LANGS}


def formatter(lang: str = "en") -> type[Formatter]:
    """The formatter class of a parser whose help is in `lang` (anything but LANGS: English)."""
    return FORMATTERS.get(lang, FORMATTERS["en"])


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose own refusals (a wrong choice, a missing argument) follow the help's language:
    `lỗi:` and the words of cli.toml's [phrases] under vi; English exactly as argparse writes it under en."""

    def __init__(self, *args: Any, lang: str = "en", **kwargs: Any) -> None:
        self.lang = lang if lang in LANGS else "en"
        kwargs.setdefault("formatter_class", formatter(self.lang))
        super().__init__(*args, **kwargs)
        localize(self, self.lang)

    def error(self, message: str) -> Any:
        if self.lang == "en":
            return super().error(message)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {Help('refusal', self.lang)('error')} {translate(message, self.lang)}\n")


def localize(p: argparse.ArgumentParser, lang: str) -> argparse.ArgumentParser:
    """argparse's own words in `lang`: the section titles and the -h line (the usage prefix is the formatter's)."""
    h = Help("argparse", lang)
    p._positionals.title = h("positionals")
    p._optionals.title = h("options")
    for action in p._actions:
        if isinstance(action, argparse._HelpAction):
            action.help = h("help")
    return p


def wrap(text: str) -> str:
    """A description as paragraphs of at most 80 columns (a blank line between paragraphs is kept)."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), WIDTH) for p in text.split("\n\n"))


def command(sub: Any, h: Help, **fmt: object) -> argparse.ArgumentParser:
    """One subcommand with the lab's help layout, in h's language: the wrapped description, then its examples and
    the exit codes (cli.toml's [h.section]: help, description, examples; `fmt` fills the examples' fields)."""
    examples = h("examples", **fmt) if "examples" in CLI[h.section] else ""
    epilog = (examples.rstrip("\n") + "\n\n" if examples else "") + exit_codes(h.lang)
    return sub.add_parser(
        h.section,
        help=h("help"),
        description=wrap(h("description")),
        epilog=epilog,
        formatter_class=formatter(h.lang),
        lang=h.lang,
    )


# ---- a refusal in the help's language: its English words, as the model package and argparse write them ----------
def _phrase(en: str) -> re.Pattern[str]:
    """The English words of one phrase as a pattern: its {fields} match one word without spaces or brackets."""
    parts = []
    for literal, field, _, _ in string.Formatter().parse(en):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<{field}>[^\\s()]+)")
    return re.compile("".join(parts))


PHRASES = [(_phrase(texts["en"]), texts) for texts in CLI["phrases"].values()]


def translate(message: str, lang: str) -> str:
    """A refusal's English words in `lang`, phrase by phrase (cli.toml's [phrases], in order); words that have no
    translation yet stay as they are, so nothing a refusal says is lost. English: the message unchanged."""
    if lang not in LANGS or lang == "en":
        return message
    for pattern, texts in PHRASES:
        message = pattern.sub(lambda m, t=texts[lang]: t.format(**m.groupdict()), message)
    return message


def lang_of(p: argparse.ArgumentParser) -> str:
    """The language a parser's help is written in (a plain argparse parser: English)."""
    return getattr(p, "lang", "en")


def add_seed(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--seed", type=int, default=0, help=Help("common", lang_of(p))("seed", what=what))


def add_lang(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", default="en", help=Help("common", lang_of(p))("lang"))


def add_json(p: argparse.ArgumentParser, what: str | None = None) -> None:
    p.add_argument("--json", action="store_true", help=what or Help("common", lang_of(p))("json"))


def add_weights(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights", default=None, choices=["trained", "untrained"], help=Help("common", lang_of(p))("weights")
    )


def add_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default=None, metavar="DIR", help=Help("common", lang_of(p))("checkpoint"))


def add_placement(p: argparse.ArgumentParser) -> None:
    """--device and --dtype: where the model runs and the dtype it is built in (dspark_mini/device.py)."""
    h = Help("common", lang_of(p))
    p.add_argument("--device", default="cpu", help=h("device"))
    p.add_argument("--dtype", default=None, help=h("dtype"))


def add_temperature(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", type=float, default=0.0, help=Help("common", lang_of(p))("temperature"))


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: it still works, and says once on stderr (in the help's language) which
    spelling replaces it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        if option_string == "--block":
            print(Help("common", lang_of(parser))("block_note"), file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_verify_len(p: argparse.ArgumentParser, what: str) -> None:
    """--verify-len ℓ (the old --block still works): how many of the drafted block are sent to verify."""
    p.add_argument(
        "--verify-len",
        "--block",
        dest="verify_len",
        type=int,
        default=None,
        action=DeprecatedAlias,
        metavar="ℓ",
        help=Help("common", lang_of(p))("verify_len", what=what),
    )


# ---- worker processes: how many fit, and the pool that stops them all ----------------------------------------------
MEMORY_PER_JOB = 300_000_000  # bytes one worker takes (torch, the lab model, one job's data): about 0.3 GB
MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")
NO_LIMIT = 1 << 60  # a cgroup "limit" at least this large is none (v1 writes 9223372036854771712)


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity, else every core), at most a cgroup's cpu.max quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _read_first(_cgroup_files("cpu.max", "cpu", None))
    if quota and quota.split()[0] != "max" and len(quota.split()) == 2:
        q, period = (int(x) for x in quota.split())
        cores = min(cores, max(1, -(-q // period)))
    return max(1, cores)


def _cgroup_files(v2: str, v1_controller: str, v1: str | None) -> list[Path]:
    """Where this process's cgroup keeps a file: its own folder (v2 `0::/path`, v1 `N:controller:/path`), then the
    root a container mounts as its own."""
    paths = []
    try:
        lines = CGROUP.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hid, controllers, rel = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            paths += [CGROUP_ROOT / rel.lstrip("/") / v2, CGROUP_ROOT / v2]
        elif v1 is not None and v1_controller in controllers.split(","):
            paths += [CGROUP_ROOT / v1_controller / rel.lstrip("/") / v1, CGROUP_ROOT / v1_controller / v1]
    return paths


def _read_first(paths: list[Path]) -> str | None:
    for path in paths:
        try:
            return path.read_text().strip()
        except OSError:
            continue
    return None


def free_memory() -> int | None:
    """Bytes free for more processes: MemAvailable (/proc/meminfo), at most what this process's cgroup still allows
    (memory.max − memory.current; v1: limit_in_bytes − usage_in_bytes). None when neither can be read. (RLIMIT_AS
    bounds each process's address space, not the sum over workers, so it does not bound their count.)"""
    free = None
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for limit_name, use_name, v1_limit, v1_use in (
        ("memory.max", "memory.current", "memory.limit_in_bytes", "memory.usage_in_bytes"),
    ):
        limit = _read_first(_cgroup_files(limit_name, "memory", v1_limit))
        used = _read_first(_cgroup_files(use_name, "memory", v1_use))
        if limit and limit.isdigit() and int(limit) < NO_LIMIT and used and used.isdigit():
            left = max(0, int(limit) - int(used))
            free = left if free is None else min(free, left)
    return free


def jobs_range(lang: str = "en") -> tuple[int, str]:
    """The most worker processes this machine runs at once → (n, why in `lang`): its cores, and its free memory at
    MEMORY_PER_JOB a worker; one job is always allowed (it runs in the command's own process)."""
    cores, free = cpu_cores(), free_memory()
    by_memory = cores if free is None else free // MEMORY_PER_JOB
    n = max(1, min(cores, by_memory))
    why = f"{cores} {MESSAGES('core' if cores == 1 else 'cores', lang)}"
    if free is not None:
        gb, per = (f"{x:.1f}".replace(".", "," if lang == "vi" else ".") for x in (free / 1e9, MEMORY_PER_JOB / 1e9))
        why += ", " + MESSAGES("memory_room", lang, gb=gb, per=per, room=by_memory)
    return n, why


def check_jobs(jobs: int, option: str = "--jobs", lang: str = "en") -> int:
    """`jobs` worker processes, at most what this machine runs at once (`jobs_range`) → jobs. More is refused with
    one line naming `option` and the allowed range (never lowered quietly)."""
    n, why = jobs_range(lang)
    if jobs > n:
        raise ValueError(MESSAGES("too_many_jobs", lang, option=option, jobs=jobs, n=n, why=why))
    return jobs


class PoolError(ValueError):
    """A worker process stopped without a word (killed from outside, most likely for memory)."""


class QuietProcess(mp_context.SpawnProcess):
    """A spawned worker that ignores Ctrl-C (SIGINT) from its first instant: a terminal sends Ctrl-C to the whole
    process group, and the command's own process answers it by stopping its workers (`worker_pool`), so no worker
    prints a KeyboardInterrupt of its own. SIG_IGN is inherited through exec; SIGTERM still ends a worker."""

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            super().start()
            return
        before_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # a Ctrl-C now waits, not lost
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            super().start()
        finally:
            signal.signal(signal.SIGINT, before)
            signal.pthread_sigmask(signal.SIG_SETMASK, before_mask)


class QuietSpawn(mp_context.SpawnContext):
    Process = QuietProcess


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a worker started from another thread: ignored from here on


def stop_workers(pool: Any) -> None:
    """Every worker of `pool` ended and waited for (terminated; killed if it does not end), queued jobs dropped.
    Ctrl-C and SIGTERM wait until it is done, so a second Ctrl-C cannot leave a worker behind."""
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        thread = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                p.terminate()
            except (OSError, ValueError, AttributeError):
                pass
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        if thread is not None:
            thread.join(10)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def pool_error(jobs: int, option: str | None, lang: str) -> PoolError:
    gb = f"{MEMORY_PER_JOB / 1e9:.1f}".replace(".", "," if lang == "vi" else ".")
    cause = MESSAGES("worker_died", lang, jobs=jobs, gb=gb)
    fix = (
        MESSAGES("fewer_jobs", lang, option=option, fewer=max(1, jobs // 2))
        if option
        else MESSAGES("free_memory", lang)
    )
    return PoolError(MESSAGES("run_again", lang, cause=cause, fix=fix))


@contextmanager
def worker_pool(jobs: int, option: str | None = "--jobs", lang: str = "en") -> Iterator[tuple[Any, Any]]:
    """`jobs` spawned worker processes (`QuietProcess`) and a queue for their progress ticks → (pool, queue).

    The block ends normally: the pool is shut down, waiting for its jobs. Anything else — Ctrl-C, SIGTERM (lab/cli.py
    raises it as an interrupt), an error — first stops every worker (`stop_workers`), then goes on. A worker that
    was killed from outside (BrokenProcessPool: the out-of-memory killer, most likely) becomes one `PoolError` line
    naming memory and `option` (None: a command without that option)."""
    import tempfile  # only where workers run: `--help` imports none of it
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing.managers import SyncManager

    ctx = QuietSpawn()
    # the queue's server listens on a socket in a folder of our own, removed however the block ends (multiprocessing
    # would make a pymp-* folder that only an interpreter exit removes, and `dspark-lab` leaves without one)
    with tempfile.TemporaryDirectory(prefix="dspark-lab-jobs-") as tmp:
        manager = SyncManager(address=os.path.join(tmp, "queue"), ctx=ctx)
        manager.start()
        try:
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_ignore_sigint)
            try:
                yield pool, manager.Queue()
            except BrokenProcessPool as e:
                stop_workers(pool)
                raise pool_error(jobs, option, lang) from e
            except BaseException:
                stop_workers(pool)
                raise
            pool.shutdown(wait=True)
        finally:
            manager.shutdown()
