"""`--mixed-precision` and `--distribution` of the translator's and the G2P
example's `train`, which hand them to `TrainingRun`.

A tiny translator run (40 pairs, one epoch) trained under mixed_bfloat16
(bfloat16 runs on a CPU) exports, with `export` unchanged, to a builtin-only
TFLite model whose greedy tokens equal Keras greedy of the same weights in a
model built again in float32 (not through `keras_attention.backend.precision`). Bad
input is refused in one line before a run folder is made. The G2P example
alike: a quick run in mixed_bfloat16 exports with `export` unchanged, tokens
equal to its recipe rebuilt in float32; a quick run on 3 JAX host devices
(its own processes) ends with one device's weights. The translator on JAX is
tests/test_distributed.py.
"""

import numpy as np
import pytest
from _data_paths import multi30k_dir
from _data_paths import require_cmudict
from _host_devices import host_devices_flags

from keras_attention.backend import precision
from keras_attention.translation import cli

pytestmark = pytest.mark.tensorflow

TINY = ["train", "--preset", "tiny", "--max-train-examples", "40", "--epochs", "1"]
MAX_LENGTH = 12
SENTENCES = 20


@pytest.fixture(scope="module")
def bfloat16_run(tmp_path_factory):
    """(run folder, export folder) of a tiny translator trained in mixed_bfloat16."""
    data_dir = multi30k_dir()
    if not (data_dir / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data_dir} (see tests/_data_paths.py)")
    precision.check_policy("mixed_bfloat16")  # this runtime trains in it
    run_dir = tmp_path_factory.mktemp("bfloat16") / "run"
    out = run_dir.parent / "export"
    data = ["--data-dir", str(data_dir)]
    cli.main([*data, *TINY, "--mixed-precision", "mixed_bfloat16", "--run-dir", str(run_dir)])
    cli.main(["export", str(run_dir), str(out), "--variants", "float32", "--max-length", "12"])
    return run_dir, out


def test_a_bfloat16_run_trains_in_bfloat16_and_leaves_the_global_policy(bfloat16_run):
    import json

    import keras

    run_dir, _ = bfloat16_run
    assert keras.config.dtype_policy().name == "float32"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["mixed_precision"] == "mixed_bfloat16"
    model = keras.saving.load_model(run_dir / "model.keras")
    assert {policy for _, policy in precision.reduced_precision_layers(model)} == {"mixed_bfloat16"}


def test_a_bfloat16_run_exports_builtin_tflite_equal_to_keras_float32(bfloat16_run):
    import keras
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention.export import non_builtin_operators
    from keras_attention.translation import load_multi30k
    from keras_attention.translation.commands import load_run
    from keras_attention.translation.training import compiled_model
    from keras_attention.translation.translator import Translator

    run_dir, out = bfloat16_run
    path = next((out / "tflite").glob("*float32.tflite"))
    assert non_builtin_operators(path) == {}
    translator, config = load_run(run_dir)
    # The reference: the architecture built again in float32 (the global
    # policy, which the run put back), the weights set.
    assert keras.config.dtype_policy().name == "float32"
    reference_model = compiled_model(
        config, translator.source_tokenizer, translator.target_tokenizer
    )
    assert not precision.reduced_precision_layers(reference_model)
    reference_model.set_weights(translator.model.get_weights())
    reference = Translator(
        reference_model, translator.source_tokenizer, translator.target_tokenizer
    )
    texts = load_multi30k(("val",), multi30k_dir())["val"].en[:SENTENCES]
    runner = Interpreter(model_path=str(path)).get_signature_runner("translate")
    differ = []
    for text in texts:
        ids = translator.source_tokenizer.tokenize([text]).to_tensor().numpy().astype("int32")
        lite = runner(source_ids=ids)
        expected = reference.generator.greedy(ids, max_length=MAX_LENGTH)
        n = int(np.asarray(expected["lengths"])[0])
        got = lite["tokens"][0, : int(lite["lengths"][0])].tolist()
        if got != np.asarray(expected["tokens"])[0, :n].tolist():
            differ.append(text)
    assert differ == []


def test_a_bfloat16_run_exports_a_saved_model_that_serves_in_float32(bfloat16_run):
    """The text-in SavedModel of `export` translates as the same weights in a
    float32 model do, not in bfloat16 (which differs on these sentences)."""
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    from keras_attention.translation import load_multi30k
    from keras_attention.translation.commands import load_run
    from keras_attention.translation.tokenizer import START_ID
    from keras_attention.translation.training import compiled_model

    run_dir, out = bfloat16_run
    translator, config = load_run(run_dir)
    reference_model = compiled_model(
        config, translator.source_tokenizer, translator.target_tokenizer
    )
    assert keras.config.dtype_policy().name == "float32"
    reference_model.set_weights(translator.model.get_weights())
    texts = load_multi30k(("val",), multi30k_dir())["val"].en[:SENTENCES]
    ids = translator.source_tokenizer.tokenize(texts).to_tensor().numpy().astype("int32")
    saved = tf.saved_model.load(str(next((out / "saved_model").iterdir())))
    served = saved.signatures["serving_default"](sentences=tf.constant(texts))
    logits = {"float32": reference_model, "bfloat16": translator.model}
    scores = {}
    for name, model in logits.items():
        # Teacher-forced log-probabilities of the served tokens: float32's
        # own weights score them exactly as the SavedModel did.
        tokens = served["tokens"].numpy()
        target_in = np.concatenate([np.full((len(texts), 1), START_ID, "int32"), tokens[:, :-1]], 1)
        out_logits = keras.ops.convert_to_numpy(
            keras.ops.cast(model([ids, target_in], training=False), "float32")
        )
        log_probs = out_logits - np.log(np.exp(out_logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_probs, tokens[..., None], -1)[..., 0]
        lengths = served["lengths"].numpy()
        mask = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
        scores[name] = (picked * mask).sum(1)
    np.testing.assert_allclose(served["log_probs"].numpy(), scores["float32"], atol=1e-4)
    assert np.abs(served["log_probs"].numpy() - scores["bfloat16"]).max() > 1e-3


def test_distribution_on_tensorflow_is_one_line_pointing_to_strategy(tmp_path):
    run_dir = tmp_path / "run"
    argv = ["--data-dir", str(tmp_path), *TINY, "--run-dir", str(run_dir)]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--distribution", "data-parallel"])
    message = str(info.value.code)
    assert message.startswith("train: --distribution data-parallel needs the JAX backend")
    assert "--strategy mirrored" in message and "\n" not in message
    assert not run_dir.exists()


def test_an_unknown_policy_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([*TINY, "--run-dir", str(tmp_path / "run"), "--mixed-precision", "float16"])
    assert info.value.code == 2
    assert "argument --mixed-precision: invalid choice: 'float16'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_policy_the_runtime_cannot_take_is_one_line(tmp_path, monkeypatch):
    def no_kernel(policy):
        raise RuntimeError("no bfloat16 kernel for MatMul\nmore lines")

    monkeypatch.setattr(precision, "_probe", no_kernel)
    run_dir = tmp_path / "run"
    argv = ["--data-dir", str(tmp_path), *TINY, "--run-dir", str(run_dir)]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--mixed-precision", "mixed_bfloat16"])
    message = str(info.value.code)
    assert message.startswith("train: Invalid value for argument `policy`")
    assert "cannot train in bfloat16" in message and "no bfloat16 kernel" in message
    assert "\n" not in message
    assert not run_dir.exists()


# ------------------------------------------------------------ the G2P example


@pytest.fixture(scope="module")
def g2p():
    from _scripts import load_script

    return load_script("examples/g2p_cmudict.py")


def test_g2p_train_takes_both_flags_and_refuses_distribution_off_jax(g2p, tmp_path):
    from _scripts import ROOT

    run_dir = tmp_path / "run"
    argv = ["train", "--quick", "--data-dir", str(ROOT.parent / "shared" / "data" / "cmudict")]
    argv += ["--run-dir", str(run_dir), "--mixed-precision", "mixed_bfloat16"]
    args = g2p.parse_args([*argv, "--distribution", "data-parallel"])
    assert (args.mixed_precision, args.distribution) == ("mixed_bfloat16", "data-parallel")
    with pytest.raises(SystemExit) as info:
        g2p.main([*argv, "--distribution", "data-parallel"])
    message = str(info.value.code)
    assert message.startswith("train: distribution='data-parallel' needs the JAX backend")
    assert "tf.distribute" in message and "\n" not in message
    assert not run_dir.exists()


def test_g2p_trained_in_bfloat16_exports_builtin_tflite_equal_to_keras_float32(g2p, tmp_path):
    import keras
    from _scripts import ROOT
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention import Seq2SeqGenerator
    from keras_attention.export import non_builtin_operators

    cmudict = ROOT.parent / "shared" / "data" / "cmudict"
    require_cmudict()
    run_dir, out = tmp_path / "run", tmp_path / "export"
    argv = ["train", "--quick", "--steps-per-epoch", "2", "--max-minutes", "0.1"]
    argv += ["--verbose", "0", "--data-dir", str(cmudict), "--run-dir", str(run_dir)]
    g2p.main([*argv, "--mixed-precision", "mixed_bfloat16"])
    model, vocab, config = g2p.load_run(str(run_dir))
    assert config["mixed_precision"] == "mixed_bfloat16"
    assert {policy for _, policy in precision.reduced_precision_layers(model)} == {"mixed_bfloat16"}
    assert keras.config.dtype_policy().name == "float32"
    # `export` as for a float32 run, no option of its own.
    g2p.main(["export", "--run-dir", str(run_dir), str(out), "--variants", "float32"])
    path = out / "tflite" / "g2p_float32.tflite"
    assert non_builtin_operators(path) == {}
    # The reference: the recipe built again in float32, the weights set.
    options = {name: config[name] for name in g2p.MODEL_OPTIONS}
    reference_model = g2p.build_model(len(vocab.graphemes), len(vocab.phones), **options)
    assert not precision.reduced_precision_layers(reference_model)
    reference_model.set_weights(model.get_weights())
    reference = Seq2SeqGenerator.from_model(reference_model, start_id=g2p.START, end_id=g2p.END)
    runner = Interpreter(model_path=str(path)).get_signature_runner("generate")
    words = sorted(g2p.read_split(str(cmudict), "cmudict-0.7b.test"))[::1000][:SENTENCES]
    differ = []
    for word in words:
        ids = np.array([vocab.encode_word(word)], "int32")
        lite = runner(source=ids)
        expected = reference.greedy(ids)
        n = int(np.asarray(expected["lengths"])[0])
        got = lite["tokens"][0, : int(lite["lengths"][0])].tolist()
        if got != np.asarray(expected["tokens"])[0, :n].tolist():
            differ.append(word)
    assert differ == []


def test_g2p_on_three_jax_devices_trains_as_on_one(tmp_path):
    """`train --quick --distribution data-parallel` on 3 JAX host devices,
    against `train --quick` on one, both processes at once: every batch of
    32 pairs gets a padding row (and the data's last, of 10, two), yet the
    runs end with the same weights (measured: 2.3e-5 of each variable's
    largest value after 22 Adam steps) and the same last loss. Dropout 0: a
    batch of 33 rows draws other masks than one of 32. The learning rate is
    the step count's, not the clock's: 24 steps in a 60-minute budget."""
    import importlib.util
    import json
    import os
    import subprocess
    import sys

    import keras
    from _scripts import ROOT
    from _scripts import load_script

    import keras_attention  # noqa: F401  (registers the layers model.keras names)

    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    cmudict = ROOT.parent / "shared" / "data" / "cmudict"
    require_cmudict()
    command = [sys.executable, str(ROOT / "examples" / "g2p_cmudict.py"), "train", "--quick"]
    command += ["--steps-per-epoch", "2", "--dropout", "0", "--verbose", "0"]
    command += ["--data-dir", str(cmudict)]
    processes = {}
    for devices, extra in ((1, []), (3, ["--distribution", "data-parallel"])):
        env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
        env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
        env["XLA_FLAGS"] = host_devices_flags(devices)
        run_dir = tmp_path / f"devices_{devices}"
        process = subprocess.Popen(
            [*command, "--run-dir", str(run_dir), *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes[devices] = process, run_dir
    for process, _ in processes.values():
        try:
            _, err = process.communicate(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, err[-3000:]
    (_, one), (_, three) = processes[1], processes[3]
    config = json.loads((three / "config.json").read_text())
    assert (config["distribution"], config["devices"], config["batch_size"]) == (
        "data-parallel",
        3,
        32,
    )
    assert json.loads((one / "config.json").read_text())["devices"] is None
    assert keras.backend.backend() == "tensorflow"
    g2p = load_script("examples/g2p_cmudict.py")
    weights = [g2p.load_run(str(run))[0].get_weights() for run in (one, three)]
    moved = [np.abs(a - b).max() / np.abs(a).max() for a, b in zip(*weights, strict=True)]
    assert max(moved) < 1e-4, max(moved)
    losses = [json.loads((run / "progress.json").read_text())["epochs"] for run in (one, three)]
    assert len(losses[0]) == len(losses[1]) == 12
    assert losses[0][-1]["loss"] < losses[0][0]["loss"]  # the compared runs train
    np.testing.assert_allclose(losses[1][-1]["loss"], losses[0][-1]["loss"], rtol=1e-5)
