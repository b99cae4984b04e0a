"""Atomic writes, for the translator's modules: `keras_attention.training.atomic`.

Kept under this name for the modules that import it here (the tokenizer, the
export); the code is in `keras_attention.training.atomic`.
"""

from keras_attention.training.atomic import TEMP_PREFIX  # noqa: F401
from keras_attention.training.atomic import WRITE_DELAY_ENV  # noqa: F401
from keras_attention.training.atomic import DiskFullError  # noqa: F401
from keras_attention.training.atomic import atomic_path  # noqa: F401
from keras_attention.training.atomic import fsync  # noqa: F401
from keras_attention.training.atomic import process_is_running  # noqa: F401
from keras_attention.training.atomic import recover_folder  # noqa: F401
from keras_attention.training.atomic import replaced_folder  # noqa: F401
from keras_attention.training.atomic import temporary_name  # noqa: F401
from keras_attention.training.atomic import write_bytes  # noqa: F401
from keras_attention.training.atomic import write_json  # noqa: F401
from keras_attention.training.atomic import write_text  # noqa: F401
