"""The real-scale path: DeepSeek-V4.1-Flash's official checkpoint layout, both ways.

  layout.py   lab state-dict names ↔ checkpoint tensor names, dtypes and shapes for a config (from the numbers
              alone), the byte-count groups, config.json ↔ ModelConfig
  export.py   export_checkpoint(model, dir, shards=N) → sharded safetensors + index + config.json;
              load_checkpoint(dir, select=…, packed=…) → a lab model, reading only the tensors asked for
  inspect.py  inspect_checkpoint(dir) → tensor count, bytes by group, problems — from the headers alone
  shards.py   the files: headers read without the data, the index, shard names
  placement.py  the bytes one rank reads and holds (from config.json / headers), refused before allocating when they
              do not fit the device (the --device / --dtype checks themselves are dspark_mini/device.py's)
  distributed.py / torchrun.py   one model over N ranks (experts, attention, vocab, Engram rows), launched by torchrun
  run.py      run_model(…): the model a command runs on — a checkpoint read back, or the lab's set; a rank's shard
              under torchrun
The packed weights themselves (FP8 / MXFP4 codes and E8M0 scales, dequantized at use) are dspark_mini.packed.
"""

from .export import CheckpointReader, export_checkpoint, load_checkpoint, read_config
from .inspect import format_report, inspect_checkpoint, write_header_only
from .layout import GROUPS, STYLES, RealScaleError, checkpoint_name, group_of, lab_tensors, layout

__all__ = [
    "CheckpointReader",
    "GROUPS",
    "RealScaleError",
    "STYLES",
    "checkpoint_name",
    "export_checkpoint",
    "format_report",
    "group_of",
    "inspect_checkpoint",
    "lab_tensors",
    "layout",
    "load_checkpoint",
    "read_config",
    "write_header_only",
]
