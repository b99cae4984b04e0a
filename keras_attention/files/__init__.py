"""Files written whole or not at all, and files read with one line when they cannot be.

Modules: `atomic` (atomic writes and folder swaps, the disk-full error; standard library only:
both `training` and `export` write through it), `file_hash` (a data file's SHA-256
against its published hash), `model_file` (a `.keras` file, or one line saying why
not), `reading` (a file to read must be a regular file: a FIFO or a device is refused
before it is opened) and `file_errors` (how a command ends when a file fails it: one
line and a clean exit status, a closed pipe quietly).

Import from the modules (`from keras_attention.files.atomic import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["atomic", "file_errors", "file_hash", "model_file", "reading"]
