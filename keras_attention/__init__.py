"""Attention layers, attention decoders, generation and export for Keras 3.

Imported from here (every Keras backend: TensorFlow, JAX, PyTorch):

- the attention layers: the contract every mechanism fills (`BaseAttention`,
  with `ContentAttention`, `BaseAlignmentAttention`, `BaseMonotonicAttention`
  under it) and the mechanisms (`BahdanauAttention`, `LuongAttention`,
  `LocationSensitiveAttention`, `BahdanauMonotonicAttention`,
  `LuongMonotonicAttention`, `GMMAttention`), `OverriddenAttention` (replaced
  weights), `MaskedSoftmax` and `masked_softmax`, `monotonic_alignment`;
  their modules are in `keras_attention.attention`;
- the decoders that run an attention layer inside their recurrence, over the
  built-in GRU or LSTM or any Keras RNN cell: `BaseDecoder`,
  `BahdanauDecoder`, `LuongDecoder` (modules in `keras_attention.decoders`);
- `Seq2SeqGenerator` (greedy and beam search with a trained encoder-decoder)
  and the loss `SmoothedSparseCrossentropy` (`keras_attention.losses`).

Subpackages and modules, imported on their own:

- `keras_attention.testing`: `check_attention`, which runs a mechanism of
  one's own through every promise of the contract;
- `keras_attention.generation` (reading a model's graph, the searches,
  ensembles), `keras_attention.export` (SavedModel and builtin-only TFLite;
  needs TensorFlow), `keras_attention.translation` (the English-French
  Multi30k translator; needs TensorFlow and tensorflow-text);
- `keras_attention.lite_runtime`: `warm_up`, one call of an exported
  model's signatures at the longest source before an app's first (numpy
  only; LiteRT can go wrong on an interpreter's first call longer than any
  before it);
- `keras_attention.training`: crash-safe training of any model in a run
  folder, with `keras_attention.precision` (mixed precision) and
  `keras_attention.distribution` (several devices, JAX);
- helpers for a trainer or a layer of one's own: `keras_attention.masking`
  (fill values, masked softmax, shape checks), `keras_attention.loops` (a
  scan over time), `keras_attention.cli_types` (argparse types),
  `keras_attention.edit_distance` and `keras_attention.error_rates` (error
  rates such as WER, PER, CER), `keras_attention.file_hash` (a data file's
  SHA-256), `keras_attention.symbol_vocabulary` (symbols and ids, specials
  first), `keras_attention.plots`,
  `keras_attention.model_file` (a `.keras` file or one line saying why not),
  `keras_attention.line_reader` (the lines of a stream as they come, and a
  command's inputs) and
  `keras_attention.validation` (argument checks);
- `keras_attention.keras_backend_check`, imported first: a `KERAS_BACKEND`
  that is not installed is one line, not a traceback.
"""

# First: it checks KERAS_BACKEND before Keras reads it (one line, not a traceback).
from keras_attention import keras_backend_check  # noqa: F401
from keras_attention.attention.bahdanau_attention import BahdanauAttention
from keras_attention.attention.bahdanau_monotonic_attention import BahdanauMonotonicAttention
from keras_attention.attention.base_alignment_attention import BaseAlignmentAttention
from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.base_monotonic_attention import BaseMonotonicAttention
from keras_attention.attention.content_attention import ContentAttention
from keras_attention.attention.gmm_attention import GMMAttention
from keras_attention.attention.location_sensitive_attention import LocationSensitiveAttention
from keras_attention.attention.luong_attention import LuongAttention
from keras_attention.attention.luong_monotonic_attention import LuongMonotonicAttention
from keras_attention.attention.masked_softmax import MaskedSoftmax
from keras_attention.attention.monotonic_alignment import monotonic_alignment
from keras_attention.attention.overridden_attention import OverriddenAttention
from keras_attention.decoders.bahdanau_decoder import BahdanauDecoder
from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.decoders.luong_decoder import LuongDecoder
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.losses import SmoothedSparseCrossentropy
from keras_attention.masking import masked_softmax

__version__ = "0.1.0"


def __getattr__(name):
    # `keras_attention.export` needs TensorFlow: imported on first use, so that
    # importing the layers does not import it.
    if name in ("export", "generation", "testing"):
        import importlib

        return importlib.import_module(f"keras_attention.{name}")
    raise AttributeError(f"module 'keras_attention' has no attribute {name!r}")


__all__ = [
    "BahdanauAttention",
    "BahdanauDecoder",
    "BahdanauMonotonicAttention",
    "BaseAlignmentAttention",
    "BaseAttention",
    "BaseDecoder",
    "BaseMonotonicAttention",
    "ContentAttention",
    "GMMAttention",
    "LocationSensitiveAttention",
    "LuongAttention",
    "LuongDecoder",
    "LuongMonotonicAttention",
    "MaskedSoftmax",
    "OverriddenAttention",
    "Seq2SeqGenerator",
    "SmoothedSparseCrossentropy",
    "masked_softmax",
    "monotonic_alignment",
]
