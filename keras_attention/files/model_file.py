"""`load_model`: a `.keras` file, or one line saying why it cannot be read."""

import contextlib
import re

import keras

from keras_attention.files.reading import require_regular_file


class ModelFileError(ValueError):
    """A `.keras` file that Keras cannot load; the message, one line, names it."""


def load_model(path, import_hint="import the module that registers it before loading", **options):
    """`keras.saving.load_model(path, **options)` in Keras's safe mode.

    Args:
        path: the `.keras` file.
        import_hint: what the message of a class that is not registered
            tells the user to do (a command says its flag: "pass --import
            MODULE").
        **options: `keras.saving.load_model`'s.

    Raises:
        NotARegularFileError: `path` is a FIFO, a device or a folder
            (`keras_attention.files.reading`); it is not opened.
        ModelFileError: the model holds a `Lambda` layer (arbitrary Python
            code, which safe mode refuses) or a class that is not registered
            with `keras.saving.register_keras_serializable` (a layer of a
            module not imported), or another config Keras cannot read. The
            message names the file and says what Keras found, in one line.
    """
    with contextlib.suppress(FileNotFoundError):  # Keras says it as before
        require_regular_file(path, "model file")  # a FIFO would make Keras wait forever
    try:
        return keras.saving.load_model(path, **options)
    except (ValueError, TypeError) as error:
        text = str(error)
        # Keras wraps the error of a layer in the whole model's config.
        text = text.rsplit("Exception encountered:", 1)[-1]
        text = " ".join(text.split())
        if len(text) > 400:
            text = text[:400] + " ..."
        if "`Lambda` layer" in text:
            text += " (replace the Lambda with a registered layer class of its own)"
        elif missing := re.search(r"Could not locate (?:class|function) '([^']+)'", text):
            text = (
                f"the model holds {missing.group(1)!r}, which no imported module registers "
                f"(keras.saving.register_keras_serializable): {import_hint}"
            )
        raise ModelFileError(f"{path} cannot be loaded: {text}") from error
