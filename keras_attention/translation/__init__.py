"""An English-French translator on Multi30k, from data to device.

Imported from here: the data (`load_multi30k`, `read_parallel`,
`multi30k_paths`, `ParallelSplit`, `ReadStats`, `SPLITS`, `SPLIT_SIZES`,
`ENV_VAR`), the WordPiece tokenizer (`SubwordTokenizer`, `normalize_text`,
`postprocess`, `RESERVED_TOKENS`), the teacher-forced input pipeline
(`make_dataset`) and training into a run folder (`train_run`, `PRESETS`).

Its modules hold the rest: `model` (`build_translator`), `translator`
(`Translator`, `load_run`: a trained run's encoder, step, searches and
tokenizers), `evaluation` (decoding a corpus, BLEU and chrF, plots),
`serving` (the text-in, text-out SavedModel), `lite` (the TFLite models an
app needs), `export` (both, from a run folder), `commands` and `cli` (`python
-m keras_attention.translation train | evaluate | translate | explain |
average | status | export`).

Needs TensorFlow and tensorflow-text (the tf.data pipeline and the tokenizer),
whatever the Keras backend.
"""

try:
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401
except ImportError as error:
    raise ImportError(
        "keras_attention.translation needs TensorFlow and tensorflow-text (its tf.data "
        "pipeline and tokenizer), whatever the Keras backend: "
        "pip install keras-seq2seq-attention[tensorflow]",
        # Named after the package: `python -m` then prints this line alone.
        name="keras_attention.translation",
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
from keras_attention.translation.postprocess import postprocess
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.tokenizer import SubwordTokenizer
from keras_attention.translation.tokenizer import normalize_text
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
