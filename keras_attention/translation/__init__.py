"""English-French Multi30k translation toolkit: data, tokenizer, input pipeline."""

try:
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401
except ImportError as error:
    raise ImportError(
        "keras_attention.translation needs TensorFlow and tensorflow-text (its tf.data "
        "pipeline and tokenizer), whatever the Keras backend: "
        "pip install keras-seq2seq-attention[tensorflow]"
    ) from error

from keras_attention.translation.data import ENV_VAR
from keras_attention.translation.data import SPLIT_SIZES
from keras_attention.translation.data import SPLITS
from keras_attention.translation.data import ParallelSplit
from keras_attention.translation.data import ReadStats
from keras_attention.translation.data import load_multi30k
from keras_attention.translation.data import multi30k_paths
from keras_attention.translation.data import read_parallel
from keras_attention.translation.pipeline import make_dataset
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.tokenizer import SubwordTokenizer
from keras_attention.translation.tokenizer import normalize_text
from keras_attention.translation.tokenizer import postprocess
from keras_attention.translation.training import PRESETS
from keras_attention.translation.training import train_run

__all__ = [
    "ENV_VAR",
    "PRESETS",
    "RESERVED_TOKENS",
    "SPLITS",
    "SPLIT_SIZES",
    "ParallelSplit",
    "ReadStats",
    "SubwordTokenizer",
    "load_multi30k",
    "make_dataset",
    "multi30k_paths",
    "normalize_text",
    "postprocess",
    "read_parallel",
    "train_run",
]
