"""Attention layers, attention decoders, generation and export for Keras 3.

Imported from here (every Keras backend: TensorFlow, JAX, PyTorch):

- the attention layers: the contract every mechanism fills (`BaseAttention`,
  with `ContentAttention`, `BaseAlignmentAttention`, `BaseMonotonicAttention`
  under it) and the mechanisms (`BahdanauAttention`, `LuongAttention`,
  `LocationSensitiveAttention`, `BahdanauMonotonicAttention`,
  `LuongMonotonicAttention`, `MonotonicInfiniteLookbackAttention`,
  `GMMAttention`), `OverriddenAttention` (replaced
  weights), `WaitKAttention` (the wait-k schedule),
  `MaskedSoftmax` and `masked_softmax`, `monotonic_alignment`;
  their modules are in `keras_attention.attention`;
- the decoders that run an attention layer inside their recurrence, over the
  built-in GRU or LSTM or any Keras RNN cell: `BaseDecoder`,
  `BahdanauDecoder`, `LuongDecoder` (modules in `keras_attention.decoders`);
- `Seq2SeqGenerator` (greedy and beam search with a trained encoder-decoder)
  and the loss `SmoothedSparseCrossentropy` (`keras_attention.training.losses`).

The package's rooms, each named for what it is for and imported on its own
(each room's docstring says what it holds; its `__all__` names its modules or
public names):

- `keras_attention.attention`: the layers and the contract, with
  `keras_attention.attention.masking` (fill values, masked softmax, shape
  checks); `keras_attention.decoders`: the decoders;
- `keras_attention.testing`: `check_attention`, which runs a mechanism of
  one's own through every promise of the contract;
- `keras_attention.generation` (reading a model's graph, the searches,
  ensembles), `keras_attention.export` (SavedModel and builtin-only TFLite;
  needs TensorFlow), `keras_attention.runtime` (running an exported model
  in an app: `warm_up`; numpy only);
- `keras_attention.training`: crash-safe training of any model in a run
  folder, the loss, mixed precision's checks and several devices;
- `keras_attention.translation`: the English-French Multi30k translator, a
  client of the rooms above (needs TensorFlow and tensorflow-text);
- the ground under them: `keras_attention.arguments` (argument checks and
  argparse types), `keras_attention.backend` (the `KERAS_BACKEND` check,
  imported first; a scan over time; mixed-precision policies),
  `keras_attention.files` (atomic writes, a data file's SHA-256, a `.keras`
  file or one line saying why not), `keras_attention.text` (the lines of a
  stream, symbol vocabularies) and `keras_attention.scoring` (edit
  distance, error rates such as WER and PER, figures).
"""

# First: it checks KERAS_BACKEND before Keras reads it (one line, not a traceback).
from keras_attention.backend import check  # noqa: F401
from keras_attention.backend import native_log

# Second, before TensorFlow is imported: in the package's own commands, its
# C++ start-up log stays off standard error (`--verbose` shows it).
if native_log.should_filter():
    native_log.filter_native_log()
# isort: split
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
from keras_attention.attention.masking import masked_softmax
from keras_attention.attention.monotonic_alignment import monotonic_alignment
from keras_attention.attention.monotonic_infinite_lookback_attention import (
    MonotonicInfiniteLookbackAttention,
)
from keras_attention.attention.overridden_attention import OverriddenAttention
from keras_attention.attention.wait_k_attention import WaitKAttention
from keras_attention.decoders.bahdanau_decoder import BahdanauDecoder
from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.decoders.luong_decoder import LuongDecoder
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.training.losses import SmoothedSparseCrossentropy

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
    "MonotonicInfiniteLookbackAttention",
    "OverriddenAttention",
    "Seq2SeqGenerator",
    "SmoothedSparseCrossentropy",
    "WaitKAttention",
    "masked_softmax",
    "monotonic_alignment",
]
