"""What users pass, checked: the arguments of functions and layers, and command-line options.

Modules: `validation` (argument checks shared by the layers, the generators, export and the
translator) and `cli_types` (the `type=` of argparse options: one line naming the
option on bad text). Standard library only.

Import from the modules (`from keras_attention.arguments.cli_types import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["cli_types", "validation"]
