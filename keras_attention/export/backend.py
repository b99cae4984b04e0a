"""The export traces TensorFlow graphs: it needs Keras on TensorFlow."""

import keras
import tensorflow as tf


class BackendError(RuntimeError):
    """Keras runs on a backend the export cannot use (not TensorFlow)."""


def check_tensorflow_backend(what):
    """Raises `BackendError` unless Keras runs on the TensorFlow backend.

    The export traces the generator's layers into TensorFlow graphs; on
    another backend they compute with that backend's arrays and the tracing
    would fail deep inside, with an error that does not say why.

    Args:
        what: the export, for the message ("TFLite export").
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise BackendError(
            f"{what} needs the TensorFlow backend (KERAS_BACKEND=tensorflow); "
            f"the current backend is {backend!r}."
        )


class ExportModule(tf.Module):
    """A `tf.Module` of an export, built only when Keras runs on TensorFlow
    (else `BackendError`, before anything else is done).

    Args:
        what: the export, for the error ("TFLite export").
        name: the module's name.
    """

    def __init__(self, what, name):
        check_tensorflow_backend(what)
        super().__init__(name=name)
