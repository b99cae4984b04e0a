"""How the package meets Keras and its backends.

Modules: `check` (the `KERAS_BACKEND` variable, checked before Keras is imported; imports
nothing), `native_log` (TensorFlow's C++ start-up log kept off the
package's commands' standard error; standard library only), `loops` (a scan over time
that compiles and differentiates on every backend)
and `precision` (mixed-precision policies checked before training, float32 copies for
export).

Import from the modules (`from keras_attention.backend.check import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["check", "loops", "native_log", "precision"]
