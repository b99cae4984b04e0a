"""Running an exported model in an app (numpy only; imports nothing of Keras or TensorFlow).

Modules: `litert`: `warm_up`, one call of every signature at the longest source before the
app's first (LiteRT can go wrong on an interpreter's first call longer than any before
it); `streaming`: `SimultaneousLite`, the app's side of a simultaneous decoder's
streaming loop (`read`, `write`, `translate`).

Import from the modules (`from keras_attention.runtime.litert import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["litert", "streaming"]
