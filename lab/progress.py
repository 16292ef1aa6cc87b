"""Progress of a command's long parts, so a run at the real widths (`--preset flash-cpu`: minutes) is never silent.

    with shown(lang, enabled) as bar:  a rich progress display on stderr for everything inside (where stderr is not
                                    a terminal nothing is drawn: a pipe, --json or a test reads the same output as
                                    before); bar: the rich Progress, None where nothing is drawn
    with phase(key) as advance:     one line of it: messages.toml [progress] `key` in the shown language, a spinner
                                    and its seconds while the part runs, ✓ once it is done; advance(done, total)
                                    turns it into a bar (the weights: values drawn of all)

Outside `shown` (a notebook, a test, the lab preset's millisecond parts) `phase` is a no-op, so the model code
can name its phases without knowing who watches. The texts live in lab/lang/<lang>/messages.toml [progress].
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

from .text import Texts, check_lang, lang_table

TEXT = Texts(lang_table("messages", "progress"), "progress")
_CURRENT: contextvars.ContextVar[tuple[Progress, str] | None] = contextvars.ContextVar("progress", default=None)
Advance = Callable[[int, int], None]


def _none(done: int, total: int) -> None:
    return None


@contextlib.contextmanager
def shown(lang: str = "en", enabled: bool = True, console: Console | None = None) -> Iterator[Progress | None]:
    """A progress display for the phases run inside, in `lang`, on stderr (or `console`); `enabled=False`: none."""
    lang = check_lang(lang)
    out = Console(stderr=True) if console is None else console
    if not enabled or not out.is_terminal:
        yield None
        return
    bar = Progress(
        SpinnerColumn(finished_text="[green]✓"),
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TaskProgressColumn(),  # the percentage where the part counts its steps, nothing where it cannot
        TimeElapsedColumn(),
        console=out,
        refresh_per_second=4,
    )
    token = _CURRENT.set((bar, lang))
    try:
        with bar:
            yield bar
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def phase(key: str, **fmt: object) -> Iterator[Advance]:
    """One part of the work, told while it runs; yields advance(done, total) for a part that can count its steps."""
    current = _CURRENT.get()
    if current is None:
        yield _none
        return
    bar, lang = current
    task = bar.add_task(TEXT(key, lang, **fmt), total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        yield advance
    finally:
        bar.update(task, total=1, completed=1)
        bar.stop_task(task)
        bar.refresh()
