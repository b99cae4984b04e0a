"""`keras_attention.testing.check_attention`: every shipped mechanism keeps every
promise, and a mechanism that breaks one is named with the method and the promise."""

import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import BahdanauMonotonicAttention
from keras_attention import GMMAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import LuongMonotonicAttention
from keras_attention import OverriddenAttention
from keras_attention import Seq2SeqGenerator
from keras_attention import masked_softmax
from keras_attention.testing import PROMISES
from keras_attention.testing import AttentionContractError
from keras_attention.testing import attention_checks
from keras_attention.testing import check_attention
from keras_attention.testing import parametrize_with_checks

SHIPPED = {
    "bahdanau": lambda: BahdanauAttention(4),
    "bahdanau_normalized_2_heads": lambda: BahdanauAttention(4, num_heads=2, normalize=True),
    "luong_dot": lambda: LuongAttention("dot"),
    "luong_general_scaled": lambda: LuongAttention("general", use_scale=True),
    "luong_concat": lambda: LuongAttention("concat", units=4),
    "location_sensitive": lambda: LocationSensitiveAttention(4, filters=2, kernel_size=3),
    "location_last_alignment": lambda: LocationSensitiveAttention(
        4, filters=2, kernel_size=3, cumulative=False
    ),
    "bahdanau_monotonic_noisy": lambda: BahdanauMonotonicAttention(
        4, sigmoid_noise=1.0, seed=1, normalize=True
    ),
    "bahdanau_monotonic_recursive": lambda: BahdanauMonotonicAttention(4, mode="recursive"),
    "luong_monotonic_hard": lambda: LuongMonotonicAttention(mode="hard", scale=True),
    "gmm": lambda: GMMAttention(2),
    # An ablation, not a mechanism; "permute" is random outside training by
    # design, so only "uniform" keeps the contract's deterministic inference.
    "overridden_uniform": lambda: OverriddenAttention(BahdanauAttention(4), "uniform"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_mechanism_keeps_every_promise(name):
    report = check_attention(SHIPPED[name], tflite=False, decoders=("bahdanau",))
    assert list(report) == list(PROMISES)
    assert report["builtin-only TFLite"] == "skipped: tflite=False"
    assert all(report[p] == "passed" for p in PROMISES[:-1]), report


@pytest.mark.tensorflow
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_mechanism_exports_to_builtin_tflite_and_runs_in_luong_decoder(name):
    # The promises the test above leaves out: the TFLite export (TensorFlow
    # only) and the other decoder.
    report = check_attention(SHIPPED[name], tflite=True, decoders=("luong",))
    assert report == dict.fromkeys(PROMISES, "passed")


# One mechanism per promise, each breaking it and nothing before it in PROMISES.


@keras.saving.register_keras_serializable(package="test_contract_checker")
class DotAttention(GMMAttention):
    """A well-behaved mechanism to break: a dot score with a masked softmax, no state."""

    attention_state_keys = ()

    def build_score(self, query_dim, key_dim):
        self.kernel = self.add_weight(name="kernel", shape=(query_dim, key_dim))

    def initial_attention_state(self, memory, value_mask=None):
        return {}

    def attention_state_shapes(self, value_shape):
        return {}

    def scores(self, query, processed_keys):
        projected = ops.matmul(query, ops.cast(self.kernel, query.dtype))  # (B, d_k)
        return ops.einsum("bd,bvd->bv", projected, processed_keys)  # (B, T_v)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        return masked_softmax(self.scores(query, processed_keys), value_mask), {}


def test_the_well_behaved_base_of_the_broken_ones_passes():
    report = check_attention(lambda: DotAttention(), tflite=False, decoders=("bahdanau",))
    assert all(report[p] == "passed" for p in PROMISES[:-1]), report


@keras.saving.register_keras_serializable(package="test_contract_checker")
class Misshapen(DotAttention):
    """Its weight has the sizes swapped, (d_k, d_q): right only where d_q = d_k."""

    def build_score(self, query_dim, key_dim):
        self.kernel = self.add_weight(name="kernel", shape=(key_dim, query_dim))


@keras.saving.register_keras_serializable(package="test_contract_checker")
class ValueSized(DotAttention):
    """Its weight takes the values' size for the keys', (d_q, d_v): right only where d_k = d_v."""

    def build_score(self, query_dim, key_dim):
        self.kernel = self.add_weight(name="kernel", shape=(query_dim, self.value_dim))


@keras.saving.register_keras_serializable(package="test_contract_checker")
class ForgetsConfig(GMMAttention):
    def get_config(self):
        config = super().get_config()
        config.pop("num_mixtures")
        return config


@keras.saving.register_keras_serializable(package="test_contract_checker")
class WrongStateKeys(GMMAttention):
    def initial_attention_state(self, memory, value_mask=None):
        return {"centre": super().initial_attention_state(memory, value_mask)["position"]}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class GrowingState(GMMAttention):
    """Each step returns one more centre than it received: (B, K) → (B, K + 1)."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, new_state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        position = new_state["position"]  # (B, K)
        return weights, {"position": ops.concatenate([position, position[:, :1]], axis=1)}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class HalfState(GMMAttention):
    """Its steps return the centres in float16, whatever `state_dtype` is."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, new_state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        return weights, {"position": ops.cast(new_state["position"], "float16")}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class WideInitialState(GMMAttention):
    """Starts with K + 1 centres, where attention_state_shapes says K."""

    def initial_attention_state(self, memory, value_mask=None):
        batch = ops.shape(memory)[0]
        return {"position": ops.zeros((batch, self.num_mixtures + 1), self.state_dtype)}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class WrongWeightsShape(DotAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        return weights[:, None, :], state  # (B, 1, T_v)


@keras.saving.register_keras_serializable(package="test_contract_checker")
class ForgetsTheMask(DotAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        return ops.softmax(self.scores(query, processed_keys), axis=-1), {}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class NaNOnAFullyMaskedRow(DotAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        scores = self.scores(query, processed_keys)
        if value_mask is not None:  # -inf everywhere in a fully masked row: NaN
            scores = ops.where(value_mask, scores, float("-inf"))
        return ops.softmax(scores, axis=-1), {}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class DrawsInTraining(DotAttention):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(0)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        if training:
            query = query + keras.random.normal(ops.shape(query), seed=self.seed_generator)
        return super().step_weights(query, processed_keys, state, value_mask, training, noise)


@keras.saving.register_keras_serializable(package="test_contract_checker")
class IgnoresPaddedSteps(GMMAttention):
    """A step path of its own (what `call` and the decoders run) that drops the query mask."""

    def attend_step(self, query, value, processed_keys, attention_state, **kwargs):
        kwargs.pop("query_mask", None)
        return super().attend_step(query, value, processed_keys, attention_state, **kwargs)


@keras.saving.register_keras_serializable(package="test_contract_checker")
class SequenceFromTheStart(GMMAttention):
    """Its own sequence path starts every query from the initial state."""

    def attend_sequence(self, query, value, processed_keys, **kwargs):
        kwargs.pop("attention_state", None)
        steps = [
            super(SequenceFromTheStart, self).attend_sequence(
                query[:, t : t + 1], value, processed_keys, **kwargs
            )
            for t in range(query.shape[1])
        ]
        context = ops.concatenate([s[0] for s in steps], axis=1)
        weights = ops.concatenate([s[1] for s in steps], axis=1)
        return context, weights, steps[-1][2]


@keras.saving.register_keras_serializable(package="test_contract_checker")
class HalfOverflows(DotAttention):
    """A softmax without the max subtracted, in the compute dtype: inf in float16."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        scores = 8.0 + 0.1 * self.scores(query, processed_keys)  # exp(8) · (weights ~3)
        e = ops.exp(3.0 * scores)  # above 65504 in float16
        e = ops.where(value_mask, e, ops.zeros_like(e)) if value_mask is not None else e
        total = ops.sum(e, axis=-1, keepdims=True)
        return e / ops.maximum(total, ops.cast(1e-6, e.dtype)), {}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class MixesTheBatch(GMMAttention):
    """Its windows move by the batch's mean step: rows do not belong to their own sequence."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, new_state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        position = new_state["position"]
        step = position - state["position"]
        mixed = state["position"] + ops.mean(step, axis=0, keepdims=True)
        return weights, {"position": mixed}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class ScaledByPaddedLength(DotAttention):
    """Divides its scores by the padded T_v: the longer the batch, the flatter every row."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        scores = self.scores(query, processed_keys)  # (B, T_v)
        length = ops.cast(ops.shape(processed_keys)[1], scores.dtype)
        return masked_softmax(scores / length, value_mask), {}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class CountsFromTheEnd(DotAttention):
    """A recency bias counted from the padded end of the memory, not from its real end
    (squared: a bias linear in the position would be a constant the softmax removes)."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        scores = self.scores(query, processed_keys)  # (B, T_v)
        length = ops.shape(processed_keys)[1]
        from_end = ops.cast(length - 1 - ops.arange(length), scores.dtype)  # (T_v,)
        return masked_softmax(scores - 0.1 * from_end[None, :] ** 2, value_mask), {}


@keras.saving.register_keras_serializable(package="test_contract_checker")
class CentresThePaddedKeys(DotAttention):
    """Subtracts the keys' mean over every position, padding included."""

    def precompute_keys(self, key):
        return key - ops.mean(key, axis=1, keepdims=True)  # (B, T_v, d_k)


BROKEN = {
    "builds": (lambda: Misshapen(), "Misshapen.build_score"),
    "get_config round trip": (lambda: ForgetsConfig(num_mixtures=2), "ForgetsConfig.get_config"),
    "state keys": (
        lambda: WrongStateKeys(num_mixtures=2),
        "WrongStateKeys.initial_attention_state",
    ),
    "state shapes and dtypes": (
        lambda: GrowingState(num_mixtures=2),
        "GrowingState.step_weights",
    ),
    "shapes and dtypes": (lambda: WrongWeightsShape(), "WrongWeightsShape.step_weights"),
    "zero weight at masked keys": (lambda: ForgetsTheMask(), "ForgetsTheMask.step_weights"),
    "zero weight at masked keys (a fully masked row)": (
        lambda: NaNOnAFullyMaskedRow(),
        "NaNOnAFullyMaskedRow.step_weights",
    ),
    "no random draw inside a step": (lambda: DrawsInTraining(), "DrawsInTraining.step_weights"),
    "padded target steps": (
        lambda: IgnoresPaddedSteps(num_mixtures=2),
        "IgnoresPaddedSteps.attend_sequence",
    ),
    "sequence call equals step-by-step decoding": (
        lambda: SequenceFromTheStart(num_mixtures=2),
        "SequenceFromTheStart.attend_sequence",
    ),
    "mixed precision": (lambda: HalfOverflows(), "HalfOverflows.step_weights"),
    "greedy and beam inside a decoder": (
        lambda: MixesTheBatch(num_mixtures=2),
        "MixesTheBatch.step_weights (in BahdanauDecoder)",
    ),
    "decodes the same alone and in a padded batch (divides by the padded length)": (
        lambda: ScaledByPaddedLength(),
        "ScaledByPaddedLength.step_weights",
    ),
    "decodes the same alone and in a padded batch (positions from the padded end)": (
        lambda: CountsFromTheEnd(),
        "CountsFromTheEnd.step_weights",
    ),
    "decodes the same alone and in a padded batch (keys centred with the padding)": (
        lambda: CentresThePaddedKeys(),
        "CentresThePaddedKeys.precompute_keys",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_promise_is_named_with_its_method(case):
    factory, method = BROKEN[case]
    promise = case.split(" (")[0]
    with pytest.raises(AttentionContractError) as caught:
        check_attention(factory, tflite=False, decoders=("bahdanau",))
    assert caught.value.promise == promise
    assert caught.value.method == method
    assert str(caught.value).startswith(f"{method} breaks the promise '{promise}'")


def _greedy_alone_and_in_a_padded_batch(attention):
    """The greedy log-probability of one sentence alone and in a padded batch,
    in a small untrained model around `attention`."""
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(9, 4, mask_zero=True)(source)
    memory = keras.layers.GRU(4, return_sequences=True)(memory)
    embedded = keras.layers.Embedding(9, 4, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(4, attention)(embedded, memory)
    readout = keras.layers.Dense(9)
    model = keras.Model([source, target_in], readout(outputs))
    # Weights large enough for the attention to move the logits (untrained, the
    # weights are near uniform and the log-probabilities agree to 1e-7 anyway).
    model.set_weights([3.0 * w for w in model.get_weights()])
    attention.kernel.assign(20.0 * attention.kernel)
    bias = np.zeros((9,), "float32")
    bias[[0, 2]] = -30.0  # never padding or END: every step runs
    readout.bias.assign(bias)
    generator = Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)
    sentence = np.array([[3, 4, 5]], "int32")
    batch = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 6, 7, 8]], "int32")
    alone = generator.greedy(sentence, max_length=4)["log_probs"]
    padded = generator.greedy(batch, max_length=4)["log_probs"]
    return float(np.asarray(alone)[0]), float(np.asarray(padded)[0])


@pytest.mark.parametrize(
    "attention, same",
    [(ScaledByPaddedLength, False), (CountsFromTheEnd, False), (DotAttention, True)],
    ids=["divides_by_the_padded_length", "counts_from_the_padded_end", "well_behaved"],
)
def test_the_promise_is_what_a_padded_batch_decodes(attention, same):
    # What the promise stands for: a mechanism that breaks it gives the same
    # sentence another log-probability in a padded batch than alone.
    alone, padded = _greedy_alone_and_in_a_padded_batch(attention())
    if same:
        assert alone == pytest.approx(padded, abs=1e-5)
    else:
        assert abs(alone - padded) > 1e-2


def test_a_fully_masked_row_is_reported_as_such():
    with pytest.raises(AttentionContractError, match="NaN weights.*fully masked"):
        check_attention(NaNOnAFullyMaskedRow, tflite=False, decoders=("bahdanau",))


def test_something_else_than_an_attention_layer_is_refused():
    with pytest.raises(TypeError, match="`mechanism`.*BaseAttention"):
        check_attention(lambda: keras.layers.Dense(3))


@keras.saving.register_keras_serializable(package="test_contract_checker")
class NeedsFlex(DotAttention):
    """A cumulative product: no builtin TFLite operator."""

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        return ops.cumprod(1.0 - 0.5 * weights, axis=-1) * weights, state


@pytest.mark.tensorflow
def test_tflite_promise_passes_for_gmm_and_names_a_non_builtin_operator():
    report = check_attention(lambda: GMMAttention(2), decoders=())
    assert report["builtin-only TFLite"] == "passed"
    with pytest.raises(AttentionContractError, match="builtin-only TFLite.*Cumprod") as caught:
        check_attention(NeedsFlex, decoders=())
    assert caught.value.method == "NeedsFlex.step_weights (exported)"


def test_the_tflite_promise_is_skipped_with_its_reason_off_tensorflow():
    if keras.backend.backend() == "tensorflow":
        report = check_attention(lambda: GMMAttention(2), tflite=False, decoders=())
        assert report["builtin-only TFLite"] == "skipped: tflite=False"
        return
    report = check_attention(lambda: GMMAttention(2), decoders=())
    assert report["builtin-only TFLite"].startswith("skipped: the export runs on the TensorFlow")
    with pytest.raises(ValueError, match="`tflite`"):
        check_attention(lambda: GMMAttention(2), tflite=True)


# Sizes that hide a misshapen weight: query, key and value are checked at
# three different sizes, (d_q, d_k, d_v) = (4, 6, 8).


@pytest.mark.parametrize("broken", [Misshapen, ValueSized], ids=["swapped", "value_sized"])
def test_a_weight_right_only_for_equal_sizes_is_named_with_build_score(broken):
    with pytest.raises(AttentionContractError) as caught:
        check_attention(broken, tflite=False, decoders=())
    assert caught.value.promise == "builds"
    assert caught.value.method == f"{broken.__name__}.build_score"
    assert "query_dim=4, key_dim=6" in str(caught.value)


def test_a_built_layer_is_checked_at_the_sizes_it_was_built_for():
    # The blind spot the three sizes close, where the author built the layer.
    layer = Misshapen()
    layer.build((3, 4, 4), (3, 5, 4))  # d_q = d_k = d_v = 4
    report = check_attention(layer, tflite=False, decoders=("bahdanau",))
    assert all(report[p] == "passed" for p in PROMISES[:-1]), report


def test_a_layer_that_refuses_other_key_sizes_is_checked_with_keys_of_the_query_size():
    # Luong's dot score refuses d_k != d_q before build_score runs.
    layer = LuongAttention("dot")
    check_attention(layer, tflite=False, decoders=())
    assert (layer.query_dim, layer.key_dim, layer.value_dim) == (4, 4, 8)


# The state: each entry of the shape attention_state_shapes gives, in state_dtype.


def test_a_step_state_of_the_wrong_shape_is_named_with_its_key_and_shapes():
    with pytest.raises(AttentionContractError) as caught:
        check_attention(lambda: GrowingState(num_mixtures=2), tflite=False, decoders=())
    assert caught.value.promise == "state shapes and dtypes"
    assert caught.value.method == "GrowingState.step_weights"
    assert "the new state entry 'position' must be (3, 2) float32" in str(caught.value)
    assert str(caught.value).endswith("Received: (3, 3) float32")


def test_an_initial_state_of_the_wrong_shape_is_named_with_its_key_and_shapes():
    # Its build's step on zeros trips on the state: the state is named, not build_score.
    with pytest.raises(AttentionContractError) as caught:
        check_attention(lambda: WideInitialState(num_mixtures=2), tflite=False, decoders=())
    assert caught.value.promise == "state shapes and dtypes"
    assert caught.value.method == "WideInitialState.initial_attention_state"
    assert "the state entry 'position' must be (3, 2) float32" in str(caught.value)
    assert str(caught.value).endswith("Received: (3, 3) float32")


def test_a_state_in_float16_is_named_with_its_key_and_dtype():
    with pytest.raises(AttentionContractError) as caught:
        check_attention(lambda: HalfState(num_mixtures=2), tflite=False, decoders=())
    assert caught.value.promise == "state shapes and dtypes"
    assert caught.value.method == "HalfState.step_weights"
    assert "the new state entry 'position' must be (3, 2) float32" in str(caught.value)
    assert str(caught.value).endswith("Received: (3, 2) float16")


def test_the_base_casts_a_float16_state_back_to_the_state_dtype():
    # What docs/custom_attention.md says the base does with a state a step
    # returns in reduced precision: the next step reads it in state_dtype.
    layer = HalfState(num_mixtures=2)
    query = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    value = np.random.default_rng(1).normal(size=(3, 5, 6)).astype("float32")
    layer.build((3, 1, 4), value.shape, value.shape)
    keys = layer.precompute_keys(value)
    state = layer.initial_attention_state(value)
    _, _, new_state = layer.attend_step(query, value, keys, state)
    assert keras.backend.standardize_dtype(new_state["position"].dtype) == layer.state_dtype
    assert layer.state_dtype == "float32"


@pytest.mark.tensorflow
def test_the_tflite_check_alone_names_a_float16_state_not_the_export():
    checks = dict(attention_checks(lambda: HalfState(num_mixtures=2), tflite=True, decoders=()))
    with pytest.raises(AttentionContractError) as caught:
        checks["builtin-only TFLite"]()
    assert caught.value.promise == "state shapes and dtypes"
    assert "from_model" not in str(caught.value)


# A missing optional package: a result of its own, never a breach.


@pytest.mark.tensorflow
def test_a_missing_ai_edge_litert_is_reported_as_a_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # import ai_edge_litert fails
    report = check_attention(lambda: GMMAttention(2), tflite=True, decoders=())
    result = report["builtin-only TFLite"]
    assert result.startswith("missing package: ai-edge-litert ")
    assert result.endswith('pip install "keras-seq2seq-attention[tensorflow]"')
    assert all(report[p] == "passed" for p in PROMISES[:-1]), report


@pytest.mark.tensorflow
def test_a_missing_tensorflow_is_reported_with_the_tensorflow_extra(monkeypatch):
    checks = dict(attention_checks(lambda: GMMAttention(2), tflite=True, decoders=()))
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # import tensorflow fails
    result = checks["builtin-only TFLite"]()
    assert result.startswith("missing package: tensorflow ")
    assert result.endswith('pip install "keras-seq2seq-attention[tensorflow]"')


@pytest.mark.tensorflow
def test_a_missing_package_skips_its_parametrized_test_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    mark = parametrize_with_checks(lambda: GMMAttention(2), tflite=True, decoders=())
    promise, check = mark.args[1][-1]
    assert promise == "builtin-only TFLite"
    with pytest.raises(pytest.skip.Exception, match=r"ai-edge-litert.*\[tensorflow\]"):
        check()


# One promise at a time.


def test_attention_checks_yield_each_promise_once_in_order():
    names = [promise for promise, _ in attention_checks(lambda: GMMAttention(2))]
    assert names == list(PROMISES)
    assert len(set(names)) == len(names)


def test_each_check_runs_alone_on_a_layer_of_its_own():
    made = []

    def factory():
        made.append(GMMAttention(2))
        return made[-1]

    checks = dict(attention_checks(factory, tflite=False, decoders=()))
    assert made == []  # nothing is made before a check runs
    assert checks["padded target steps"]() == "passed"
    assert checks["get_config round trip"]() == "passed"
    assert len(made) == 2 and all(layer.built for layer in made)


def test_a_breach_of_one_promise_does_not_stop_the_others():
    results = {}
    for promise, check in attention_checks(
        lambda: ForgetsTheMask(), tflite=False, decoders=("bahdanau",)
    ):
        try:
            results[promise] = check()
        except AttentionContractError as error:
            results[promise] = f"breaks '{error.promise}'"
    assert results == {
        **dict.fromkeys(PROMISES, "passed"),
        "zero weight at masked keys": "breaks 'zero weight at masked keys'",
        # The share it gives the padding changes with the padding.
        "decodes the same alone and in a padded batch": (
            "breaks 'decodes the same alone and in a padded batch'"
        ),
        "builtin-only TFLite": "skipped: tflite=False",
    }


def test_parametrize_with_checks_gives_one_test_per_promise_named_after_it():
    mark = parametrize_with_checks(lambda: GMMAttention(2))
    assert mark.args[0] == ("promise", "check")
    assert [promise for promise, _ in mark.args[1]] == list(PROMISES)
    assert mark.kwargs["ids"] == list(PROMISES)


@parametrize_with_checks(lambda: GMMAttention(2), tflite=False, decoders=("bahdanau",))
def test_gmm_keeps_each_promise_on_its_own(promise, check):
    assert check() == "passed"  # tflite=False: its test is skipped with the reason


def test_importing_the_checker_does_not_import_pytest():
    code = "import sys, keras_attention.testing; print('pytest' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip().splitlines()[-1] == "False"
