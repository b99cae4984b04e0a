"""Exporting on a Keras backend other than TensorFlow fails at once, saying why.

One fresh process with KERAS_BACKEND=jax builds a tiny translator model and
calls each export on it; each must raise `BackendError` naming the backend,
before writing anything.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import keras_attention

EXPORTS = (
    "export_tflite",
    "LiteGenerator",
    "convert",
    "export_saved_model",
    "ServingGenerator",
    "translation.export_run",
    "translation.ServingTranslator",
    "translation.lite_translator",
)
TFLITE_EXPORTS = ("export_tflite", "LiteGenerator", "convert", "translation.lite_translator")
MESSAGE = (
    "{what} needs the TensorFlow backend (KERAS_BACKEND=tensorflow); the current backend is 'jax'."
)

SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    from pathlib import Path

    import keras

    from keras_attention import Seq2SeqGenerator
    from keras_attention import export
    from keras_attention.translation import export as translation_export
    from keras_attention.translation import lite
    from keras_attention.translation import serving
    from keras_attention.translation.model import build_translator

    out = Path(sys.argv[1])
    model = build_translator(20, 20, embedding_dim=4, units=8)
    generator = Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)
    translator = type("Translator", (), {"generator": generator})()
    calls = {
        "export_tflite": lambda: export.export_tflite(generator, out / "model.tflite"),
        "LiteGenerator": lambda: export.LiteGenerator(generator),
        "convert": lambda: export.convert(None),
        "export_saved_model": lambda: export.export_saved_model(generator, out / "saved"),
        "ServingGenerator": lambda: export.ServingGenerator(generator),
        "translation.export_run": lambda: translation_export.export_run(
            out / "no_run", out / "export"
        ),
        "translation.ServingTranslator": lambda: serving.ServingTranslator(translator),
        "translation.lite_translator": lambda: lite.lite_translator(translator),
    }
    errors = {}
    for name, call in calls.items():
        try:
            call()
        except export.BackendError as error:
            errors[name] = str(error)
    code = translation_export.main([str(out / "no_run"), str(out / "export")])
    print(json.dumps({"backend": keras.backend.backend(), "errors": errors, "code": code}))
    """
)


@pytest.fixture(scope="module")
def jax_errors(tmp_path_factory):
    """(export → its error message on the jax backend, files left behind,
    exit status and standard error of the export command)."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    folder = tmp_path_factory.mktemp("jax_export")
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=package_root)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    written = sorted(p.name for p in folder.iterdir())
    return result["errors"], written, result["code"], completed.stderr


@pytest.mark.parametrize("name", EXPORTS)
def test_export_on_jax_backend_names_the_backend(name, jax_errors):
    errors = jax_errors[0]
    if name in TFLITE_EXPORTS:
        what = "TFLite export"
    elif name == "translation.export_run":
        what = "The export of a run"
    else:
        what = "SavedModel export"
    assert errors.get(name) == MESSAGE.format(what=what)


def test_export_on_jax_backend_writes_nothing(jax_errors):
    assert jax_errors[1] == []


def test_export_command_on_jax_backend_says_so_in_one_line(jax_errors):
    _, _, code, stderr = jax_errors
    assert code == 2
    assert f"error: {MESSAGE.format(what='The export of a run')}" in stderr
