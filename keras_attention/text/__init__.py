"""Text in: the lines of a stream as they come, and symbol vocabularies.

Modules: `line_reader` (`LineReader`, `read_inputs`: what a line is for every command that
reads text), `symbol_vocabulary` (symbols and ids, the special ids first) and
`ascii_spelling` (`ascii_upper`: a word spelt in ASCII, upper-cased, or refused naming the
character).

Import from the modules (`from keras_attention.text.line_reader import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["ascii_spelling", "line_reader", "symbol_vocabulary"]
