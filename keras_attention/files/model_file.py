"""`load_model`: a `.keras` file, or one line saying why it cannot be read."""

import keras


class ModelFileError(ValueError):
    """A `.keras` file that Keras cannot load; the message, one line, names it."""


def load_model(path, **options):
    """`keras.saving.load_model(path, **options)` in Keras's safe mode.

    Raises:
        ModelFileError: the model holds a `Lambda` layer (arbitrary Python
            code, which safe mode refuses) or a class that is not registered
            with `keras.saving.register_keras_serializable` (a layer of a
            module not imported), or another config Keras cannot read. The
            message names the file and says what Keras found, in one line.
    """
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
        elif "Could not locate" in text:
            text += " (import the module that registers it before loading)"
        raise ModelFileError(f"{path} cannot be loaded: {text}") from error
