"""How much work a long serving command is, said before it starts, and a progress bar while it runs (en/vi).

`serve`, `schedule` and `profile --sps` take options whose allowed combinations run from a second to hours
(`schedule --requests 1,…,1024 --rounds 10000`, every allowed `--batch-tokens`, a prompts file of 100,000
lines). Each prints ONE estimate line before its work — the counts of what it will run (forwards, rounds: exact
where the options fix them, "≈" where they depend on how many drafts are accepted) and about how long that
takes at a rate measured here just before, by a probe of the same work — and then shows a rich progress bar.
With --json the line and the bar go to stderr, so stdout stays JSON; otherwise through the command's console
(the bar only on a terminal). The estimate is also in the JSON (`estimate`: its counts and seconds).

The bar has no refresh thread: it is redrawn from the work's own callbacks, at most REFRESH_S apart, so nothing
competes with a timed forward (`profile --sps`) or a timed scheduler plan (`schedule`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ..text import check_lang, lang_string, lang_table

REFRESH_S = 0.1  # the bar is redrawn at most this often

TEXT: dict[str, dict[str, str]] = lang_table("estimates", "text")
UNITS = lang_string("estimates", "units")


def duration(seconds: float, lang: str) -> str:
    """0.4 s, 12 s, 4 min, 2.1 h (vi: 0,4 giây, 12 giây, 4 phút, 2,1 giờ)."""
    s, m, h = UNITS[check_lang(lang)]
    if seconds < 10:
        text = f"{seconds:.1f}"
        return f"{text.replace('.', ',') if lang == 'vi' else text} {s}"
    if seconds < 90:
        return f"{seconds:.0f} {s}"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} {m}"
    text = f"{seconds / 3600:.1f}"
    return f"{text.replace('.', ',') if lang == 'vi' else text} {h}"


@dataclass(frozen=True)
class Estimate:
    """A command's work before it starts: `counts` (what the line says) and `seconds` at the measured rate."""

    command: str  # serve, sps or schedule (its line in TEXT)
    counts: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self, lang: str) -> str:
        return TEXT[self.command][check_lang(lang)].format(**self.counts, time=duration(self.seconds, lang))

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "seconds": self.seconds}


def side_console(console: Console, json: bool) -> Console:
    """Where the estimate and the bar go: stderr under --json (stdout is the JSON), else the command's console."""
    return Console(stderr=True) if json else console


def say_estimate(console: Console, estimate: Estimate, lang: str) -> None:
    """The estimate as one line (never wrapped: a log keeps it whole)."""
    console.print(Text(estimate.line(lang)), soft_wrap=True)


class Bar:
    """A rich progress bar over `total` units of work, redrawn only from `advance` (no thread).

    Under --json (`json`) it goes to stderr and always ends with its final line there (a log shows the run
    finished); otherwise it is shown on a terminal only, and goes away when done."""

    def __init__(self, console: Console, key: str, total: int, lang: str, json: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            auto_refresh=False,
            transient=not json,
            disable=not (json or console.is_terminal),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.progress.add_task(TEXT[key][check_lang(lang)], total=total)
        self.last = 0.0
        self.pending = 0  # units done since the last redraw

    def __enter__(self) -> Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.advance(self.task, self.pending)
        self.progress.refresh()
        self.progress.stop()

    def advance(self, n: int) -> None:
        """n more units done; the bar takes them (and is redrawn) at most every REFRESH_S."""
        self.pending += n
        now = time.perf_counter()
        if now - self.last >= REFRESH_S:
            self.progress.advance(self.task, self.pending)
            self.progress.refresh()
            self.last, self.pending = now, 0

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print above the bar (through its console)."""
        self.progress.console.print(*objects, **kwargs)
