"""The `KERAS_BACKEND` environment variable, checked before Keras is imported.

Keras reads the variable when it is first imported; a name that is not an
installed backend (a typo, or `torch` without PyTorch) fails deep inside that
import with a traceback. `check_keras_backend` says it in one line instead,
naming the variable and the backends that are installed. It imports nothing
but the standard library, and runs when imported: `keras_attention` imports it
before anything that imports Keras.

Two more checks, standard library too: `warn_untested_versions` (at import)
says in one `UntestedVersionWarning` when Keras or the backend's package is
outside the releases CI tests (`TESTED`), and `require_packages` stops a
command before it does any work when an optional package it needs is not
installed, in one line naming the package and the extra that brings it.
"""

import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import warnings
from pathlib import Path

# The backends of Keras 3, by the module each needs.
BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")
# Those keras_attention runs on. Keras' numpy and openvino backends run
# inference only: no training, and no loop of a decoder (a traceback deep in
# the first search).
SUPPORTED_BACKENDS = ("tensorflow", "jax", "torch")
# The console script of `keras_attention.translation.cli`.
CONSOLE_SCRIPTS = ("keras-attention-translate",)


def installed_backends():
    """The names of `SUPPORTED_BACKENDS` whose module can be imported."""
    return [name for name in SUPPORTED_BACKENDS if importlib.util.find_spec(name) is not None]


def check_keras_backend(environ=None):
    """Refuses a `KERAS_BACKEND` that names no installed backend, or one
    keras_attention does not run on (`numpy`, `openvino`: inference only).

    Nothing is checked once Keras is imported (its backend is then set).

    Raises:
        ImportError: the variable names an unknown, unsupported or missing
            backend; the message (one line) names the variable, its value,
            the supported backends and those installed. `python -m keras_attention.translation` then
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
    if name in SUPPORTED_BACKENDS:
        what = "a backend that is not installed"
    elif name in BACKENDS:
        what = (
            "a Keras backend that keras_attention does not support (it runs inference "
            "only: it cannot train, nor run a decoder's loop)"
        )
    else:
        what = "no Keras backend"
    message = (
        f"The environment variable KERAS_BACKEND={name!r} names {what}. Supported: "
        f"{', '.join(SUPPORTED_BACKENDS)}. Installed: {', '.join(installed) or 'none'}; "
        "set KERAS_BACKEND to one of them, or unset it."
    )
    if Path(sys.argv[0]).name in CONSOLE_SCRIPTS:
        raise SystemExit(f"error: {message}")
    # Named after the package: `python -m keras_attention.translation` (runpy)
    # then reports it in one line, not a traceback.
    raise ImportError(message, name="keras_attention")


# The releases CI tests, by distribution: the name users know it by, the
# oldest and the newest (major, minor). Oldest: .ci/run's second
# environment (Keras 3.12, TensorFlow 2.16); newest: what the `dev` extra
# pins (README's test command). setup.cfg allows more; outside this range a
# release gets `UntestedVersionWarning`, not a refusal.
TESTED = {
    "keras": ("Keras", (3, 12), (3, 15)),
    "tensorflow": ("TensorFlow", (2, 16), (2, 21)),
    "jax": ("JAX", (0, 10), (0, 10)),
    "torch": ("PyTorch", (2, 13), (2, 14)),
}
# The backend Keras picks when neither KERAS_BACKEND nor keras.json names one.
DEFAULT_BACKEND = "tensorflow"


class UntestedVersionWarning(UserWarning):
    """Keras or the backend's package is a release outside the tested range
    (`TESTED`). The package still runs. Filter it, before the import that
    warns, with `warnings.filterwarnings("ignore", message="Untested release")`,
    or by its category where warnings are filtered later (pytest's `-W`)."""


def selected_backend(environ=None):
    """The backend Keras will use, read as Keras reads it: `KERAS_BACKEND`,
    else `backend` in `$KERAS_HOME/keras.json` (default `~/.keras`), else
    TensorFlow. Keras' own choice once it is imported."""
    if "keras" in sys.modules and hasattr(sys.modules["keras"], "backend"):
        return sys.modules["keras"].backend.backend()
    environ = os.environ if environ is None else environ
    if environ.get("KERAS_BACKEND"):
        return environ["KERAS_BACKEND"]
    home = environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as file:
            return json.load(file).get("backend") or DEFAULT_BACKEND
    except (OSError, ValueError, AttributeError):
        return DEFAULT_BACKEND


def _release(text):
    """(major, minor) of a version string (`2.13.0+cpu`, `2.22.0rc0`), or None."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def _span(oldest, newest):
    first, last = ".".join(map(str, oldest)), ".".join(map(str, newest))
    return first if first == last else f"{first} to {last}"


def untested_versions(backend=None, version=importlib.metadata.version):
    """The installed releases of Keras and of `backend`'s package (default
    `selected_backend()`) outside `TESTED`: a list of lines such as
    "Keras 3.16.0 (tested: 3.12 to 3.15)". A package that is not installed,
    or a backend `TESTED` does not list, is left out."""
    backend = selected_backend() if backend is None else backend
    found = []
    for distribution in dict.fromkeys(("keras", backend)):
        if distribution not in TESTED:
            continue
        try:
            installed = version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        name, oldest, newest = TESTED[distribution]
        release = _release(installed)
        if release is None or not oldest <= release <= newest:
            found.append(f"{name} {installed} (tested: {_span(oldest, newest)})")
    return found


def warn_untested_versions(backend=None, version=importlib.metadata.version):
    """One `UntestedVersionWarning` naming every release of
    `untested_versions` and its tested range; none when all are tested."""
    found = untested_versions(backend, version)
    if found:
        warnings.warn(
            f"Untested release for keras_attention: {'; '.join(found)}. It should work; "
            "a failure that the tested range does not show is worth a report.",
            UntestedVersionWarning,
            stacklevel=2,
        )


# The optional packages, by import name: the distribution and the smallest
# extra of keras-seq2seq-attention that brings it (`examples` and `dev`
# bring them too).
OPTIONAL_PACKAGES = {
    "tensorflow": ("tensorflow", "tensorflow"),
    "tensorflow_text": ("tensorflow-text", "tensorflow"),
    "tensorboard": ("tensorboard", "tensorflow"),
    "sacrebleu": ("sacrebleu", "tensorflow"),
    "sacremoses": ("sacremoses", "tensorflow"),
    "matplotlib": ("matplotlib", "tensorflow"),
    "ai_edge_litert": ("ai-edge-litert", "tensorflow"),
}
# What each command of the translator (keras_attention.translation.cli)
# needs beyond Keras: train writes TensorBoard logs; evaluate scores
# (sacreBLEU), detokenizes (sacremoses) and plots; explain scores.
TRANSLATOR_NEEDS = {
    "train": ("tensorflow", "tensorflow_text", "tensorboard"),
    "status": (),
    "evaluate": ("tensorflow", "tensorflow_text", "sacrebleu", "sacremoses", "matplotlib"),
    "translate": ("tensorflow", "tensorflow_text", "sacremoses"),
    "explain": ("tensorflow", "tensorflow_text", "sacrebleu", "sacremoses"),
    "average": ("tensorflow",),
    "export": ("tensorflow", "tensorflow_text"),
}


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails, a module without a spec
        return False


def missing_packages(modules):
    """The import names of `modules` (keys of `OPTIONAL_PACKAGES`) that are
    not installed, in order."""
    return [module for module in modules if not _installed(module)]


def require_packages(command, modules):
    """Stops `command` before it does any work when one of `modules` (keys
    of `OPTIONAL_PACKAGES`) is not installed.

    Raises:
        SystemExit: one line, "error: COMMAND needs the PACKAGE package,
            which is not installed: pip install ..." naming every missing
            distribution and the extra that brings them.
    """
    missing = [OPTIONAL_PACKAGES[module] for module in missing_packages(modules)]
    if not missing:
        return
    names = [distribution for distribution, _ in missing]
    extras = ",".join(dict.fromkeys(extra for _, extra in missing))
    what = f"the {names[0]} package" if len(names) == 1 else f"the packages {', '.join(names)}"
    raise SystemExit(
        f"error: {command} needs {what}, which {'is' if len(names) == 1 else 'are'} not "
        f'installed: pip install "keras-seq2seq-attention[{extras}]" (or pip install '
        f"{' '.join(names)})"
    )


check_keras_backend()
warn_untested_versions()
