"""`check_attention`: runs an attention mechanism through every promise of the contract.

As scikit-learn's `check_estimator` is for estimators: the author of a
mechanism (a subclass of `BaseAttention`, docs/custom_attention.md) calls

    from keras_attention.testing import check_attention
    check_attention(lambda: MyAttention(num_mixtures=2))

in a test. Each promise runs on tiny shapes (a batch of 3: a full row, a
padded one and a fully masked one; 5 keys, 4 queries) and the first broken one
raises `AttentionContractError` naming the method and the promise, e.g.
"MyAttention.step_weights breaks the promise 'zero weight at masked keys':
...". The promises, in the order they are checked, are `PROMISES`.

The checks read what the mechanism returns itself (`step_weights` is called
directly): the base class zeroes the weights at masked keys and refuses a
random draw at run time as well, but a mechanism that needs that is wrong,
and the check says so.
"""

import contextlib
import os
import tempfile

import keras
import numpy as np
from keras import ops

from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.step_guard import RandomDrawInStepError
from keras_attention.attention.step_guard import no_random_draws
from keras_attention.generation.search_defaults import BeamSettings

PROMISES = (
    "builds",
    "state keys",
    "shapes and dtypes",
    "zero weight at masked keys",
    "no random draw inside a step",
    "sequence call equals step-by-step decoding",
    "padded target steps",
    "get_config round trip",
    "mixed precision",
    "greedy and beam inside a decoder",
    "builtin-only TFLite",
)

# d_v = d_q: Luong's dot score needs keys of the query's size.
BATCH, T_V, T_Q, D_Q, D_V = 3, 5, 4, 4, 4
# A full row, a padded one (3 real keys) and a fully masked one: (B, T_v).
_VALUE_MASK = np.arange(T_V)[None, :] < np.array([[T_V], [3], [0]])
_TOL = 1e-5
_HALF_TOL = 3e-2


class AttentionContractError(AssertionError):
    """A mechanism breaks a promise of the attention contract.

    Attributes:
        method: the method that breaks it, e.g. "MyAttention.step_weights".
        promise: one of `PROMISES`.
    """

    def __init__(self, method, promise, detail):
        super().__init__(f"{method} breaks the promise '{promise}': {detail}")
        self.method = method
        self.promise = promise


def check_attention(mechanism, tflite=None, decoders=("bahdanau", "luong")):
    """Checks every promise of the attention contract; raises on the first broken one.

    Args:
        mechanism: a function of no arguments that returns a new attention
            layer (a `BaseAttention`), or such a layer. An unbuilt layer is
            built and given random weights; the other layers of the checks
            are copies made from its `get_config`.
        tflite: whether to export a generator around it to a builtin-only
            TFLite model and compare its tokens with Keras'. None: when
            TensorFlow is the backend (the export needs it). True on another
            backend raises.
        decoders: the decoders the mechanism runs in for the greedy and beam
            check, of "bahdanau" and "luong".

    Returns:
        A dict: each promise of `PROMISES` → "passed", or "skipped: <why>".

    Raises:
        AttentionContractError: names the method and the promise broken.
        TypeError: `mechanism` is neither an attention layer nor a function
            that returns one.
    """
    tensorflow = keras.backend.backend() == "tensorflow"
    if tflite and not tensorflow:
        raise ValueError(
            "Invalid value for argument `tflite`. The TFLite export runs on the "
            f"TensorFlow backend. Received: tflite={tflite!r} with KERAS_BACKEND="
            f"{keras.backend.backend()}"
        )
    layer = (
        mechanism()
        if callable(mechanism) and not isinstance(mechanism, BaseAttention)
        else mechanism
    )
    if not isinstance(layer, BaseAttention):
        raise TypeError(
            "Invalid value for argument `mechanism`. Expected a subclass instance of "
            "keras_attention.BaseAttention, or a function that returns one. "
            f"Received: {layer!r}"
        )
    check = _Checker(layer)
    report = {}
    for promise, run in (
        ("builds", check.builds),
        ("state keys", check.state_keys),
        ("shapes and dtypes", check.shapes_and_dtypes),
        ("zero weight at masked keys", check.masked_keys),
        ("no random draw inside a step", check.no_random_draw),
        ("sequence call equals step-by-step decoding", check.sequence_equals_steps),
        ("padded target steps", check.padded_steps),
        ("get_config round trip", check.config_round_trip),
        ("mixed precision", check.mixed_precision),
        ("greedy and beam inside a decoder", lambda: check.decoders(decoders)),
    ):
        report[promise] = run() or "passed"
    if tflite or (tflite is None and tensorflow):
        report["builtin-only TFLite"] = check.tflite() or "passed"
    elif tflite is None:
        report["builtin-only TFLite"] = (
            f"skipped: the export runs on the TensorFlow backend, not {keras.backend.backend()}"
        )
    else:
        report["builtin-only TFLite"] = "skipped: tflite=False"
    return report


class _Checker:
    """The checks of `check_attention`, on copies of one mechanism."""

    def __init__(self, layer):
        self.layer = layer
        self.name = type(layer).__name__
        rng = np.random.default_rng(0)
        self.query = rng.normal(size=(BATCH, T_Q, D_Q)).astype("float32")  # (B, T_q, d_q)
        self.value = rng.normal(size=(BATCH, T_V, D_V)).astype("float32")  # (B, T_v, d_v)
        self.mask = _VALUE_MASK
        self.built = None  # a built copy, with its weights

    def fail(self, method, promise, detail):
        raise AttentionContractError(f"{self.name}.{method}", promise, detail)

    @contextlib.contextmanager
    def promise(self, method, promise):
        """Any error inside becomes the breach of `promise` by `method`."""
        try:
            yield
        except AttentionContractError:
            raise
        except RandomDrawInStepError as error:
            self.fail(method, "no random draw inside a step", str(error))
        except Exception as error:
            self.fail(method, promise, f"{type(error).__name__}: {error}")

    def copy(self, dtype=None):
        """A new layer from the config, with `dtype` if given."""
        config = self.layer.get_config()
        if dtype is not None:
            config["dtype"] = dtype
        return type(self.layer).from_config(config)

    def fresh(self, dtype=None):
        """A copy, built, with the weights of `self.built`."""
        layer = self.copy(dtype)
        layer(self.query, self.value)  # builds it
        layer.set_weights(self.built.get_weights())
        return layer

    # ------------------------------------------------------------ promises

    def builds(self):
        layer = self.layer  # the layer itself: its copies are checked against it
        if layer.built:
            self.built = layer
            return
        with self.promise("build_score", "builds"):
            layer.build(self.query.shape, self.value.shape)  # build_score, one step on zeros
        rng = np.random.default_rng(1)
        # Weights away from Keras' zeros (a zero bias hides what a mask forgets).
        layer.set_weights(
            [w + rng.uniform(-0.3, 0.3, size=w.shape).astype(w.dtype) for w in layer.get_weights()]
        )
        self.built = layer

    def config_round_trip(self):
        with self.promise("get_config", "get_config round trip"):
            config = self.built.get_config()
            serialized = keras.saving.serialize_keras_object(self.built)
            again = keras.saving.deserialize_keras_object(serialized)
            if type(again) is not type(self.built):
                self.fail(
                    "get_config",
                    "get_config round trip",
                    f"deserializing gives a {type(again).__name__}: is the class registered "
                    "with keras.saving.register_keras_serializable?",
                )
            if again.get_config() != config:
                self.fail(
                    "get_config",
                    "get_config round trip",
                    f"from_config(get_config()).get_config() differs: {again.get_config()} "
                    f"against {config}",
                )
            again(self.query, self.value)
            again.set_weights(self.built.get_weights())
        expected = self.built(self.query, self.value, value_mask=self.mask)
        got = again(self.query, self.value, value_mask=self.mask)
        if not np.allclose(np.asarray(got), np.asarray(expected), atol=_TOL, equal_nan=True):
            self.fail(
                "get_config",
                "get_config round trip",
                "a layer made from the config, with the same weights, gives other "
                "outputs: a constructor argument is missing from get_config",
            )

    def state_keys(self):
        layer, keys = self.built, tuple(self.built.attention_state_keys)
        with self.promise("initial_attention_state", "state keys"):
            state = layer.initial_attention_state(ops.convert_to_tensor(self.value), self.mask)
        if not isinstance(state, dict) or sorted(state) != sorted(keys):
            received = sorted(state) if isinstance(state, dict) else type(state).__name__
            self.fail(
                "initial_attention_state",
                "state keys",
                f"expected a dict with the keys attention_state_keys={list(keys)}. "
                f"Received: {received}",
            )
        with self.promise("attention_state_shapes", "state keys"):
            shapes = layer.attention_state_shapes((BATCH, T_V, D_V))
        for key in keys:
            shape = tuple(state[key].shape)
            if not shape or shape[0] != BATCH:
                self.fail(
                    "initial_attention_state",
                    "state keys",
                    f"the entry '{key}' must have the batch ({BATCH}) as its first axis. "
                    f"Received shape {shape}",
                )
            if tuple(shapes.get(key, ())) != shape:
                self.fail(
                    "attention_state_shapes",
                    "state keys",
                    f"for a (batch, T_v, d_v)={(BATCH, T_V, D_V)} value it gives "
                    f"{shapes.get(key)} for '{key}', initial_attention_state {shape}",
                )
            dtype = keras.backend.standardize_dtype(state[key].dtype)
            if dtype != layer.state_dtype:
                self.fail(
                    "initial_attention_state",
                    "state keys",
                    f"the entry '{key}' is {dtype}, the state is {layer.state_dtype} "
                    "(self.state_dtype)",
                )

    def _raw_steps(self, layer, steps=T_Q, training=False, noise=None):
        """`step_weights` called directly, as a decoder's loop would feed it:
        the weights it returns, before the base class masks them."""
        mask = ops.convert_to_tensor(self.mask)
        value = _zeroed(ops.convert_to_tensor(self.value), self.mask)
        keys = layer.precompute_keys(value)
        state = layer.initial_attention_state(value, mask)
        out = []
        for t in range(steps):
            query = ops.cast(ops.convert_to_tensor(self.query[:, t]), layer.compute_dtype)
            this = None if noise is None else noise[t]
            with no_random_draws(f"{self.name}.step_weights"):
                if type(layer).step_weights is BaseAttention.step_weights:
                    # A content-only layer (ContentAttention): its step is attend_step.
                    context, weights, new_state = layer.attend_step(
                        query, value, keys, state, value_mask=mask, training=training, noise=this
                    )
                    returned = (weights, new_state)
                else:
                    returned = layer.step_weights(query, keys, state, mask, training, this)
            if not isinstance(returned, (tuple, list)) or len(returned) != 2:
                self.fail(
                    "step_weights",
                    "shapes and dtypes",
                    f"must return a pair (weights, new_state). Received: {type(returned).__name__}",
                )
            weights, new_state = returned
            out.append((weights, state, new_state))
            if isinstance(new_state, dict) and sorted(new_state) == sorted(state):
                state = {k: ops.cast(new_state[k], layer.state_dtype) for k in state}
        return out

    def shapes_and_dtypes(self):
        layer = self.built
        with self.promise("step_weights", "shapes and dtypes"):
            steps = self._raw_steps(layer, steps=2)
        for weights, state, new_state in steps:
            shape = tuple(weights.shape)
            if shape != (BATCH, T_V):
                self.fail(
                    "step_weights",
                    "shapes and dtypes",
                    f"the weights must be (batch, T_v)={(BATCH, T_V)}. Received: {shape}",
                )
            if not keras.backend.is_float_dtype(keras.backend.standardize_dtype(weights.dtype)):
                self.fail(
                    "step_weights",
                    "shapes and dtypes",
                    f"the weights must be a float tensor. Received: {weights.dtype}",
                )
            if not isinstance(new_state, dict) or sorted(new_state) != sorted(state):
                received = sorted(new_state) if isinstance(new_state, dict) else new_state
                self.fail(
                    "step_weights",
                    "state keys",
                    f"the new state must be a dict with the keys {sorted(state)}. "
                    f"Received: {received}",
                )
            for key in state:
                old, new = tuple(state[key].shape), tuple(new_state[key].shape)
                if old != new:
                    self.fail(
                        "step_weights",
                        "state keys",
                        f"the new state entry '{key}' must keep the shape {old}. Received: {new}",
                    )
        with self.promise("attend_step", "shapes and dtypes"):
            value = ops.convert_to_tensor(self.value)
            keys = layer.precompute_keys(value)
            state = layer.initial_attention_state(value, None)
            context, weights, state = layer.attend_step(self.query[:, 0], value, keys, state)
        for name, tensor, expected in (
            ("context", context, (BATCH, D_V)),
            ("weights", weights, (BATCH, T_V)),
        ):
            dtype = keras.backend.standardize_dtype(tensor.dtype)
            if tuple(tensor.shape) != expected or dtype != layer.compute_dtype:
                self.fail(
                    "attend_step",
                    "shapes and dtypes",
                    f"the {name} must be {expected} in {layer.compute_dtype}. "
                    f"Received: {tuple(tensor.shape)} {dtype}",
                )

    def masked_keys(self):
        with self.promise("step_weights", "zero weight at masked keys"):
            steps = self._raw_steps(self.built)
        for t, (weights, _, _) in enumerate(steps):
            weights = np.asarray(ops.convert_to_numpy(ops.cast(weights, "float32")))
            nan = np.isnan(weights)
            if nan.any():
                self.fail(
                    "step_weights",
                    "zero weight at masked keys",
                    f"NaN weights at step {t} (rows {sorted(set(np.nonzero(nan)[0]))}; "
                    "row 2 is fully masked: it must give all zeros)",
                )
            leaked = weights[~self.mask]
            if np.any(leaked != 0.0):
                row = "the fully masked row" if np.any(weights[2] != 0.0) else "a padded row"
                self.fail(
                    "step_weights",
                    "zero weight at masked keys",
                    f"weight {float(np.abs(leaked).max()):.3g} on a masked key at step {t} "
                    f"({row}): the weights must be exactly 0 where value_mask is False "
                    "(use keras_attention.masked_softmax, or `where` for weights without "
                    "a softmax)",
                )
        real = np.asarray(ops.convert_to_numpy(ops.cast(steps[0][0], "float32")))[self.mask]
        if np.any(real < 0.0):
            self.fail("step_weights", "zero weight at masked keys", "negative weights")

    def no_random_draw(self):
        layer = self.built
        with self.promise("step_noise", "no random draw inside a step"):
            inference = layer.step_noise((T_Q, BATCH, T_V), training=False)
        if inference is not None:
            self.fail(
                "step_noise",
                "no random draw inside a step",
                "outside training it must return None: generation and the exported "
                "models are deterministic",
            )
        with self.promise("step_noise", "no random draw inside a step"):
            noise = layer.step_noise((T_Q, BATCH, T_V), training=True)
        if noise is not None:
            leaves = noise.values() if isinstance(noise, dict) else [noise]
            for leaf in leaves:
                if tuple(leaf.shape[:2]) != (T_Q, BATCH):
                    self.fail(
                        "step_noise",
                        "no random draw inside a step",
                        f"the draws must have (T_dec, batch)={(T_Q, BATCH)} as their first "
                        f"axes. Received: {tuple(leaf.shape)}",
                    )
        for training in (False, True):
            this = noise if training else None
            sliced = None if this is None else _Sliced(this)
            with self.promise("step_weights", "no random draw inside a step"):
                self._raw_steps(layer, steps=2, training=training, noise=sliced)

    def padded_steps(self):
        layer = self.built
        step_mask = np.ones((BATCH, T_Q), dtype=bool)
        step_mask[:, 2] = False  # (B, T_q): the third query of every row is padding
        with self.promise("attend_sequence", "padded target steps"):
            context, weights = layer(
                self.query,
                self.value,
                query_mask=step_mask,
                value_mask=self.mask,
                return_attention_scores=True,
            )
            real = layer(
                self.query[:, [0, 1, 3]],
                self.value,
                value_mask=self.mask,
                return_attention_scores=True,
            )
        context, weights = np.asarray(context), np.asarray(weights)
        if np.any(context[:, 2] != 0.0) or np.any(weights[:, 2] != 0.0):
            self.fail(
                "attend_sequence",
                "padded target steps",
                "a padded query must give zero context and weights",
            )
        for index, what in ((0, "context"), (1, "weights")):
            whole = (context, weights)[index][:, [0, 1, 3]]
            if not np.allclose(whole, np.asarray(real[index]), atol=_TOL):
                self.fail(
                    "attend_sequence",
                    "padded target steps",
                    f"the {what} with a padded query differ from those without it: the "
                    "state after a padded query must be the state before it",
                )

    def sequence_equals_steps(self):
        layer = self.built
        with self.promise("attend_sequence", "sequence call equals step-by-step decoding"):
            context, weights, last = layer(
                self.query,
                self.value,
                value_mask=self.mask,
                return_attention_scores=True,
                return_attention_state=True,
            )
        with self.promise("attend_step", "sequence call equals step-by-step decoding"):
            value = _zeroed(ops.convert_to_tensor(self.value), self.mask)
            keys = layer.precompute_keys(value)
            state = layer.initial_attention_state(value, self.mask)
            steps = []
            for t in range(T_Q):
                step = layer.attend_step(self.query[:, t], value, keys, state, value_mask=self.mask)
                steps.append(step[:2])
                state = step[2]
        for index, what in ((0, "context"), (1, "weights")):
            by_step = np.stack([np.asarray(s[index]) for s in steps], axis=1)
            whole = np.asarray((context, weights)[index])
            if whole.shape != by_step.shape:
                gap = f"shape {whole.shape} against {by_step.shape}"
            else:
                gap = f"up to {float(np.max(np.abs(whole - by_step))):.3g}"
            if whole.shape != by_step.shape or not np.allclose(whole, by_step, atol=_TOL):
                self.fail(
                    "attend_sequence",
                    "sequence call equals step-by-step decoding",
                    f"the {what} of the sequence call differ from attend_step's, step by "
                    f"step: {gap}",
                )
        for key in state:
            if not np.allclose(np.asarray(last[key]), np.asarray(state[key]), atol=_TOL):
                self.fail(
                    "attend_sequence",
                    "sequence call equals step-by-step decoding",
                    f"the last state '{key}' differs from the state after the last step",
                )

    def mixed_precision(self):
        with self.promise("step_weights", "mixed precision"):
            half = self.fresh("mixed_float16")
            context, weights, state = half(
                self.query,
                self.value,
                value_mask=self.mask,
                return_attention_scores=True,
                return_attention_state=True,
            )
        expected = self.built(self.query, self.value, value_mask=self.mask)
        context32 = np.asarray(ops.cast(context, "float32"))
        if keras.backend.standardize_dtype(context.dtype) != "float16":
            self.fail(
                "attend_step",
                "mixed precision",
                f"under mixed_float16 the context must be float16. Received: {context.dtype}",
            )
        for key, tensor in state.items():
            if keras.backend.standardize_dtype(tensor.dtype) != "float32":
                self.fail(
                    "initial_attention_state",
                    "mixed precision",
                    f"under mixed_float16 the state '{key}' must be float32 "
                    f"(self.state_dtype). Received: {tensor.dtype}",
                )
        if not np.all(np.isfinite(context32)) or not np.allclose(
            context32, np.asarray(expected), rtol=_HALF_TOL, atol=_HALF_TOL
        ):
            self.fail(
                "step_weights",
                "mixed precision",
                "under mixed_float16 the outputs are not finite or far from float32's "
                "(compute exponentials and long sums in self.state_dtype)",
            )

    def _model(self, kind):
        from keras_attention.decoders.bahdanau_decoder import BahdanauDecoder
        from keras_attention.decoders.luong_decoder import LuongDecoder

        keras.utils.set_random_seed(0)
        source = keras.Input((None,), dtype="int32", name="source")
        target_in = keras.Input((None,), dtype="int32", name="target_in")
        memory = keras.layers.Embedding(_VOCAB, D_V, mask_zero=True)(source)
        memory = keras.layers.GRU(D_V, return_sequences=True)(memory)
        embedded = keras.layers.Embedding(_VOCAB, D_Q, mask_zero=True)(target_in)
        attention = self.copy()
        if kind == "bahdanau":
            decoder = BahdanauDecoder(D_Q, attention)
        else:
            decoder = LuongDecoder(D_Q, attention)
        outputs, _, _ = decoder(embedded, memory)
        readout = keras.layers.Dense(_VOCAB)
        model = keras.Model([source, target_in], readout(outputs))
        # Neither padding (0) nor END (2) is ever predicted: every search runs
        # all its steps, with the state carried through each.
        bias = np.zeros((_VOCAB,), "float32")
        bias[[0, 2]] = -30.0
        readout.bias.assign(bias)
        return model

    def decoders(self, kinds):
        from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator

        # Row 0 differs, rows 1 and 2 (padded) are the same: their tokens must be
        # too. One shape, so the searches are traced once.
        other = _SOURCE.copy()
        other[0] = other[0, ::-1]
        for kind in kinds:
            method = f"step_weights (in {kind.capitalize()}Decoder)"
            promise = "greedy and beam inside a decoder"
            with self.promise(method, promise):
                generator = Seq2SeqGenerator.from_model(self._model(kind), start_id=1, end_id=2)
                # The traced searches, called as they are (eagerly on TensorFlow
                # and PyTorch): tracing them for tiny inputs costs more than running.
                sources = [ops.convert_to_tensor(source) for source in (_SOURCE, other)]
                results = {
                    "greedy": [generator.greedy_graph(s, _STEPS) for s in sources],
                    "beam": [generator.beam_graph(s, _BEAM, _STEPS) for s in sources],
                }
            for name, (first, second) in results.items():
                tokens = np.asarray(first["tokens"])
                same = tokens.shape == (BATCH, _STEPS) and all(
                    np.allclose(np.asarray(first[k])[1:], np.asarray(second[k])[1:], atol=_TOL)
                    for k in ("tokens", "log_probs", "attention")
                )
                if not same:
                    self.fail(
                        method,
                        promise,
                        f"{name} search gives a source other tokens, log-probabilities or "
                        "attention when another source "
                        "of the batch changes: every row of the state must belong to its "
                        "own sequence (a beam reorders the entries along the batch axis)",
                    )

    def tflite(self):
        from keras_attention import export
        from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator

        method = "step_weights (exported)"
        promise = "builtin-only TFLite"
        with self.promise(method, promise), tempfile.TemporaryDirectory() as folder:
            generator = Seq2SeqGenerator.from_model(self._model("bahdanau"), start_id=1, end_id=2)
            path = os.path.join(folder, "attention.tflite")
            export.export_tflite(generator, path, max_length=_STEPS)
            others = export.non_builtin_operators(path)
            if others:
                self.fail(
                    method,
                    promise,
                    f"the model needs operators outside TFLite's builtins: {sorted(others)} "
                    "(write the step with keras.ops that convert to builtins)",
                )
            from ai_edge_litert.interpreter import Interpreter

            runner = Interpreter(model_path=path).get_signature_runner("generate")
            for row in _SOURCE:
                one = row[None, row > 0]
                lite = runner(source=one)["tokens"]
                expected = generator.greedy(one, max_length=_STEPS)["tokens"]
                if not np.array_equal(np.asarray(lite), np.asarray(expected)):
                    self.fail(
                        method,
                        promise,
                        f"the TFLite model's tokens {np.asarray(lite).tolist()} differ from "
                        f"Keras' {np.asarray(expected).tolist()}",
                    )


_VOCAB = 7
_BEAM = BeamSettings(beam_width=2)
_STEPS = 5
# Three sources of 5, 3 and 1 tokens, padded with 0.
_SOURCE = np.array([[3, 4, 5, 6, 3], [6, 5, 4, 0, 0], [5, 0, 0, 0, 0]], dtype="int32")


class _Sliced:
    """`noise[t]` of what `step_noise` returned, a tensor or a dict of them."""

    def __init__(self, noise):
        self.noise = noise

    def __getitem__(self, t):
        if isinstance(self.noise, dict):
            return {key: value[t] for key, value in self.noise.items()}
        return self.noise[t]


def _zeroed(value, mask):
    """The memory as a decoder hands it over: zero at masked keys."""
    keep = ops.convert_to_tensor(mask)[:, :, None]
    return ops.where(keep, value, ops.zeros((), dtype=value.dtype))
