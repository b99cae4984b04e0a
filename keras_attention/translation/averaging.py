"""Checkpoint averaging, for the translator: `keras_attention.training.averaging`.

Kept under this name for the code that imports it here (the `average`
command, the benchmarks); the code is in `keras_attention.training.averaging`.
"""

from keras_attention.training.averaging import EPOCHS_DIR  # noqa: F401
from keras_attention.training.averaging import average_weights  # noqa: F401
from keras_attention.training.averaging import epoch_weight_path  # noqa: F401
from keras_attention.training.averaging import last_epochs  # noqa: F401
from keras_attention.training.averaging import saved_epochs  # noqa: F401
