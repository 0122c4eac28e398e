"""seqtrain_torch: PyTorch interop for seqtrain.

- safetensors_io: pure-numpy safetensors reader/writer (no `safetensors` package needed).
- models: PyTorch modules named exactly like seqtrain's models, so a seqtrain
  model.safetensors loads with load_state_dict(strict=True), and back; load_exported(DIR) for a
  `seqtrain export` directory.
- gpt: GPT / GPTConfig, nanoGPT's architecture and state_dict names (seqtrain model type gpt).
- transformer: TransformerEncoder, torch's encoder layers under seqtrain's names (model type transformer).
- cnn: CNN, the convolutional encoder (FCN with LayerNorm) under seqtrain's names (model type cnn).
- encoder: RNNEncoder / TransformerEncoderBody / CNNEncoderBody (an encoder without its head, embed(x, lengths)) and
  load_encoder(FILE) for a `seqtrain export RUN --encoder FILE` file.

The model names are imported lazily, so the file I/O works on machines without torch.
"""

from .safetensors_io import load_file, read_file, save_file

__all__ = ["load_file", "read_file", "save_file",
           "CharLM", "Forecaster", "MLPForecaster", "from_spec", "load_exported", "load_seqtrain", "save_seqtrain",
           "tied_groups", "GPT", "GPTConfig", "TransformerEncoder", "CNN", "RNNEncoder", "TransformerEncoderBody",
           "CNNEncoderBody", "load_encoder"]

_MODEL_NAMES = {"CharLM", "Forecaster", "MLPForecaster", "from_spec", "load_exported", "load_seqtrain", "save_seqtrain",
                "tied_groups"}
_GPT_NAMES = {"GPT", "GPTConfig"}
_TRANSFORMER_NAMES = {"TransformerEncoder"}
_CNN_NAMES = {"CNN"}
_ENCODER_NAMES = {"RNNEncoder", "TransformerEncoderBody", "CNNEncoderBody", "load_encoder"}


def __getattr__(name):
    if name in _MODEL_NAMES:
        from . import models
        return getattr(models, name)
    if name in _GPT_NAMES:
        from . import gpt
        return getattr(gpt, name)
    if name in _TRANSFORMER_NAMES:
        from . import transformer
        return getattr(transformer, name)
    if name in _CNN_NAMES:
        from . import cnn
        return getattr(cnn, name)
    if name in _ENCODER_NAMES:
        from . import encoder
        return getattr(encoder, name)
    raise AttributeError(f"module 'seqtrain_torch' has no attribute {name!r}")
