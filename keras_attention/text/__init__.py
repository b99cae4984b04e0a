"""Text in: the lines of a stream as they come, and symbol vocabularies.

Modules: `line_reader` (`LineReader`, `read_inputs`: what a line is for every command that
reads text) and `symbol_vocabulary` (symbols and ids, the special ids first).

Import from the modules (`from keras_attention.text.line_reader import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["line_reader", "symbol_vocabulary"]
