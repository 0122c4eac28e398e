"""seqtrain_torch: PyTorch interop for seqtrain.

- safetensors_io: pure-numpy safetensors reader/writer (no `safetensors` package needed).
- models: PyTorch modules named exactly like seqtrain's models, so a seqtrain
  model.safetensors loads with load_state_dict(strict=True), and back.

The model names are imported lazily, so the file I/O works on machines without torch.
"""

from .safetensors_io import load_file, read_file, save_file

__all__ = ["load_file", "read_file", "save_file",
           "Forecaster", "MLPForecaster", "from_spec", "load_seqtrain", "save_seqtrain"]

_MODEL_NAMES = {"Forecaster", "MLPForecaster", "from_spec", "load_seqtrain", "save_seqtrain"}


def __getattr__(name):
    if name in _MODEL_NAMES:
        from . import models
        return getattr(models, name)
    raise AttributeError(f"module 'seqtrain_torch' has no attribute {name!r}")
