"""The real-scale path: DeepSeek-V4.1-Flash's official checkpoint layout, both ways.

  layout.py   lab state-dict names ↔ checkpoint tensor names, dtypes and shapes for a config (from the numbers
              alone), the byte-count groups, config.json ↔ ModelConfig
  export.py   export_checkpoint(model, dir, shards=N) → sharded safetensors + index + config.json;
              load_checkpoint(dir, select=…, packed=…) → a lab model, reading only the tensors asked for
  inspect.py  inspect_checkpoint(dir) → tensor count, bytes by group, problems — from the headers alone
  shards.py   the files: headers read without the data, the index, shard names
  placement.py  the bytes one rank reads and holds (from config.json / headers), refused before allocating when they
              do not fit the device (the --device / --dtype checks themselves are dspark_mini/device.py's)
  ranks.py    one rank's place in a sharded model and which rows it holds (lab.runtime runs the ranks)
The packed weights themselves (FP8 / MXFP4 codes and E8M0 scales, dequantized at use) are dspark_mini.packed.
"""

# The names below load on first use (PEP 562), so `import lab.realscale.cli` (the parser of `dspark-lab checkpoint`)
# does not import torch and `dspark-lab --help` stays fast.
_HOMES = {
    "CheckpointReader": "export",
    "export_checkpoint": "export",
    "load_checkpoint": "export",
    "read_config": "export",
    "format_report": "inspect",
    "inspect_checkpoint": "inspect",
    "write_header_only": "inspect",
    "GROUPS": "layout",
    "STYLES": "layout",
    "RealScaleError": "layout",
    "checkpoint_name": "layout",
    "group_of": "layout",
    "lab_tensors": "layout",
    "layout": "layout",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # on first use: the package itself stays torch-free

    home = _HOMES[name]
    module = import_module(f".{home}", __name__)
    # bind every name of that module at once, as an eager `from .layout import …, layout` did: `layout` is then the
    # function, not the submodule the import just set on the package
    globals().update({n: getattr(module, n) for n, h in _HOMES.items() if h == home})
    return globals()[name]
