"""The command line's shared pieces: how a command's help reads, and the options several commands take.

  command(sub, name, help, description, examples)   one subcommand: its description wrapped at 80 columns, its
                                                     own few examples and the exit codes below the options
  add_seed, add_lang, add_json, add_weights, add_checkpoint, add_placement, add_temperature, add_verify_len
                                                     the options that mean the same in every command
  TOP_EXAMPLES                                       the one examples block, on `dspark-lab --help`
Each group of commands (lesson, evaluation, serving, training, realscale, present) builds its own parsers from
these, checks its own options and runs them; `lab/cli.py` only puts the groups together. Nothing here imports
torch, so `dspark-lab --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

WIDTH = 80
EXIT_CODES = "exit codes: 0 done · 2 bad input · 130 interrupted (Ctrl-C) · 141 output pipe closed (e.g. `| head`)"
TEMPERATURE_HELP = "0 = greedy (default); a finite number ≥ 1e-6 samples"
# lab.realscale.layout.STYLES (a test keeps them equal; --help stays torch-free)
CHECKPOINT_STYLES = ("lab", "official")
MAX_REPS = 1000  # `profile`: timing repetitions per block size (and per batch size with --sps)

TOP_EXAMPLES = """\
steps: 1A token→embedding→4 lanes · 1B Engram · 2A mHC · 3A CED schedule ·
3B CSA2 compressor · 3C indexer + candidates + window · 4A MLA attention ·
6A KV cache (890 B/token) · 5A MoE · 6B LM head + DSpark

examples:
  dspark-lab walk                        every step, English
  dspark-lab walk --lang vi --step 6B    the destination step, in Vietnamese
  dspark-lab generate                    plain vs speculative decoding, side by side
  dspark-lab inspect --preset flash      the real model on `meta`
  dspark-lab present                     the presenter deck for a class
  dspark-lab COMMAND --help              each command's own options and examples
"""


def formatter(prog: str) -> argparse.HelpFormatter:
    """Help at 80 columns; descriptions come wrapped (`wrap`), examples keep their lines."""
    return argparse.RawDescriptionHelpFormatter(prog, width=WIDTH, max_help_position=32)


def wrap(text: str) -> str:
    """A description as paragraphs of at most 80 columns (a blank line between paragraphs is kept)."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), WIDTH) for p in text.split("\n\n"))


def command(sub: Any, name: str, help: str, description: str, examples: str = "") -> argparse.ArgumentParser:
    """One subcommand with the lab's help layout: the wrapped description, then its examples and the exit codes."""
    epilog = (examples.rstrip("\n") + "\n\n" if examples else "") + EXIT_CODES
    return sub.add_parser(name, help=help, description=wrap(description), epilog=epilog, formatter_class=formatter)


def add_seed(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--seed", type=int, default=0, help=f"{what}; 0 ≤ seed < 2**63 (default 0)")


def add_lang(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", default="en", help="language of every line printed: vi or en (default en)")


def add_json(p: argparse.ArgumentParser, what: str = "print the report as JSON") -> None:
    p.add_argument("--json", action="store_true", help=what)


def add_weights(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights",
        default=None,
        choices=["trained", "untrained"],
        help="trained: the shipped lab weights (the default for --preset lab); untrained: the seeded random init (the "
        "only weights, and the default, of another preset)",
    )


def add_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="run on the model read back from a folder in the official layout (`dspark-lab checkpoint export`) "
        "instead of --weights",
    )


def add_placement(p: argparse.ArgumentParser) -> None:
    """--device and --dtype: where the model runs and the dtype it is built in (dspark_mini/device.py)."""
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument(
        "--dtype",
        default=None,
        help="compute dtype: float64 (default, the lab's), float32 or bfloat16; mHC, router, sinks and head stay fp32",
    )


def add_temperature(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", type=float, default=0.0, help=TEMPERATURE_HELP)


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: it still works, and says once on stderr which spelling replaces it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        if option_string == "--block":
            print(
                "note: --block is now --verify-len (ℓ, the drafts sent to verify); --block still works", file=sys.stderr
            )
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
        help=f"verify length ℓ of a fixed policy: 1..5 (default 5). {what}",
    )
