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


# ------------------------- trained on JAX or PyTorch, exported from its file

TRAIN = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import keras
    import numpy as np

    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder
    from keras_attention import Seq2SeqGenerator

    out = Path(sys.argv[1])
    vocab = 20
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, 8, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(vocab, 8, mask_zero=True)(target)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(8))(y, memory)
    model = keras.Model([source, target], keras.layers.Dense(vocab)(outputs))
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-0.8, 0.8, w.shape).astype("float32") for w in model.weights])
    ids = rng.integers(3, vocab, size=(16, 6)).astype("int32")
    ids[::3, 4:] = 0
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=0))
    keras.utils.set_random_seed(0)  # fit's shuffle: the same model each run
    model.fit([ids, ids[:, :5]], ids[:, 1:], epochs=2, batch_size=8, verbose=0)
    model.save(out / "model.keras")
    generator = Seq2SeqGenerator.from_model(model, 1, vocab - 1)
    greedy = [generator.greedy(ids[i : i + 1, : 4 if i % 3 == 0 else 6], max_length=6)["tokens"]
              for i in range(len(ids))]
    beam = [generator.beam(ids[i : i + 1, : 4 if i % 3 == 0 else 6], beam_width=2, max_length=6)
            ["tokens"] for i in range(len(ids))]
    np.savez(out / "tokens.npz", ids=ids, greedy=np.concatenate(greedy), beam=np.concatenate(beam))
    print(keras.backend.backend())
    """
)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_model_trained_on_another_backend_exports_with_one_command(backend, tmp_path):
    """Trained and saved on `backend`; `python -m keras_attention.export`,
    started there too, exports on TensorFlow; the TFLite tokens are the
    training backend's Keras tokens."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention.export import non_builtin_operators
    from keras_attention.runtime.litert import warm_up

    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=package_root)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    trained = subprocess.run(
        [sys.executable, "-c", TRAIN, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stderr[-4000:]
    assert trained.stdout.split()[-1] == backend
    command = [sys.executable, "-m", "keras_attention.export", str(tmp_path / "model.keras")]
    command += [str(tmp_path / "out"), "--start-id", "1", "--end-id", "19", "--beam-width", "2"]
    command += ["--max-length", "6", "--variants", "float32"]
    exported = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr[-4000:]
    path = tmp_path / "out" / "model.tflite"
    assert non_builtin_operators(path) == {}
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert (manifest["start_id"], manifest["end_id"]) == (1, 19)
    expected = np.load(tmp_path / "tokens.npz")
    assert len(set(expected["greedy"].ravel().tolist())) > 3  # not one token everywhere
    # As docs/deploy.md says: LiteRT can go wrong on an interpreter's first
    # call longer than any before it (4, then 6 tokens here).
    interpreter = warm_up(Interpreter(model_path=str(path)), 6)
    for signature, search in (("generate", "greedy"), ("generate_beam", "beam")):
        run = interpreter.get_signature_runner(signature)
        for i, ids in enumerate(expected["ids"]):
            source = ids[None, : 4 if i % 3 == 0 else 6]
            np.testing.assert_array_equal(run(source=source)["tokens"][0], expected[search][i])


def test_export_command_says_what_is_wrong_in_one_line(tmp_path):
    command = [sys.executable, "-m", "keras_attention.export", str(tmp_path / "none.keras")]
    command += [str(tmp_path / "out"), "--start-id", "1", "--end-id", "2"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    missing = str(tmp_path / "none.keras")
    assert result.stderr.strip().splitlines()[-1] == (
        f"python -m keras_attention.export: error: No model file at {missing!r}."
    )
    assert not (tmp_path / "out").exists()


OWN_LAYER = textwrap.dedent(
    """
    import keras


    @keras.saving.register_keras_serializable(package="mine")
    class Twice(keras.layers.Layer):
        acts_on_each_step = True  # in a readout: from_model refuses an undeclared layer

        def call(self, x):
            return x * 2
    """
)
OWN_MODEL = textwrap.dedent(
    """
    import sys

    import keras
    from my_layers import Twice

    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder

    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(20, 8, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(8, BahdanauAttention(8))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(20)(Twice()(outputs)))
    model.save(sys.argv[1])
    """
)


@pytest.mark.tensorflow
def test_a_model_of_ones_own_classes_exports_with_import_and_says_so_without(tmp_path):
    (tmp_path / "my_layers.py").write_text(OWN_LAYER)
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), package_root]))
    made = subprocess.run(
        [sys.executable, "-c", OWN_MODEL, str(tmp_path / "model.keras")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-4000:]
    command = [sys.executable, "-m", "keras_attention.export", str(tmp_path / "model.keras")]
    command += ["--start-id", "1", "--end-id", "2", "--variants", "float32", "--max-length", "4"]
    refused = subprocess.run(
        [*command, str(tmp_path / "refused")], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2
    line = refused.stderr.strip().splitlines()[-1]
    assert "the model holds 'Twice'" in line, line
    assert "--import MODULE" in line, line
    assert not (tmp_path / "refused").exists()
    exported = subprocess.run(
        [*command, str(tmp_path / "out"), "--import", "my_layers"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert exported.returncode == 0, exported.stderr[-4000:]
    assert (tmp_path / "out" / "model.tflite").is_file()
