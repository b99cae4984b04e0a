"""`check_attention`: runs an attention mechanism through every promise of the contract.

As scikit-learn's `check_estimator` is for estimators: the author of a
mechanism (a subclass of `BaseAttention`, docs/custom_attention.md) calls

    from keras_attention.testing import check_attention
    check_attention(lambda: MyAttention(num_mixtures=2))

in a test. Each promise runs on tiny shapes (a batch of 3: a full row, a
padded one and a fully masked one; 5 keys, 4 queries; query, key and value
of three different sizes) and the first broken one raises
`AttentionContractError` naming the method and the promise, e.g.
"MyAttention.step_weights breaks the promise 'zero weight at masked keys':
...". The promises, in the order they are checked, are `PROMISES`.

One promise at a time, as scikit-learn's `parametrize_with_checks` gives
one test per check: `attention_checks` yields `(promise, check)` pairs, each
check running its promise alone on a layer of its own, and
`parametrize_with_checks` makes them one pytest test each (pytest is
imported there, not here).

A result is "passed", "skipped: <why>" or, where an optional package is not
installed, "missing package: <package> ...: pip install ...": a check that
cannot run, never a breach.

The checks read what the mechanism returns itself (`step_weights` is called
directly): the base class zeroes the weights at masked keys and refuses a
random draw at run time as well, but a mechanism that needs that is wrong,
and the check says so.
"""

import contextlib
import copy
import functools
import importlib
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
    "state shapes and dtypes",
    "shapes and dtypes",
    "zero weight at masked keys",
    "no random draw inside a step",
    "sequence call equals step-by-step decoding",
    "padded target steps",
    "get_config round trip",
    "mixed precision",
    "greedy and beam inside a decoder",
    "decodes the same alone and in a padded batch",
    "builtin-only TFLite",
)

BATCH, T_V, T_Q = 3, 5, 4
# (d_q, d_k, d_v), the first the layer builds for. Three different sizes: a
# weight made with one where another belongs, (d_k, d_q) for (d_q, d_k), fails
# its first step instead of passing by coincidence. Even, for two heads. A layer
# that refuses sizes before build_score runs (Luong's dot score needs d_k = d_q)
# is checked with the next.
SIZES = ((4, 6, 8), (4, 4, 8), (4, 4, 4))
# A full row, a padded one (3 real keys) and a fully masked one: (B, T_v).
_VALUE_MASK = np.arange(T_V)[None, :] < np.array([[T_V], [3], [0]])
_TOL = 1e-5
# Masked positions appended to every row for "decodes the same alone and in
# a padded batch": the full row is then padded too.
_EXTRA_PADDING = 3
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
            built, for query, key and value of three different sizes, and
            given random weights; the other layers of the checks are copies
            made from its `get_config`. A built layer is checked at its sizes.
        tflite: whether to export a generator around it to a builtin-only
            TFLite model and compare its tokens with Keras'. None: when
            TensorFlow is the backend (the export needs it). True on another
            backend raises.
        decoders: the decoders the mechanism runs in for the greedy and beam
            check, of "bahdanau" and "luong".

    Returns:
        A dict: each promise of `PROMISES` → "passed", "skipped: <why>", or
        "missing package: <package> (<what for>): pip install ..." where the
        check needs an optional package that is not installed.

    Raises:
        AttentionContractError: names the method and the promise broken.
        TypeError: `mechanism` is neither an attention layer nor a function
            that returns one.
    """
    _check_tflite_argument(tflite)
    check = _Checker(_layer_of(mechanism), tflite, decoders)
    return {promise: check.run(promise) for promise in PROMISES}  # stops at a breach


def attention_checks(mechanism, tflite=None, decoders=("bahdanau", "luong")):
    """Yields `(promise, check)` for each promise of `PROMISES`, in order.

    One check per promise, as scikit-learn's `parametrize_with_checks` gives
    one test per check: `check()` runs its promise alone, on a layer of its
    own (it calls `mechanism` again and builds the layer), so that a breach
    of one promise does not stop the others. The arguments are those of
    `check_attention`.

    Example:

        for promise, check in attention_checks(lambda: GMMAttention(2), tflite=False):
            print(promise, check())  # "passed", "skipped: ...", "missing package: ..."

    Yields:
        `(promise, check)`: a name of `PROMISES` and a function of no
        arguments that returns the promise's result, as `check_attention`'s
        report gives it, or raises `AttentionContractError`.
    """
    _check_tflite_argument(tflite)
    for promise in PROMISES:
        yield promise, functools.partial(_check_one, mechanism, promise, tflite, decoders)


def parametrize_with_checks(mechanism, tflite=None, decoders=("bahdanau", "luong")):
    """A pytest decorator: one test per promise of `PROMISES`.

    The test receives `promise` (its name, also the test's id) and `check`,
    which runs that promise alone (`attention_checks`): it raises
    `AttentionContractError` on a breach and skips the test, with the reason,
    where the promise is skipped or needs a package that is not installed.
    pytest is imported here, not when `keras_attention.testing` is.

    Example:

        @parametrize_with_checks(lambda: MyAttention(num_mixtures=2))
        def test_my_attention_keeps_the_promise(promise, check):
            check()

    Returns:
        `pytest.mark.parametrize(("promise", "check"), ...)`.
    """
    import pytest

    pairs = list(attention_checks(mechanism, tflite, decoders))
    return pytest.mark.parametrize(
        ("promise", "check"),
        [(promise, functools.partial(_check_or_skip, check)) for promise, check in pairs],
        ids=[promise for promise, _ in pairs],
    )


def _check_or_skip(check):
    """`check()` in a pytest test: a result other than "passed" skips the test."""
    result = check()
    if result != "passed":
        import pytest

        pytest.skip(result)
    return result


def _check_one(mechanism, promise, tflite, decoders):
    """One promise of `PROMISES`, alone: the layer is built first."""
    return _Checker(_layer_of(mechanism), tflite, decoders).run(promise)


def _check_tflite_argument(tflite):
    if tflite and keras.backend.backend() != "tensorflow":
        raise ValueError(
            "Invalid value for argument `tflite`. The TFLite export runs on the "
            f"TensorFlow backend. Received: tflite={tflite!r} with KERAS_BACKEND="
            f"{keras.backend.backend()}"
        )


def _layer_of(mechanism):
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
    return layer


# The optional packages of the TFLite check: (import name, pip name, what
# for, the extra of keras-seq2seq-attention that brings it).
_TFLITE_PACKAGES = (
    ("tensorflow", "tensorflow", "the TFLite converter", "tensorflow"),
    ("ai_edge_litert.interpreter", "ai-edge-litert", "the TFLite interpreter", "tensorflow"),
)


def _missing_package(packages):
    """The result of a check whose optional package is not installed, or None."""
    for module, package, what, extra in packages:
        try:
            # The package first: a submodule imported before stays in sys.modules.
            importlib.import_module(module.split(".")[0])
            importlib.import_module(module)
        except ImportError:
            return (
                f"missing package: {package} ({what}, import {module.split('.')[0]}): "
                f'pip install "keras-seq2seq-attention[{extra}]"'
            )
    return None


class _Checker:
    """The checks of `check_attention`, on copies of one mechanism."""

    def __init__(self, layer, tflite=None, decoders=("bahdanau", "luong")):
        self.layer = layer
        self.name = type(layer).__name__
        self.export_tflite = tflite
        self.decoder_kinds = tuple(decoders)
        self.mask = _VALUE_MASK
        self.use_sizes(*SIZES[0])
        self.config = None  # the layer's, for its copies
        self.built = None  # a built copy, with its weights

    def use_sizes(self, d_q, d_k, d_v):
        """The inputs of the checks, for queries of d_q, keys of d_k, values of d_v."""
        self.sizes = (d_q, d_k, d_v)
        rng = np.random.default_rng(0)
        self.query = rng.normal(size=(BATCH, T_Q, d_q)).astype("float32")  # (B, T_q, d_q)
        self.key = rng.normal(size=(BATCH, T_V, d_k)).astype("float32")  # (B, T_v, d_k)
        self.value = rng.normal(size=(BATCH, T_V, d_v)).astype("float32")  # (B, T_v, d_v)

    def run(self, promise):
        """One promise of `PROMISES`, on the layer built first: its result."""
        if self.built is None and promise != "builds":
            self.builds()
        check = {
            "builds": self.builds,
            "state keys": self.state_keys,
            "state shapes and dtypes": self.state_shapes_and_dtypes,
            "shapes and dtypes": self.shapes_and_dtypes,
            "zero weight at masked keys": self.masked_keys,
            "no random draw inside a step": self.no_random_draw,
            "sequence call equals step-by-step decoding": self.sequence_equals_steps,
            "padded target steps": self.padded_steps,
            "get_config round trip": self.config_round_trip,
            "mixed precision": self.mixed_precision,
            "greedy and beam inside a decoder": lambda: self.decoders(self.decoder_kinds),
            "decodes the same alone and in a padded batch": self.alone_and_padded,
            "builtin-only TFLite": self.builtin_tflite,
        }[promise]
        return check() or "passed"

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
        config = copy.deepcopy(self.config) if self.config else self.layer.get_config()
        if dtype is not None:
            config["dtype"] = dtype
        return type(self.layer).from_config(config)

    def fresh(self, dtype=None):
        """A copy, built, with the weights of `self.built`."""
        layer = self.copy(dtype)
        self.build(layer)
        layer.set_weights(self.built.get_weights())
        return layer

    def whole_call(self, layer):
        """`layer` called on every query at once: `(context, weights, last state)`."""
        return layer(
            self.query,
            self.value,
            key=self.key,
            value_mask=self.mask,
            return_attention_scores=True,
            return_attention_state=True,
        )

    def build(self, layer):
        """Builds `layer` for the sizes of the checks. The build runs one step on
        zeros after `build_score`: where that step trips on a malformed initial
        state, the breach named is the state's, not build_score's."""
        try:
            layer.build(self.query.shape, self.value.shape, self.key.shape)
        except Exception:
            if layer.query_dim is not None:  # build_score ran
                self.initial_state(layer)  # raises for a malformed state
            raise

    # ------------------------------------------------------------ promises

    def builds(self):
        layer = self.layer  # the layer itself: its copies are checked against it
        if layer.built:
            self.use_sizes(layer.query_dim, layer.key_dim, layer.value_dim)
            self.built = layer
            return
        with self.promise("get_config", "get_config round trip"):
            # Before the build: a copy builds for the sizes it is given (a
            # decoder's memory is its keys and values), even where the config
            # of a built layer holds a built one (OverriddenAttention's).
            self.config = layer.get_config()
        for sizes in SIZES:
            self.use_sizes(*sizes)
            try:
                with self.promise("build_score", "builds"):
                    self.build(layer)  # build_score, one step on zeros
                break
            except AttentionContractError:
                # query_dim is None: the layer refused the sizes before
                # build_score ran (Luong's dot needs d_k = d_q); the next sizes.
                if layer.query_dim is not None or sizes == SIZES[-1]:
                    raise
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
            again(self.query, self.value, key=self.key)
            again.set_weights(self.built.get_weights())
        expected = self.built(self.query, self.value, key=self.key, value_mask=self.mask)
        got = again(self.query, self.value, key=self.key, value_mask=self.mask)
        if not np.allclose(np.asarray(got), np.asarray(expected), atol=_TOL, equal_nan=True):
            self.fail(
                "get_config",
                "get_config round trip",
                "a layer made from the config, with the same weights, gives other "
                "outputs: a constructor argument is missing from get_config",
            )

    def state_keys(self):
        with self.promise("step_weights", "state keys"):
            self._raw_steps(self.built, steps=1, entries=False)  # checks the keys

    def state_shapes_and_dtypes(self):
        with self.promise("step_weights", "state shapes and dtypes"):
            self._raw_steps(self.built, steps=2)  # checks every entry, at every step
        # Under mixed_float16 too, where the query and keys are float16 and the
        # state stays float32. A step that fails there for another reason is
        # the promise 'mixed precision''s to name.
        try:
            self._raw_steps(self.fresh("mixed_float16"), steps=2)
        except AttentionContractError:
            raise
        except Exception:
            pass

    def initial_state(self, layer, entries=True):
        """`initial_attention_state` of the memory as a decoder hands it over,
        checked: its keys and those of `attention_state_shapes` ('state keys');
        with `entries`, each entry's shape and dtype ('state shapes and dtypes')."""
        keys = sorted(layer.attention_state_keys)
        value = _zeroed(ops.convert_to_tensor(self.value), self.mask)
        with self.promise("initial_attention_state", "state keys"):
            state = layer.initial_attention_state(value, ops.convert_to_tensor(self.mask))
        if not isinstance(state, dict) or sorted(state) != keys:
            received = sorted(state) if isinstance(state, dict) else type(state).__name__
            self.fail(
                "initial_attention_state",
                "state keys",
                f"expected a dict with the keys attention_state_keys={keys}. Received: {received}",
            )
        value_shape = tuple(self.value.shape)  # (B, T_v, d_v)
        with self.promise("attention_state_shapes", "state keys"):
            shapes = layer.attention_state_shapes(value_shape)
        if not isinstance(shapes, dict) or sorted(shapes) != keys:
            received = sorted(shapes) if isinstance(shapes, dict) else type(shapes).__name__
            self.fail(
                "attention_state_shapes",
                "state keys",
                f"for a (batch, T_v, d_v)={value_shape} value it must give a dict with the "
                f"keys attention_state_keys={keys}. Received: {received}",
            )
        for key in keys if entries else ():
            expected = tuple(shapes[key])
            if not expected or expected[0] != BATCH:
                self.fail(
                    "attention_state_shapes",
                    "state shapes and dtypes",
                    f"the state entry '{key}' must be (batch, ...) with batch={BATCH}: "
                    f"for a (batch, T_v, d_v)={value_shape} value it gives {expected}",
                )
            self.check_entry(
                layer,
                "initial_attention_state",
                f"the state entry '{key}'",
                state[key],
                expected,
                f"what attention_state_shapes gives for a (batch, T_v, d_v)={value_shape} value",
            )
        return state

    def check_new_state(self, layer, state, new_state, entries=True):
        """The state a step returned: the keys it received ('state keys'); with
        `entries`, each entry of the shape it came in with, in `state_dtype`."""
        if not isinstance(new_state, dict) or sorted(new_state) != sorted(state):
            received = sorted(new_state) if isinstance(new_state, dict) else new_state
            self.fail(
                "step_weights",
                "state keys",
                f"the new state must be a dict with the keys {sorted(state)}. Received: {received}",
            )
        for key in sorted(state) if entries else ():
            self.check_entry(
                layer,
                "step_weights",
                f"the new state entry '{key}'",
                new_state[key],
                tuple(state[key].shape),
                "the shape it came in with",
            )

    def check_entry(self, layer, method, name, tensor, shape, source):
        """A state entry: of `shape` (from `source`), in `layer.state_dtype`."""
        got = (tuple(tensor.shape), keras.backend.standardize_dtype(tensor.dtype))
        if got != (shape, layer.state_dtype):
            self.fail(
                method,
                "state shapes and dtypes",
                f"{name} must be {shape} {layer.state_dtype} ({source}, in self.state_dtype "
                f"under the dtype policy {layer.dtype_policy.name}). Received: {got[0]} {got[1]}",
            )

    def _raw_steps(self, layer, steps=T_Q, training=False, noise=None, entries=True):
        """`step_weights` called directly, as a decoder's loop would feed it:
        the weights it returns, before the base class masks them. The state
        is checked before each step reads it (`initial_state`, `check_new_state`)."""
        mask = ops.convert_to_tensor(self.mask)
        keys = layer.precompute_keys(_zeroed(ops.convert_to_tensor(self.key), self.mask))
        state = self.initial_state(layer, entries)
        out = []
        for t in range(steps):
            query = ops.cast(ops.convert_to_tensor(self.query[:, t]), layer.compute_dtype)
            this = None if noise is None else noise[t]
            with no_random_draws(f"{self.name}.step_weights", layer):
                returned = layer.step_weights(query, keys, state, mask, training, this)
            if not isinstance(returned, (tuple, list)) or len(returned) != 2:
                self.fail(
                    "step_weights",
                    "shapes and dtypes",
                    f"must return a pair (weights, new_state). Received: {type(returned).__name__}",
                )
            weights, new_state = returned
            self.check_new_state(layer, state, new_state, entries)
            out.append((weights, state, new_state))
            if isinstance(new_state, dict) and sorted(new_state) == sorted(state):
                state = {k: ops.cast(new_state[k], layer.state_dtype) for k in state}
        return out

    def shapes_and_dtypes(self):
        layer = self.built
        with self.promise("step_weights", "shapes and dtypes"):
            steps = self._raw_steps(layer, steps=2)
        for weights, _, _ in steps:  # the state: checked by _raw_steps
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
        with self.promise("attend_step", "shapes and dtypes"):
            value = ops.convert_to_tensor(self.value)
            keys = layer.precompute_keys(ops.convert_to_tensor(self.key))
            state = layer.initial_attention_state(value, None)
            context, weights, state = layer.attend_step(self.query[:, 0], value, keys, state)
        for name, tensor, expected in (
            ("context", context, (BATCH, self.sizes[2])),
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
                key=self.key,
                query_mask=step_mask,
                value_mask=self.mask,
                return_attention_scores=True,
            )
            real = layer(
                self.query[:, [0, 1, 3]],
                self.value,
                key=self.key,
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
            context, weights, last = self.whole_call(layer)
        with self.promise("attend_step", "sequence call equals step-by-step decoding"):
            value = _zeroed(ops.convert_to_tensor(self.value), self.mask)
            keys = layer.precompute_keys(_zeroed(ops.convert_to_tensor(self.key), self.mask))
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

    def alone_and_padded(self):
        """Each source with keys decoded alone (its real keys only) and in the
        batch padded with `_EXTRA_PADDING` more masked keys: the same weights at
        its keys and the same context, step by step, as a decoder runs them."""
        layer, promise = self.built, "decodes the same alone and in a padded batch"
        pad = ((0, 0), (0, _EXTRA_PADDING), (0, 0))
        mask = np.pad(self.mask, ((0, 0), (0, _EXTRA_PADDING)))  # (B, T_v + extra)
        padded = self._decoded(layer, np.pad(self.key, pad), np.pad(self.value, pad), mask)
        for row, length in enumerate(self.mask.sum(axis=1)):
            if not length:
                continue  # a fully masked row has nothing to decode alone
            alone = self._decoded(
                layer,
                self.key[row : row + 1, :length],
                self.value[row : row + 1, :length],
                np.ones((1, length), bool),
                self.query[row : row + 1],
            )
            if alone["keys"] is not None and padded["keys"] is not None:
                keys = padded["keys"][row : row + 1, :length]
                if keys.shape != alone["keys"].shape or not np.allclose(
                    keys, alone["keys"], atol=_TOL
                ):
                    self.fail(
                        "precompute_keys",
                        promise,
                        f"the processed keys of row {row} ({length} real keys) alone differ "
                        f"from those of its real keys in a batch padded to "
                        f"T_v={mask.shape[1]}: a key must not depend on the padding",
                    )
            for what in ("context", "weights"):
                ours = padded[what][row : row + 1, :, : length if what == "weights" else None]
                gap = np.abs(ours - alone[what]).max(axis=(0, 2))  # (T_q,)
                if not np.all(gap <= _TOL):
                    step = int(np.argmax(gap > _TOL))
                    self.fail(
                        "step_weights",
                        promise,
                        f"the {what} of row {row} ({length} real keys) at step {step} differ "
                        f"by {float(gap[step]):.3g} between the row alone (T_v={length}) and "
                        f"the row in a batch padded to T_v={mask.shape[1]}: a sentence would "
                        "decode differently alone and in a padded batch (weights must not "
                        "depend on the padded length, e.g. divide by it or count positions "
                        "from its end)",
                    )

    def _decoded(self, layer, key, value, mask, query=None):
        """The context (B, T_q, d_v) and weights (B, T_q, T_v) of `attend_step`
        over the queries, as a decoder runs it, and the processed keys where
        they are (B, T_v, ...)."""
        promise = "decodes the same alone and in a padded batch"
        query = self.query if query is None else query
        with self.promise("attend_step", promise):
            value = _zeroed(ops.convert_to_tensor(value), mask)
            keys = layer.precompute_keys(_zeroed(ops.convert_to_tensor(key), mask))
            state = layer.initial_attention_state(value, ops.convert_to_tensor(mask))
            steps = []
            for t in range(query.shape[1]):
                context, weights, state = layer.attend_step(
                    query[:, t], value, keys, state, value_mask=mask
                )
                steps.append((context, weights))
        flat = keras.tree.flatten(keys)
        keys = np.asarray(ops.convert_to_numpy(flat[0])) if len(flat) == 1 else None
        if keys is not None and keys.shape[:2] != mask.shape:
            keys = None  # not one entry per key: compared through the weights
        return {
            "keys": keys,
            "context": np.stack([np.asarray(c, "float64") for c, _ in steps], axis=1),
            "weights": np.stack([np.asarray(w, "float64") for _, w in steps], axis=1),
        }

    def mixed_precision(self):
        with self.promise("step_weights", "mixed precision"):
            context, weights, state = self.whole_call(self.fresh("mixed_float16"))
        expected = self.built(self.query, self.value, key=self.key, value_mask=self.mask)
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
        d_q, d_k, _ = self.sizes  # a decoder's memory is its keys and values
        memory = keras.layers.Embedding(_VOCAB, d_k, mask_zero=True)(source)
        memory = keras.layers.GRU(d_k, return_sequences=True)(memory)
        embedded = keras.layers.Embedding(_VOCAB, d_q, mask_zero=True)(target_in)
        attention = self.copy()
        if kind == "bahdanau":
            decoder = BahdanauDecoder(d_q, attention)
        else:
            decoder = LuongDecoder(d_q, attention)
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

    def builtin_tflite(self):
        backend = keras.backend.backend()
        if self.export_tflite is False:
            return "skipped: tflite=False"
        if backend != "tensorflow":  # tflite=None: True raised at once
            return f"skipped: the export runs on the TensorFlow backend, not {backend}"
        missing = _missing_package(_TFLITE_PACKAGES)
        if missing:
            return missing
        # A malformed state fails the export with an error about the export:
        # the promise it breaks is named first.
        with self.promise("step_weights", "state shapes and dtypes"):
            self._raw_steps(self.built, steps=1)
        return self.tflite()

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
