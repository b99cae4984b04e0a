"""Exporting a `Seq2SeqGenerator`: a SavedModel for servers, builtin-only TFLite
for phones, and the operator listing that checks a `.tflite` file.

Needs TensorFlow (the converter and the SavedModel format), with Keras on its
TensorFlow backend: on another the exports raise `BackendError` at once.
`add_export_arguments` is the command-line options every export command shares.
Listing operators needs `ai-edge-litert`.
"""

try:
    import tensorflow  # noqa: F401
except ImportError as error:
    raise ImportError(
        "keras_attention.export needs TensorFlow (the SavedModel format and the "
        "TFLite converter): pip install keras-seq2seq-attention[tensorflow]",
        # Named after the package: `python -m` then prints this line alone.
        name="keras_attention.export",
    ) from error

from keras_attention.export.arguments import add_export_arguments
from keras_attention.export.backend import BackendError
from keras_attention.export.folder import FolderFiles
from keras_attention.export.folder import export_folder
from keras_attention.export.generator_module import GeneratorModule
from keras_attention.export.operators import non_builtin_operators
from keras_attention.export.operators import tflite_operators
from keras_attention.export.operators import tflite_subgraph_operators
from keras_attention.export.saved_model import ServingGenerator
from keras_attention.export.saved_model import export_saved_model
from keras_attention.export.streaming import LiteSimultaneous
from keras_attention.export.streaming import export_simultaneous_tflite
from keras_attention.export.tflite import VARIANTS
from keras_attention.export.tflite import LiteGenerator
from keras_attention.export.tflite import convert
from keras_attention.export.tflite import export_tflite

__all__ = [
    "BackendError",
    "FolderFiles",
    "GeneratorModule",
    "LiteGenerator",
    "LiteSimultaneous",
    "ServingGenerator",
    "VARIANTS",
    "add_export_arguments",
    "convert",
    "export_folder",
    "export_saved_model",
    "export_simultaneous_tflite",
    "export_tflite",
    "non_builtin_operators",
    "tflite_operators",
    "tflite_subgraph_operators",
]
