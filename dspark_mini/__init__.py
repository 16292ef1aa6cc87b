"""dspark_mini — a tiny but complete DeepSeek-V4.1-Flash-shaped model (steps 1A–6B of the lab).

Imports nothing from `lab/`. Start with `get_config("lab")`, `build_model(cfg)` and `Trace`.
"""

from .config import ConfigError, ModelConfig
from .model import ForwardOutput, Trace, Transformer
from .params import count_params, param_counts
from .presets import PRESETS, build_model, get_config, get_tokenizer

__all__ = [
    "ConfigError",
    "ModelConfig",
    "ForwardOutput",
    "Trace",
    "Transformer",
    "count_params",
    "param_counts",
    "PRESETS",
    "build_model",
    "get_config",
    "get_tokenizer",
]
