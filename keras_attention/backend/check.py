"""The `KERAS_BACKEND` environment variable, checked before Keras is imported.

Keras reads the variable when it is first imported; a name that is not an
installed backend (a typo, or `torch` without PyTorch) fails deep inside that
import with a traceback. `check_keras_backend` says it in one line instead,
naming the variable and the backends that are installed. It imports nothing
but the standard library, and runs when imported: `keras_attention` imports it
before anything that imports Keras.
"""

import importlib.util
import os
import sys
from pathlib import Path

# The backends of Keras 3, by the module each needs.
BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")
# The console script of `keras_attention.translation.cli`.
CONSOLE_SCRIPTS = ("keras-attention-translate",)


def installed_backends():
    """The names of `BACKENDS` whose module can be imported."""
    return [name for name in BACKENDS if importlib.util.find_spec(name) is not None]


def check_keras_backend(environ=None):
    """Refuses a `KERAS_BACKEND` that names no installed backend.

    Nothing is checked once Keras is imported (its backend is then set).

    Raises:
        ImportError: the variable names an unknown or missing backend; the
            message (one line) names the variable, its value and the
            installed backends. `python -m keras_attention.translation` then
            prints that line alone.
        SystemExit: the same message, for the `keras-attention-translate`
            console script (`error: message`).
    """
    environ = os.environ if environ is None else environ
    name = environ.get("KERAS_BACKEND")
    if not name or "keras" in sys.modules:
        return
    installed = installed_backends()
    if name in installed:
        return
    what = "a backend that is not installed" if name in BACKENDS else "no Keras backend"
    message = (
        f"The environment variable KERAS_BACKEND={name!r} names {what}. Installed: "
        f"{', '.join(installed) or 'none'}; set KERAS_BACKEND to one of them, or unset it."
    )
    if Path(sys.argv[0]).name in CONSOLE_SCRIPTS:
        raise SystemExit(f"error: {message}")
    # Named after the package: `python -m keras_attention.translation` (runpy)
    # then reports it in one line, not a traceback.
    raise ImportError(message, name="keras_attention")


check_keras_backend()
