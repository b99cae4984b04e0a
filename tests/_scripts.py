"""Loading the example and benchmark scripts, which are files, not modules."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path, name=None):
    """Executes `ROOT / relative_path` as a fresh module and returns it.

    `name` is the module's name (default: the file's stem); each call gives a
    new module, so tests that patch one do not disturb the others.
    """
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
