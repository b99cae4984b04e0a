"""What `Seq2SeqGenerator.from_model` checks, and how it reads the model.

The ids it is given (START and END inside the target vocabulary, apart, START
not the padding id), a source whose padding the decoder would read as real
positions, a model with more than one output, the vocabulary sizes it hands to
the TFLite manifest, and the graph reading: public Keras API only, nested
models, and the user's model left as it was.
"""

import ast
import pathlib
import warnings

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention.generation
from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import Seq2SeqGenerator

SOURCE_VOCAB = 13
TARGET_VOCAB = 11
EMBEDDING = 6
UNITS = 8
START, END = 1, 2


def _model(mask_zero=True, two_outputs=False, explicit_mask=False, nested_encoder=False):
    """A small teacher-forced model `[source, target_in] → logits (B, T, V)`."""
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedding = keras.layers.Embedding(
        SOURCE_VOCAB, EMBEDDING, mask_zero=mask_zero, name="source_embedding"
    )
    recurrent = keras.layers.GRU(UNITS, return_sequences=True, return_state=True, name="encoder")
    if nested_encoder:
        inner = keras.Input((None,), dtype="int32", name="inner_source")
        encoder = keras.Model(inner, recurrent(embedding(inner)), name="nested_encoder")
        memory, state = encoder(source)
    else:
        memory, state = recurrent(embedding(source))
    embedded = keras.layers.Embedding(
        TARGET_VOCAB, EMBEDDING, mask_zero=True, name="target_embedding"
    )(target_in)
    bridge = keras.layers.Dense(UNITS, activation="tanh", name="bridge")(state)
    decoder = BahdanauDecoder(UNITS, BahdanauAttention(units=5), name="decoder")
    extra = {"memory_mask": ops.not_equal(source, 0)} if explicit_mask else {}
    outputs, weights, _ = decoder(embedded, memory, initial_state=bridge, **extra)
    logits = keras.layers.Dense(TARGET_VOCAB, name="logits")(outputs)
    return keras.Model(
        [source, target_in], [logits, weights] if two_outputs else logits, name="small"
    )


@pytest.fixture(scope="module")
def model():
    return _model()


def _padding_warnings(build):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = build()
    return result, [w for w in caught if "padding" in str(w.message)]


# ---------------------------------------------------------------- the ids


@pytest.mark.parametrize("value", [TARGET_VOCAB, TARGET_VOCAB + 7])
def test_a_start_id_outside_the_target_vocabulary_is_refused(model, value):
    with pytest.raises(ValueError, match="argument `start_id`") as error:
        Seq2SeqGenerator.from_model(model, start_id=value, end_id=END)
    assert f"[1, {TARGET_VOCAB})" in str(error.value)
    assert f"start_id={value}" in str(error.value)


@pytest.mark.parametrize("value", [TARGET_VOCAB, TARGET_VOCAB + 7])
def test_an_end_id_outside_the_target_vocabulary_is_refused(model, value):
    # No logit could ever pick it: no output would end.
    with pytest.raises(ValueError, match="argument `end_id`") as error:
        Seq2SeqGenerator.from_model(model, START, end_id=value)
    assert f"[0, {TARGET_VOCAB})" in str(error.value)
    assert f"end_id={value}" in str(error.value)


def test_start_id_equal_to_end_id_is_refused(model):
    with pytest.raises(ValueError, match="argument `end_id`. Expected an id other than start_id"):
        Seq2SeqGenerator.from_model(model, start_id=3, end_id=3)


def test_start_id_zero_the_padding_id_is_refused(model):
    with pytest.raises(ValueError, match="argument `start_id`.*padding") as error:
        Seq2SeqGenerator.from_model(model, start_id=0, end_id=END)
    assert "start_id=0" in str(error.value)


def test_ids_at_the_edges_of_the_vocabulary_are_accepted(model):
    generator = Seq2SeqGenerator.from_model(model, start_id=TARGET_VOCAB - 1, end_id=1)
    result = generator.greedy(np.array([[3, 4, 0]], np.int32), max_length=4)
    assert result["tokens"].shape == (1, 4)


def test_the_generator_knows_both_vocabulary_sizes(model):
    generator = Seq2SeqGenerator.from_model(model, START, END)
    assert generator.source_vocabulary_size == SOURCE_VOCAB
    assert generator.target_vocabulary_size == TARGET_VOCAB


# ------------------------------------------------------------ the padding


def test_a_source_embedding_without_mask_zero_warns_naming_the_layer():
    model = _model(mask_zero=False)
    generator, found = _padding_warnings(lambda: Seq2SeqGenerator.from_model(model, START, END))
    assert len(found) == 1
    message = str(found[0].message)
    assert "'source_embedding'" in message and "mask_zero=False" in message
    assert "mask_zero=True" in message  # the fix
    # What the warning is about: the padding of a source counts as real.
    _, mask = generator.encode(np.array([[3, 4, 0, 0]], np.int32))
    assert ops.convert_to_numpy(mask).tolist() == [[True, True, True, True]]


@pytest.mark.parametrize("explicit_mask", [False, True], ids=["mask_zero", "memory_mask"])
def test_a_masked_source_gives_no_warning(explicit_mask):
    model = _model(mask_zero=not explicit_mask, explicit_mask=explicit_mask)
    generator, found = _padding_warnings(lambda: Seq2SeqGenerator.from_model(model, START, END))
    assert found == []
    _, mask = generator.encode(np.array([[3, 4, 0, 0]], np.int32))
    assert ops.convert_to_numpy(mask).tolist() == [[True, True, False, False]]


# ----------------------------------------------------------- the readout


def _readout_model(*layers):
    """`_model`'s encoder and decoder, `layers` then the logits as readout."""
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(SOURCE_VOCAB, EMBEDDING, mask_zero=True)(source)
    memory, state = keras.layers.GRU(UNITS, return_sequences=True, return_state=True)(embedded)
    target = keras.layers.Embedding(TARGET_VOCAB, EMBEDDING, mask_zero=True)(target_in)
    decoder = BahdanauDecoder(UNITS, BahdanauAttention(units=5), name="decoder")
    x, _, _ = decoder(target, memory, initial_state=state)
    for layer in layers:
        x = layer(x)
    logits = keras.layers.Dense(TARGET_VOCAB, name="logits")(x)
    return keras.Model([source, target_in], logits, name="readout_model")


NON_CAUSAL = {
    "conv_same": lambda: [keras.layers.Conv1D(UNITS, 3, padding="same", name="conv_same")],
    "conv_same_between_dense": lambda: [
        keras.layers.Dense(UNITS, name="before"),
        keras.layers.Conv1D(UNITS, 2, padding="same", name="conv_same_between_dense"),
        keras.layers.LayerNormalization(name="after"),
    ],
    "conv_causal": lambda: [keras.layers.Conv1D(UNITS, 3, padding="causal", name="conv_causal")],
    "gru": lambda: [keras.layers.GRU(UNITS, return_sequences=True, name="gru")],
    "bidirectional": lambda: [
        keras.layers.Bidirectional(
            keras.layers.GRU(UNITS, return_sequences=True), name="bidirectional"
        )
    ],
}


@pytest.mark.parametrize("name", sorted(NON_CAUSAL))
def test_a_readout_that_mixes_steps_is_refused_naming_the_layer(name):
    # A generator runs the readout on one step: a layer that reads later
    # steps (padding "same", bidirectional) or earlier ones (causal, wider
    # than one step; recurrent) would give tokens other than the model's.
    model = _readout_model(*NON_CAUSAL[name]())
    with pytest.raises(ValueError, match=f"The layer '{name}' between the decoder 'decoder'"):
        Seq2SeqGenerator.from_model(model, START, END)


def test_a_refused_readout_is_one_the_generator_would_get_wrong():
    # What the refusal prevents: without it, the generator's tokens and the
    # model's own argmax along them differ for a causal Conv1D of kernel 3.
    model = _trained(_readout_model(keras.layers.Conv1D(UNITS, 3, padding="causal")))
    graph = keras_attention.generation.model_graph
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph, "check_readout_steps", lambda *args: None)
        patch.setattr(graph, "_check_readout_acts_on_each_step", lambda *args: None)
        greedy, forced = _greedy_and_teacher_forced_tokens(model)
    assert greedy != forced


def _shift_layers(steps):
    """Layers whose output at step t is their input at step t - `steps`."""
    return [
        keras.layers.ZeroPadding1D((steps, 0), name="shift"),
        keras.layers.Cropping1D((0, steps), name="crop"),
    ]


def _shift_ops(steps):
    """The same shift written with `keras.ops`, which the graph holds as operations."""
    return [lambda x: ops.pad(x[:, :-steps], [[0, 0], [steps, 0], [0, 0]])]


# Readouts that read steps 4 or more away, which a probe of 4 steps cannot see.
FAR_STEPS = {
    f"conv_dilation_{dilation}_{padding}": (
        lambda dilation=dilation, padding=padding: [
            keras.layers.Conv1D(
                UNITS,
                2,
                dilation_rate=dilation,
                padding=padding,
                name=f"conv_dilation_{dilation}_{padding}",
            )
        ],
        f"conv_dilation_{dilation}_{padding}",
    )
    for dilation in (4, 8)
    for padding in ("causal", "same")
}
FAR_STEPS["shift_4_layers"] = (lambda: _shift_layers(4), "shift")
FAR_STEPS["shift_4_ops"] = (lambda: _shift_ops(4), "GetItem")  # an operation: by class


@pytest.mark.parametrize("name", sorted(FAR_STEPS))
def test_a_readout_reading_steps_far_away_is_refused_naming_the_layer(name):
    # Decided from the layers: a probe of a few steps sees nothing at 4 or 8.
    layers, culprit = FAR_STEPS[name]
    model = _readout_model(*layers())
    names = {entry["class_name"]: entry["name"] for entry in model.get_config()["layers"]}
    culprit = names.get(culprit, culprit)
    with pytest.raises(ValueError, match="mix target steps") as error:
        Seq2SeqGenerator.from_model(model, START, END)
    assert f"The layer '{culprit}' between the decoder 'decoder'" in str(error.value)


def test_the_probe_alone_would_accept_a_readout_four_steps_away():
    # Why the layers decide: with the layer check off, the probe of 4 steps
    # lets a causal Conv1D of dilation 4 through.
    model = _readout_model(keras.layers.Conv1D(UNITS, 2, dilation_rate=4, padding="causal"))
    graph = keras_attention.generation.model_graph
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph, "check_readout_steps", lambda *args: None)
        Seq2SeqGenerator.from_model(model, START, END)


@keras.saving.register_keras_serializable(package="test_from_model_checks")
class Halved(keras.layers.Layer):
    """A layer of one's own that acts on each step: x / 2."""

    def call(self, inputs):
        return inputs / 2


@keras.saving.register_keras_serializable(package="test_from_model_checks")
class DeclaredHalved(Halved):
    acts_on_each_step = True


UNREADABLE = {
    "own_layer": (lambda: [Halved(name="own_layer")], "declares no `acts_on_each_step`"),
    "lambda": (lambda: [keras.layers.Lambda(lambda x: x / 2, name="lambda")], "Lambda"),
    "softmax_over_time": (
        lambda: [keras.layers.Softmax(axis=1, name="softmax_over_time")],
        "time axis",
    ),
    "attention_over_targets": (
        lambda: [lambda x: keras.layers.Attention(name="attention_over_targets")([x, x])],
        "reads every step",
    ),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_readout_layer_not_known_to_act_on_each_step_is_refused(name):
    layers, why = UNREADABLE[name]
    with pytest.raises(ValueError, match=f"The layer '{name}' between") as error:
        Seq2SeqGenerator.from_model(_readout_model(*layers()), START, END)
    assert why in str(error.value)
    assert "acts_on_each_step = True" in str(error.value)  # the way out


def _greedy_and_teacher_forced_tokens(model):
    """The generator's greedy tokens and the model's own argmax along them,
    each row cut to its output length: equal when the readout is per step."""
    generator = Seq2SeqGenerator.from_model(model, START, END)
    source = np.array([[3, 4, 5, 6], [7, 8, 9, 0]], np.int32)
    result = generator.greedy(source, max_length=6)
    tokens = np.asarray(result["tokens"])
    target_in = np.concatenate([np.full((2, 1), START, np.int32), tokens[:, :-1]], axis=1)
    target_in = np.where(target_in == 0, END, target_in)  # steps after END: any real id
    logits = ops.convert_to_numpy(model([source, target_in], training=False))
    lengths = np.asarray(result["lengths"])
    greedy = [tokens[row, :n].tolist() for row, n in enumerate(lengths)]
    forced = [logits[row, :n].argmax(-1).tolist() for row, n in enumerate(lengths)]
    return greedy, forced


PER_STEP = {
    "conv_kernel_1": lambda: [keras.layers.Conv1D(UNITS, 1, padding="causal")],
    "dense": lambda: [keras.layers.Dense(UNITS, activation="tanh")],
    "dropout": lambda: [keras.layers.Dropout(0.5)],
    "layer_norm": lambda: [keras.layers.LayerNormalization()],
    "time_distributed": lambda: [keras.layers.TimeDistributed(keras.layers.Dense(UNITS))],
    "einsum_dense": lambda: [keras.layers.EinsumDense("btd,de->bte", (None, UNITS))],
    "activation_and_ops": lambda: [keras.layers.Activation("relu"), lambda x: ops.tanh(x) * 2.0],
    "merge_branches": lambda: [
        lambda x: keras.layers.Add()([keras.layers.Dense(UNITS)(x), x]),
        lambda x: keras.layers.Concatenate()([x, keras.layers.Softmax()(x)]),
    ],
    "nested_sequential": lambda: [
        keras.Sequential([keras.layers.Dense(UNITS), keras.layers.LayerNormalization()])
    ],
    "declared_own_layer": lambda: [DeclaredHalved()],
}


def _trained(model):
    """`model` after a few training steps, so that the logits are not near ties."""
    rng = np.random.default_rng(0)
    source = rng.integers(3, SOURCE_VOCAB, (32, 5)).astype("int32")
    target = np.concatenate([source[:, :4] % TARGET_VOCAB, np.full((32, 1), END)], 1)
    target = np.maximum(target, 3).astype("int32")
    target_in = np.concatenate([np.full((32, 1), START, np.int32), target[:, :-1]], 1)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit([source, target_in], target, epochs=3, batch_size=8, verbose=0)
    return model


@pytest.mark.parametrize("name", sorted(PER_STEP))
def test_a_readout_acting_on_each_step_is_accepted(name):
    generator = Seq2SeqGenerator.from_model(_readout_model(*PER_STEP[name]()), START, END)
    assert generator.greedy(np.array([[3, 4]], np.int32), max_length=3)["tokens"].shape == (1, 3)


def test_a_per_step_readout_gives_the_models_own_tokens():
    # Every accepted kind in one readout, trained a few steps.
    layers = [layer for name in sorted(PER_STEP) for layer in PER_STEP[name]()]
    greedy, forced = _greedy_and_teacher_forced_tokens(_trained(_readout_model(*layers)))
    assert sum(map(len, greedy)) > 0
    assert greedy == forced


# ------------------------------------------------------------- the model


def test_a_two_output_model_error_names_the_one_line_fix():
    model = _model(two_outputs=True)
    with pytest.raises(ValueError, match="2 output") as error:
        Seq2SeqGenerator.from_model(model, START, END)
    assert "keras.Model(model.inputs, model.outputs[0])" in str(error.value)
    # ...and the fix works.
    fixed = keras.Model(model.inputs, model.outputs[0])
    Seq2SeqGenerator.from_model(fixed, START, END)


def test_a_nested_encoder_model_gives_the_models_logits():
    model = _model(nested_encoder=True)
    generator = Seq2SeqGenerator.from_model(model, START, END)
    source = np.array([[3, 4, 5, 0], [6, 7, 0, 0]], np.int32)
    target_in = np.array([[START, 3, 4], [START, 5, 0]], np.int32)
    expected = ops.convert_to_numpy(model([source, target_in], training=False))
    got = ops.convert_to_numpy(generator.teacher_forced_logits(source, target_in))
    np.testing.assert_allclose(got[0], expected[0], atol=1e-5)
    np.testing.assert_allclose(got[1, :2], expected[1, :2], atol=1e-5)
    state, _ = generator.encode(source)
    first, _, _ = generator.step(np.full((2,), START, np.int32), state)
    np.testing.assert_allclose(ops.convert_to_numpy(first), expected[:, 0], atol=1e-5)


def test_from_model_leaves_the_models_graph_unchanged(model):
    before = model.get_config()
    Seq2SeqGenerator.from_model(model, START, END)
    assert model.get_config() == before
    clone = keras.Model.from_config(model.get_config())
    assert [layer.name for layer in clone.layers] == [layer.name for layer in model.layers]


def test_graph_reading_uses_no_private_keras_attribute():
    """The generation modules read no `_name` attribute but those they set on
    their own objects, and import nothing from `keras.src`."""
    folder = pathlib.Path(keras_attention.generation.__file__).parent
    modules = ["seq2seq_generator.py", "model_graph.py", "compiled.py", "recurrent_decoder.py"]
    read, own = {}, set()
    for name in modules:
        tree = ast.parse((folder / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
                assert not any(n.startswith("keras.src") for n in names), (name, names)
            if (  # getattr(x, "_name"), hasattr(x, "_name")
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("getattr", "hasattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")
            ):
                read.setdefault(node.args[1].value, name)
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            if isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            read.setdefault(node.attr, name)
        own |= {
            n.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_")
        }
    foreign = {attr: module for attr, module in read.items() if attr not in own}
    assert foreign == {}


# ---------------------------------------------------------------- export


@pytest.mark.tensorflow
def test_the_tflite_manifest_gives_the_vocabulary_sizes(model, tmp_path):
    from keras_attention.export import export_tflite

    generator = Seq2SeqGenerator.from_model(model, START, END)
    manifest = export_tflite(generator, tmp_path / "small.tflite", beam_width=None)
    assert manifest["source_vocabulary_size"] == SOURCE_VOCAB
    assert manifest["target_vocabulary_size"] == TARGET_VOCAB
