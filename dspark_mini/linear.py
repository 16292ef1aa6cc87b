"""`Linear` without the default init: `Transformer.init_weights` (or a checkpoint) sets every weight.

Skipping torch's per-layer kaiming init halves the time to build the real-size model on `meta`
(≈ 46 k expert projections).
"""

from torch import nn


class Linear(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = False, dtype=None, device=None):
        super().__init__(in_features, out_features, bias=bias, dtype=dtype, device=device)

    def reset_parameters(self) -> None:
        """Left to the model's `init_weights`."""
