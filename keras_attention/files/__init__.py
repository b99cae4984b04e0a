"""Files written whole or not at all, and files read with one line when they cannot be.

Modules: `atomic` (atomic writes and folder swaps, the disk-full error; standard library only:
both `training` and `export` write through it), `file_hash` (a data file's SHA-256
against its published hash) and `model_file` (a `.keras` file, or one line saying why
not).

Import from the modules (`from keras_attention.files.atomic import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["atomic", "file_hash", "model_file"]
