"""The decoders with any Keras RNN cell (`cell=`) instead of the built-in one.

The built-in GRU and LSTM (`units`, `cell_type`) have their update written out
and checked against float64 oracles in `test_decoders.py`. Here the same
decoders run a cell given as it is: Keras' `GRUCell`, `LSTMCell`,
`SimpleRNNCell`, a `StackedRNNCells` of two different cells, and a cell of
one's own with two states of different sizes. The oracle of the generic path
is the fused one: on the same weights, `cell=GRUCell(units, reset_after=True)`
must give what `cell_type="gru"` gives. Then, for every cell, the step API
against the teacher-forced call, the masks, training, mixed precision, the
errors, the `.keras` file and a `Seq2SeqGenerator`.
"""

import re

import keras
import numpy as np
import pytest
from _doctests import assert_docstring_examples_run
from test_decoders import memory_mask
from test_decoders import randomize
from test_decoders import token_batch
from test_seq2seq_generator import PAD
from test_seq2seq_generator import START
from test_seq2seq_generator import UnclearOracle
from test_seq2seq_generator import _sharpen
from test_seq2seq_generator import cut_at_end
from test_seq2seq_generator import make_sources
from test_seq2seq_generator import oracle_tokens
from test_seq2seq_generator import pick_end_id

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LuongAttention
from keras_attention import LuongDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention.decoders.cell_runner import call_takes_training

BATCH = 2
T_DEC = 4  # != T_ENC
T_ENC = 6
D_EMB = 3
D_H = 5
UNITS = 4  # the cell's output size: the attention's query
OUT = 7  # output_units, != UNITS
STEP_TOL = 1e-5


@keras.saving.register_keras_serializable(package="test_decoder_cells")
class TwoStateCell(keras.layers.Layer):
    """A cell of one's own: h (units) and a side memory m (size `side`).

    h' = tanh(x K + h R + m M), m' = tanh(h' P); the output is h' (its first
    state, Keras' convention). Its `call` takes no `training` argument.
    """

    def __init__(self, units, side=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.side = side
        self.state_size = [units, side]
        self.output_size = units

    def build(self, input_shape):
        def weight(name, shape):
            return self.add_weight(name=name, shape=shape, initializer="glorot_uniform")

        self.kernel = weight("kernel", (input_shape[-1], self.units))
        self.recurrent_kernel = weight("recurrent_kernel", (self.units, self.units))
        self.side_kernel = weight("side_kernel", (self.side, self.units))
        self.side_projection = weight("side_projection", (self.units, self.side))

    def call(self, inputs, states):
        h, m = states
        ops = keras.ops
        h = ops.tanh(
            ops.matmul(inputs, self.kernel)
            + ops.matmul(h, self.recurrent_kernel)
            + ops.matmul(m, self.side_kernel)
        )
        m = ops.tanh(ops.matmul(h, self.side_projection))
        return h, [h, m]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "side": self.side}


class ScaledInTrainingCell(TwoStateCell):
    """`TwoStateCell` whose `call` takes `training`: in training, h' is halved
    (a deterministic stand-in for dropout)."""

    def call(self, inputs, states, training=None):
        h, (_, m) = super().call(inputs, states)
        if training:
            h = 0.5 * h
        return h, [h, m]


class AlwaysScaledCell(TwoStateCell):
    """The oracle of `ScaledInTrainingCell` in training: h' always halved, and
    a `call` without `training`."""

    def call(self, inputs, states):
        h, (_, m) = super().call(inputs, states)
        return 0.5 * h, [0.5 * h, m]


def make_cell(kind, units=UNITS, **kwargs):
    """A fresh cell of `kind` whose output has `units` features."""
    if kind == "gru":
        return keras.layers.GRUCell(units, **kwargs)
    if kind == "lstm":
        return keras.layers.LSTMCell(units, **kwargs)
    if kind == "simple":
        return keras.layers.SimpleRNNCell(units, **kwargs)
    if kind == "stacked":
        # Two layers of different sizes and state counts: flat states
        # [h_1 (5), h_2 (units), c_2 (units)]; the last layer's h queries.
        return keras.layers.StackedRNNCells(
            [keras.layers.GRUCell(5, **kwargs), keras.layers.LSTMCell(units, **kwargs)]
        )
    return TwoStateCell(units, **kwargs)


CELLS = ("gru", "lstm", "simple", "stacked", "user")
# The flat state sizes of each cell kind (UNITS = 4).
STATE_SIZES = {
    "gru": [UNITS],
    "lstm": [UNITS, UNITS],
    "simple": [UNITS],
    "stacked": [5, UNITS, UNITS],
    "user": [UNITS, 3],
}
DECODERS = {
    "bahdanau": (BahdanauDecoder, {}),
    "luong": (LuongDecoder, {"input_feeding": True}),
    "luong_no_feeding": (LuongDecoder, {"input_feeding": False}),
}


def make_decoder(kind, cell, attention=None, **kwargs):
    cls, options = DECODERS[kind]
    attention = attention or BahdanauAttention(5)
    return cls(None, attention, cell=cell, output_units=OUT, **{**options, **kwargs})


def make_inputs(rng, batch=BATCH, t_dec=T_DEC, t_enc=T_ENC):
    return {
        "target_embeddings": rng.normal(size=(batch, t_dec, D_EMB)).astype("float32"),
        "memory": rng.normal(size=(batch, t_enc, D_H)).astype("float32"),
    }


def make_state(cell_kind, rng, batch=BATCH):
    return [(0.5 * rng.normal(size=(batch, n))).astype("float32") for n in STATE_SIZES[cell_kind]]


def built(kind, cell_kind, rng, **kwargs):
    decoder = make_decoder(kind, make_cell(cell_kind), **kwargs)
    decoder(**make_inputs(rng))
    return randomize(decoder, rng)


def flat(x):
    return [np.asarray(keras.ops.convert_to_numpy(t)) for t in keras.tree.flatten(x)]


# ------------------------------------------------------------------ shapes


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_call_shapes_and_final_state_structure(kind, cell_kind):
    rng = np.random.default_rng(0)
    decoder = make_decoder(kind, make_cell(cell_kind))
    outputs, weights, state = decoder(**make_inputs(rng))
    assert tuple(outputs.shape) == (BATCH, T_DEC, OUT)
    assert tuple(weights.shape) == (BATCH, T_DEC, T_ENC)
    sizes = STATE_SIZES[cell_kind]
    if len(sizes) == 1:  # one tensor, as the built-in GRU returns it
        assert tuple(state.shape) == (BATCH, sizes[0])
    else:
        assert [tuple(s.shape) for s in state] == [(BATCH, n) for n in sizes]
    assert decoder.units == UNITS and decoder.cell_type is None
    # The symbolic call (a functional model) agrees.
    spec = decoder.compute_output_spec(
        keras.KerasTensor((None, None, D_EMB)), keras.KerasTensor((None, None, D_H))
    )
    assert [tuple(s.shape)[1:] for s in keras.tree.flatten(spec[2])] == [(n,) for n in sizes]


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_decode_state_has_one_key_per_flat_state(kind, cell_kind):
    rng = np.random.default_rng(1)
    decoder = built(kind, cell_kind, rng)
    decode_state = decoder.get_decode_state(make_inputs(rng)["memory"])
    sizes = STATE_SIZES[cell_kind]
    for i, n in enumerate(sizes):
        assert tuple(decode_state[f"state_{i}"].shape) == (BATCH, n)
    extra = {"attentional"} if kind == "luong" else set()
    expected = {"memory", "memory_mask", "processed_keys", *extra}
    assert set(decode_state) == expected | {f"state_{i}" for i in range(len(sizes))}


# ---------------------------------------------------- the fused fast path


def fused_and_generic(kind, cell_type, rng):
    """A built-in decoder and the same one with `cell=`, on the same weights."""
    cls, options = DECODERS[kind]
    fused = cls(UNITS, BahdanauAttention(5), cell_type=cell_type, output_units=OUT, **options)
    cell = (
        keras.layers.GRUCell(UNITS, reset_after=True)
        if cell_type == "gru"
        else keras.layers.LSTMCell(UNITS)
    )
    generic = cls(None, BahdanauAttention(5), cell=cell, output_units=OUT, **options)
    inputs = make_inputs(rng)
    fused(**inputs)
    generic(**inputs)
    randomize(fused, rng)
    assert [w.shape for w in fused.weights] == [w.shape for w in generic.weights]
    generic.set_weights(fused.get_weights())
    return fused, generic


@pytest.mark.parametrize("cell_type", ["gru", "lstm"])
@pytest.mark.parametrize("kind", list(DECODERS))
def test_fused_fast_path_equals_the_generic_cell_path(kind, cell_type):
    rng = np.random.default_rng(2)
    fused, generic = fused_and_generic(kind, cell_type, rng)
    inputs = make_inputs(rng)
    initial = make_state(cell_type, rng)
    initial = initial[0] if cell_type == "gru" else initial
    target_mask = np.ones((BATCH, T_DEC), bool)
    target_mask[1, 2] = False
    common = {
        **inputs,
        "initial_state": initial,
        "target_embeddings_mask": target_mask,
        "memory_mask": memory_mask(),
    }
    got, want = flat(generic(**common)), flat(fused(**common))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # One step too; the decode states differ only in their names.
    fused_state = fused.get_decode_state(inputs["memory"], initial, memory_mask())
    generic_state = generic.get_decode_state(inputs["memory"], initial, memory_mask())
    names = {"h": "state_0", "c": "state_1"}
    assert {names.get(k, k) for k in fused_state} == set(generic_state)
    y = inputs["target_embeddings"][:, 0]
    fused_out = fused.step(y, fused_state)
    generic_out = generic.step(y, generic_state)
    for g, w in zip(flat(generic_out[:2]), flat(fused_out[:2]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    for key, value in fused_out[2].items():
        np.testing.assert_allclose(
            flat(generic_out[2][names.get(key, key)])[0], flat(value)[0], rtol=1e-5, atol=1e-5
        )


# ------------------------------------------------------------ step by step


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_step_by_step_decoding_equals_teacher_forced_call(kind, cell_kind):
    rng = np.random.default_rng(3)
    decoder = built(kind, cell_kind, rng, attention=LuongAttention("general"))
    inputs = make_inputs(rng)
    initial = make_state(cell_kind, rng)
    mask = memory_mask()
    outputs, weights, state = decoder(**inputs, initial_state=initial, memory_mask=mask)
    decode_state = decoder.get_decode_state(inputs["memory"], initial, memory_mask=mask)
    for t in range(T_DEC):
        output, step_weights, decode_state = decoder.step(
            inputs["target_embeddings"][:, t], decode_state
        )
        np.testing.assert_allclose(output, outputs[:, t], rtol=STEP_TOL, atol=STEP_TOL)
        np.testing.assert_allclose(step_weights, weights[:, t], rtol=STEP_TOL, atol=STEP_TOL)
    final = [decode_state[f"state_{i}"] for i in range(len(STATE_SIZES[cell_kind]))]
    for got, want in zip(flat(final), flat(state), strict=True):
        np.testing.assert_allclose(got, want, rtol=STEP_TOL, atol=STEP_TOL)


@pytest.mark.parametrize("kind", ["bahdanau", "luong_no_feeding"])
def test_the_last_layer_of_a_stack_queries_the_attention(kind):
    # Two LSTM layers of one size, so either h could query: the weights of
    # the first step must be the attention layer's own, called with the last
    # layer's h (Bahdanau: s_0, before the step; Luong: s_1, after it).
    rng = np.random.default_rng(11)
    cell = keras.layers.StackedRNNCells(
        [keras.layers.LSTMCell(UNITS), keras.layers.LSTMCell(UNITS)]
    )
    decoder = make_decoder(kind, cell)
    inputs = make_inputs(rng)
    decoder(**inputs)
    randomize(decoder, rng)
    h_1, c_1, h_2, c_2 = [(0.8 * rng.normal(size=(BATCH, UNITS))).astype("float32") for _ in "1234"]
    mask = memory_mask()
    _, weights, _ = decoder(**inputs, initial_state=[h_1, c_1, h_2, c_2], memory_mask=mask)
    if kind == "bahdanau":
        query, other = h_2, h_1
    else:  # without input feeding the stack reads y_1 alone
        output, new_states = cell(inputs["target_embeddings"][:, 0], [[h_1, c_1], [h_2, c_2]])
        query, other = output, new_states[0][0]
        np.testing.assert_allclose(output, new_states[1][0], rtol=1e-6)

    def attend(q):
        _, w = decoder.attention(q, inputs["memory"], value_mask=mask, return_attention_scores=True)
        return np.asarray(w)

    np.testing.assert_allclose(weights[:, 0], attend(query), rtol=1e-5, atol=1e-6)
    assert np.abs(attend(other) - attend(query)).max() > 1e-3  # the check can fail


def test_a_nested_initial_state_is_flattened():
    # StackedRNNCells' own structure [h_1, [h_2, c_2]] is accepted too.
    rng = np.random.default_rng(4)
    decoder = built("bahdanau", "stacked", rng)
    inputs = make_inputs(rng)
    h1, h2, c2 = make_state("stacked", rng)
    flat_result = flat(decoder(**inputs, initial_state=[h1, h2, c2]))
    nested_result = flat(decoder(**inputs, initial_state=[h1, [h2, c2]]))
    for a, b in zip(flat_result, nested_result, strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------- masks


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_padded_target_steps_give_zeros_and_keep_the_state(kind, cell_kind):
    rng = np.random.default_rng(5)
    decoder = built(kind, cell_kind, rng)
    inputs = make_inputs(rng)
    initial = make_state(cell_kind, rng)
    target_mask = np.ones((BATCH, T_DEC), bool)
    target_mask[0, 1] = False  # a hole
    target_mask[1, 2:] = False  # a padded tail
    outputs, weights, state = decoder(
        **inputs, initial_state=initial, target_embeddings_mask=target_mask
    )
    outputs, weights, state = np.asarray(outputs), np.asarray(weights), flat(state)
    assert np.all(outputs[~target_mask] == 0.0)
    assert np.all(weights[~target_mask] == 0.0)
    # Every row equals the same row decoded without its padded steps.
    for b in range(BATCH):
        keep = target_mask[b]
        short = decoder(
            inputs["target_embeddings"][b : b + 1, keep],
            inputs["memory"][b : b + 1],
            initial_state=[s[b : b + 1] for s in initial],
        )
        np.testing.assert_allclose(outputs[b, keep], short[0][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights[b, keep], short[1][0], rtol=1e-5, atol=1e-6)
        for got, want in zip(state, flat(short[2]), strict=True):
            np.testing.assert_allclose(got[b], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_masked_memory_gets_zero_weight(kind, cell_kind):
    rng = np.random.default_rng(6)
    decoder = built(kind, cell_kind, rng)
    mask = memory_mask()
    mask[0, 0] = False  # a masked key at the start of a row too
    _, weights, _ = decoder(**make_inputs(rng), memory_mask=mask)
    weights = np.asarray(weights)
    assert np.all(weights.transpose(0, 2, 1)[~mask] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


# ---------------------------------------------------------------- training

# Each fit traces a training step through the loop and XLA compiles it. The
# cells with dropout draw their masks before the loop: on JAX a draw inside
# the scan would leak a tracer.
FITS = [
    pytest.param("bahdanau", "gru", {}, id="bahdanau-gru"),
    pytest.param(
        "luong", "stacked", {"dropout": 0.2, "recurrent_dropout": 0.2}, id="luong-stacked-dropout"
    ),
    pytest.param("luong_no_feeding", "user", {}, id="luong_no_feeding-user"),
    pytest.param("bahdanau", "lstm", {"dropout": 0.2}, id="bahdanau-lstm-dropout"),
    pytest.param("luong", "simple", {}, id="luong-simple", marks=pytest.mark.slow),
]


def seq2seq(kind, cell, vocab=11):
    """ids → Embedding(mask_zero) memory; ids → Embedding → decoder → logits."""
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(vocab, D_H, mask_zero=True)(source)
    y = keras.layers.Embedding(vocab, D_EMB, mask_zero=True)(target)
    outputs, _, _ = make_decoder(kind, cell)(y, memory)
    return keras.Model([source, target], keras.layers.Dense(vocab, name="logits")(outputs))


@pytest.mark.parametrize("kind, cell_kind, dropout", FITS)
def test_model_with_a_cell_fits_compiled_with_xla(kind, cell_kind, dropout):
    # XLA on TensorFlow and JAX; on PyTorch jit_compile is torch.compile
    # (minutes on a CPU): eager there.
    jit_compile = keras.backend.backend() != "torch"
    keras.utils.set_random_seed(0)
    model = seq2seq(kind, make_cell(cell_kind, **dropout))
    source, target = token_batch(np.random.default_rng(7))
    labels = np.roll(target, -1, axis=1)
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    model.optimizer.build(model.trainable_variables)
    history = model.fit([source, target], labels, batch_size=3, epochs=5, verbose=0, shuffle=False)
    losses = np.array(history.history["loss"])
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < 0.9 * losses[0], losses


def test_cell_dropout_is_active_in_training_only():
    rng = np.random.default_rng(8)
    decoder = make_decoder("bahdanau", make_cell("gru", dropout=0.5, seed=1))
    inputs = make_inputs(rng)
    inference = flat(decoder(**inputs))
    np.testing.assert_array_equal(flat(decoder(**inputs, training=False))[0], inference[0])
    trained = flat(decoder(**inputs, training=True))
    assert np.abs(trained[0] - inference[0]).max() > 1e-4
    # The masks of one call are dropped after it.
    assert getattr(decoder.cell, "_dropout_mask", None) is None


@pytest.mark.parametrize(
    "cell, takes",
    [
        (TwoStateCell(UNITS), False),
        (AlwaysScaledCell(UNITS), False),
        (ScaledInTrainingCell(UNITS), True),
        (keras.layers.GRUCell(UNITS), True),
        (keras.layers.StackedRNNCells([keras.layers.GRUCell(UNITS)]), True),
    ],
    ids=["two_state", "always_scaled", "scaled_in_training", "gru", "stacked"],
)
def test_call_takes_training_reads_the_signature(cell, takes):
    assert call_takes_training(cell) is takes


@pytest.mark.parametrize("kind", list(DECODERS))
def test_training_reaches_a_cell_whose_call_takes_it(kind):
    rng = np.random.default_rng(18)
    inputs = make_inputs(rng)
    decoder = make_decoder(kind, ScaledInTrainingCell(UNITS))
    decoder(**inputs)
    randomize(decoder, rng)
    # The oracles: the same weights in cells that ignore `training`.
    oracles = {}
    for name, cell in (("trained", AlwaysScaledCell(UNITS)), ("inference", TwoStateCell(UNITS))):
        oracle = make_decoder(kind, cell)
        oracle(**inputs)
        oracle.set_weights(decoder.get_weights())
        oracles[name] = flat(oracle(**inputs))
    for training, name in ((True, "trained"), (False, "inference")):
        got = flat(decoder(**inputs, training=training))
        for g, w in zip(got, oracles[name], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    # The two oracles differ: the test sees whether `training` arrived.
    assert np.abs(oracles["trained"][0] - oracles["inference"][0]).max() > 1e-3


@pytest.mark.parametrize("kind", list(DECODERS))
def test_a_cell_without_a_training_argument_runs_in_training(kind):
    rng = np.random.default_rng(19)
    inputs = make_inputs(rng)
    decoder = make_decoder(kind, TwoStateCell(UNITS))
    inference = flat(decoder(**inputs, training=False))
    trained = flat(decoder(**inputs, training=True))  # no TypeError: not passed
    for t, i in zip(trained, inference, strict=True):
        np.testing.assert_array_equal(t, i)


# ---------------------------------------------------------- mixed precision


@pytest.mark.parametrize("cell_kind", CELLS)
def test_mixed_float16_runs_and_is_finite(cell_kind, dtype_policy):
    dtype_policy("mixed_float16")
    rng = np.random.default_rng(9)
    for kind in ("bahdanau", "luong"):
        decoder = make_decoder(kind, make_cell(cell_kind))
        inputs = make_inputs(rng)
        result = flat(decoder(**inputs, memory_mask=memory_mask()))
        for x in result:
            assert x.dtype == np.float16
            assert np.all(np.isfinite(x.astype("float32")))
        state = decoder.get_decode_state(inputs["memory"], memory_mask=memory_mask())
        output, weights, _ = decoder.step(inputs["target_embeddings"][:, 0], state)
        assert np.all(np.isfinite(np.asarray(output, "float32")))


def test_float32_cell_inside_a_mixed_precision_decoder():
    # The decoder's `dtype` does not reach a cell given to it: the loop casts.
    rng = np.random.default_rng(10)
    decoder = make_decoder("luong", make_cell("stacked"), dtype="mixed_float16")
    result = flat(decoder(**make_inputs(rng)))
    assert decoder.cell.compute_dtype == "float32"
    assert {x.dtype for x in result} == {np.dtype("float16")}


# ------------------------------------------------------------------ errors


def _raises(*fragments):
    pattern = ".*".join(re.escape(f) for f in fragments)
    return pytest.raises(ValueError, match=re.compile(pattern, re.DOTALL))


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
@pytest.mark.parametrize(
    "cell, received",
    [
        (keras.layers.GRU(4), "<GRU"),
        (keras.layers.Dense(4), "<Dense"),
        ("gru", "'gru'"),
    ],
    ids=["rnn_layer", "dense", "string"],
)
def test_a_cell_that_is_not_an_rnn_cell_is_an_error(cls, cell, received):
    with _raises("`cell`", "Keras RNN cell", f"Received: cell={received}"):
        cls(None, BahdanauAttention(5), cell=cell)


def test_a_recurrent_layer_as_cell_names_its_cell():
    with _raises("`cell`", "pass its cell", "GRUCell instead of keras.layers.GRU"):
        LuongDecoder(None, LuongAttention("dot"), cell=keras.layers.GRU(4))


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_units_that_disagree_with_the_cell_is_an_error(cls):
    with _raises("`units`", "size of the cell's output", "6", "Received: units=4"):
        cls(4, BahdanauAttention(5), cell=keras.layers.GRUCell(6))
    decoder = cls(6, BahdanauAttention(5), cell=keras.layers.GRUCell(6))  # agreeing is fine
    assert decoder.units == 6


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_cell_type_with_a_cell_is_an_error(cls):
    with _raises("`cell_type`", "pass one of them", "cell_type='lstm'"):
        cls(None, BahdanauAttention(5), cell_type="lstm", cell=keras.layers.LSTMCell(4))


def test_conditional_with_a_cell_is_an_error():
    with _raises("`conditional`", "built-in cells", "cell=<GRUCell"):
        BahdanauDecoder(None, BahdanauAttention(5), conditional=True, cell=keras.layers.GRUCell(4))


def test_bahdanau_with_an_output_state_of_another_size_is_an_error():
    # BahdanauDecoder reads s_{t-1} in the output state: its size must be the output's.
    cell = TwoStateCell(4)
    cell.output_size = 3
    with _raises("`cell`", "output state (state 0, of size 4)", "output has size 3"):
        BahdanauDecoder(None, BahdanauAttention(5), cell=cell)


def test_units_none_without_a_cell_is_an_error():
    with _raises("`units`", "positive integer (or None with a `cell`)", "units=None"):
        LuongDecoder(None, LuongAttention("dot"))


@pytest.mark.parametrize("cell_kind", ["stacked", "user"])
def test_wrong_number_of_initial_states_is_an_error(cell_kind):
    rng = np.random.default_rng(11)
    decoder = built("luong", cell_kind, rng)
    inputs = make_inputs(rng)
    states = make_state(cell_kind, rng)
    count = len(STATE_SIZES[cell_kind])
    shapes = ", ".join(f"(batch, {n})" for n in STATE_SIZES[cell_kind])
    with _raises("`initial_state`", f"{count} tensor(s)", shapes, f"{count - 1} tensor(s)"):
        decoder(**inputs, initial_state=states[:-1])
    with _raises("`initial_state`", f"{count} tensor(s)", f"{count - 1} tensor(s)"):
        decoder.get_decode_state(inputs["memory"], initial_state=states[:-1])


def test_initial_state_of_the_wrong_size_is_an_error():
    rng = np.random.default_rng(12)
    decoder = built("bahdanau", "stacked", rng)
    states = make_state("stacked", rng)
    states[0] = np.zeros((BATCH, 7), "float32")  # h_1 has 5 features
    with _raises("`initial_state`", "(batch, 5)=(2, 5) for state 0", "(2, 7)"):
        decoder(**make_inputs(rng), initial_state=states)


def test_missing_state_key_in_step_is_an_error():
    rng = np.random.default_rng(13)
    decoder = built("bahdanau", "lstm", rng)
    inputs = make_inputs(rng)
    decode_state = decoder.get_decode_state(inputs["memory"])
    del decode_state["state_1"]
    with _raises("`decode_state`", "Missing: ['state_1']"):
        decoder.step(inputs["target_embeddings"][:, 0], decode_state)


# ------------------------------------------------------------ serialization


@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_config_round_trip(kind, cell_kind):
    rng = np.random.default_rng(14)
    decoder = built(kind, cell_kind, rng)
    config = decoder.get_config()
    assert config["cell"]["config"]["name"] == decoder.cell.name
    assert config["units"] == UNITS and config["cell_type"] is None
    restored = type(decoder).from_config(config)
    assert restored.get_config() == config
    assert type(restored.cell) is type(decoder.cell)
    inputs = make_inputs(rng)
    restored(**inputs)
    restored.set_weights(decoder.get_weights())
    for got, want in zip(flat(restored(**inputs)), flat(decoder(**inputs)), strict=True):
        np.testing.assert_array_equal(got, want)


# Keras' own `model.save` converts variables with `np.array(x)` (numpy 2 notice).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.parametrize("cell_kind", CELLS)
@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_keras_file_round_trip_gives_identical_outputs(kind, cell_kind, tmp_path):
    rng = np.random.default_rng(15)
    model = seq2seq(kind, make_cell(cell_kind))
    randomize(model, rng)
    source, target = token_batch(rng)
    expected = flat(model([source, target]))
    path = tmp_path / "model.keras"
    model.save(path)
    keras.backend.clear_session()  # the cell class is found through its registration
    loaded = keras.saving.load_model(path)
    for got, want in zip(flat(loaded([source, target])), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- docstrings


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_docstring_example_runs(cls):
    assert_docstring_examples_run(cls)


# ---------------------------------------------------------------- generator

SOURCE_VOCAB = 17
TARGET_VOCAB = 15
EMBEDDING = 8
GEN_UNITS = 12
MAX_LENGTH = 10


def stacked_generator_model(seed):
    """ids → Embedding → GRU → memory and a Dense bridge per flat state →
    BahdanauDecoder(StackedRNNCells([GRUCell(8), LSTMCell(12)])) → logits."""
    keras.utils.set_random_seed(seed)
    normal = keras.initializers.RandomNormal(stddev=1.0)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    x = keras.layers.Embedding(
        SOURCE_VOCAB, EMBEDDING, mask_zero=True, embeddings_initializer=normal
    )(source)
    memory, final = keras.layers.GRU(GEN_UNITS, return_sequences=True, return_state=True)(x)
    initial_state = [
        keras.layers.Dense(n, activation="tanh", name=f"bridge_{i}")(final)
        for i, n in enumerate((8, GEN_UNITS, GEN_UNITS))
    ]
    cell = keras.layers.StackedRNNCells([keras.layers.GRUCell(8), keras.layers.LSTMCell(GEN_UNITS)])
    decoder = BahdanauDecoder(None, BahdanauAttention(10), cell=cell, name="decoder")
    embedded = keras.layers.Embedding(
        TARGET_VOCAB, EMBEDDING, mask_zero=True, embeddings_initializer=normal
    )(target_in)
    outputs, _, _ = decoder(embedded, memory, initial_state=initial_state)
    logits = keras.layers.Dense(TARGET_VOCAB, dtype="float32", name="logits")(outputs)
    model = keras.Model([source, target_in], logits, name="stacked")
    _sharpen(model, tied=False)
    return model


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_generator_greedy_with_a_stacked_cell_equals_the_oracle():
    source = make_sources("ids")
    for seed in range(8):
        model = stacked_generator_model(seed)
        try:
            oracle = oracle_tokens(model, source, steps=MAX_LENGTH)
        except UnclearOracle:
            continue
        break
    else:
        raise AssertionError("no seed gives the stacked model a clear oracle")
    end_id = pick_end_id(oracle)
    generator = Seq2SeqGenerator.from_model(model, START, end_id)
    expected, lengths = cut_at_end(oracle, end_id)
    result = generator.greedy(source, max_length=MAX_LENGTH)
    np.testing.assert_array_equal(result["tokens"], expected)
    np.testing.assert_array_equal(result["lengths"], lengths)
    assert np.all(result["tokens"][expected == PAD] == PAD)
    # The beam search gathers every entry of the decode state ("state_0" ...).
    beam = generator.beam(source, beam_width=1, length_penalty=0.0, max_length=MAX_LENGTH)
    np.testing.assert_array_equal(beam["tokens"], result["tokens"])
