"""Drafters: what the speculative loop asks of any draft model (DSpark, DFlash-style, Eagle3-style, MTP-1).

The loop (`speculative.py`) owns the target and its cache; a drafter only has to
  - `reset(batch)`                      before a new generation;
  - `observe(tokens, out, n)`           after every target forward: the forward ran over `tokens` [B, S]
                                        and produced `out` (taps, hidden, logits at every row); its first
                                        `n` rows are now committed (prefill: all S; verify: anchor + kept);
  - `propose(model, cache, anchors, k, temperature, generator, trace)` → `DraftOutput` for the k tokens
                                        after the anchors [B] (the anchor sits at position cache.length).
The DSpark and DFlash-style drafters need no `observe`: their context rows are written into the draft rings
by the target forward's own commit (see `model.py`). Drafters with their own context (Eagle3, MTP-1) keep
the committed rows they need in `observe`.
"""

from __future__ import annotations

from typing import Protocol

import torch

from .dspark import DraftOutput
from .model import ForwardOutput, Transformer, draft


class Drafter(Protocol):
    kind: str  # "dspark", "dflash", "eagle3", "mtp1", …
    has_confidence: bool  # False: DraftOutput.confidence is NaN

    def max_block(self, model: Transformer) -> int:
        """The largest block k this drafter can propose."""
        ...

    def reset(self, batch: int) -> None: ...

    def observe(self, tokens: torch.Tensor, out: ForwardOutput, n: int) -> None: ...

    def propose(
        self,
        model: Transformer,
        cache,
        anchors: torch.Tensor,
        k: int,
        temperature: float,
        generator: torch.Generator | None,
        trace=None,
    ) -> DraftOutput: ...


class DSparkDrafter:
    """The model's own draft (`model.mtp`): one parallel pass + the Markov head (DSpark), or the same pass with
    the Markov head zeroed (DFlash-style: then `kind="dflash"`, and the confidence head is not trained)."""

    parallel = True  # one pass drafts the whole block: always draft the trained block, verify a prefix

    def __init__(self, kind: str = "dspark"):
        self.kind = kind
        self.has_confidence = kind != "dflash"

    def max_block(self, model: Transformer) -> int:
        return model.cfg.dspark_block_size

    def reset(self, batch: int) -> None:
        pass

    def observe(self, tokens: torch.Tensor, out: ForwardOutput, n: int) -> None:
        pass  # the draft rings are filled by the target forward's commit

    def propose(self, model, cache, anchors, k, temperature, generator, trace=None) -> DraftOutput:
        return draft(model, anchors, cache, k, temperature, generator, trace)
