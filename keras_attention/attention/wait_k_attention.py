"""`WaitKAttention`: the wait-k read/write schedule (Ma et al. 2019) as an attention layer.

Wait-k reads k source tokens, then alternates one write and one read: target
step t (0-based) has read the first k + t source tokens, and attends to them
alone. Put in an attention layer, the schedule reaches every room of the
package without a change there: both decoders, greedy and beam search,
`Seq2SeqGenerator.from_model`, the export and `check_attention` run it as
any stateful attention; a simultaneous decoder asks `needs_unread_source`
whether a step wanted a token not read yet.

With a unidirectional encoder a step's output then depends on the tokens read
before it only, so decoding the sentence whole (teacher forcing, a search) is
decoding it as it arrives. Elbayad et al. (2020) train one model for every k
by drawing k at random during training: `training_k`.
"""

import math
import numbers

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.wrapped_attention import WrappedAttention

# The layer's own state entry, beside those of the wrapped layer: the target
# tokens written so far in each row, t before step t (batch,). A count, not a
# (batch, T_v) read mask, so that `needs_unread_source` knows k + t even when
# it exceeds the source positions the memory holds.
WRITTEN = "wait_k_written"
# The key of the per-row k in `step_noise`; the wrapped layer's draws come
# under "attention" (a tensor) or "attention.<key>" (a dict's entries), so
# that every leaf has (T, batch) as its first axes.
_K = "k"
_INNER = "attention"


@keras.saving.register_keras_serializable(package="keras_attention")
class WaitKAttention(WrappedAttention, BaseAttention):
    """The wait-k schedule around any attention layer of the package.

    Target step t (0-based) attends to the source positions j < k + t only
    (and those `value_mask` keeps): the wrapped layer computes its weights
    with the keys not read yet masked, so they are its own weights
    renormalised over the prefix read, exactly 0 after it. k = None is
    consecutive decoding (the whole source, the wrapped layer unchanged).

    The state is the wrapped layer's, under its own names, and one entry of
    this layer, "wait_k_written" (batch,): the target tokens written so far.
    A padded target step writes nothing: the count stays.

    Args:
        attention: the wrapped attention layer (or its serialized config):
            any layer of the package that is not itself a read/write policy
            (no `WaitKAttention`, no layer whose class defines
            `needs_unread_source`).
        k: the source tokens read before the first write, an int >= 1; None
            for infinity (consecutive decoding).
        training_k: None, or a pair `(low, high)`, 1 <= low <= high: in
            training each row of a batch draws its own k uniformly in
            [low, high] (Elbayad et al. 2020), once per batch, before the
            decoder's loop (`step_noise`). Outside training `k` applies.
        seed: seed of the draws of `training_k`.
        **kwargs: base layer arguments (`name`, ...); `dtype` defaults to the
            wrapped layer's.

    Call arguments:
        Those of `BaseAttention`: query (batch, T_q, d_q) or (batch, d_q),
        value (batch, T_v, d_v), optional key, query_mask, value_mask,
        return_attention_scores, training, attention_state and
        return_attention_state. A single (batch, d_q) query without a state
        is step 0.

    Returns:
        The context, and the weights (the wrapped layer's, with several heads
        their average) and the state when asked for.

    Example:

    >>> import numpy as np
    >>> from keras_attention import BahdanauAttention
    >>> layer = WaitKAttention(BahdanauAttention(units=4), k=2)
    >>> query = np.ones((1, 3, 3), "float32")  # (batch, T_q, d_q)
    >>> value = np.ones((1, 5, 2), "float32")  # (batch, T_v, d_v)
    >>> _, weights = layer(query, value, return_attention_scores=True)
    >>> (np.asarray(weights) > 0).sum(axis=-1).tolist()  # keys read: k + t
    [[2, 3, 4]]
    """

    def __init__(self, attention, k=None, training_k=None, seed=None, **kwargs):
        if isinstance(attention, dict):
            attention = keras.saving.deserialize_keras_object(attention)
        _check_attention(attention)
        check_k("k", k, allow_none=True)
        training_k = _checked_training_k(training_k)
        kwargs.setdefault("dtype", attention.dtype_policy)
        super().__init__(**kwargs)
        self.attention = attention
        self.k = None if k is None else int(k)
        self.training_k = training_k
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.attention_state_keys = tuple(attention.attention_state_keys) + (WRITTEN,)
        self._read_sizes()

    # ------------------------------------------------------------- the contract

    def prepare_memory(self, value, value_mask=None, key=None):
        """The wrapped layer's memory: the schedule masks nothing once per batch."""
        return self.attention.prepare_memory(value, value_mask, key)

    def initial_attention_state(self, memory, value_mask=None):
        """The wrapped layer's initial state and "wait_k_written", zeros (batch,)."""
        state = dict(self.attention.initial_attention_state(memory, value_mask))
        state[WRITTEN] = self._zeros_per_key(memory)[:, 0]  # (B,)
        return state

    def attention_state_shapes(self, value_shape):
        shapes = dict(self.attention.attention_state_shapes(value_shape))
        shapes[WRITTEN] = (tuple(value_shape)[0],)
        return shapes

    def step_noise(self, shape, training=None):
        """The draws of all steps, made before a loop: a dict, or None.

        "k": with `training_k` in training, each row's k (T, batch) int32, one
        draw per row repeated over the T steps; the wrapped layer's own draws
        under "attention" (or "attention.<key>" for each entry of a dict).
        None when nothing is drawn.
        """
        draws = {}
        inner = self.attention.step_noise(shape, training)
        if isinstance(inner, dict):
            draws.update({f"{_INNER}.{key}": value for key, value in inner.items()})
        elif inner is not None:
            draws[_INNER] = inner
        if training and self.training_k is not None:
            low, high = self.training_k
            k = keras.random.randint(
                (shape[1],), low, high + 1, seed=self.seed_generator, dtype="int32"
            )  # (B,)
            draws[_K] = ops.tile(k[None, :], (shape[0], 1))  # (T, B)
        return draws or None

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        """The wrapped layer's `step_weights` over the keys read: `(weights, new state)`.

        Called by `check_attention` as a decoder's loop would call it; a
        decoder's `attend_step` calls the wrapped layer's `attend_step` with
        the same mask.
        """
        k_rows, inner_noise = self._split_noise(noise, training)
        written = state[WRITTEN]  # (B,)
        t_v = ops.shape(processed_keys)[1]
        mask = self._schedule_mask(written, t_v, k_rows, value_mask)
        inner_state = {key: state[key] for key in self.attention.attention_state_keys}
        weights, new_inner = self.attention.step_weights(
            query, processed_keys, inner_state, mask, training, inner_noise
        )  # (B, T_v)
        new_state = dict(new_inner)
        new_state[WRITTEN] = ops.cast(written, self.state_dtype) + 1.0
        return weights, new_state

    def _step(self, query, value, processed_keys, attention_state, *options):
        """`attend_step`: the wrapped layer's `attend_step` with the keys not
        read yet masked, and the count of writes carried."""
        value_mask, query_mask, training, noise, memory_prepared = options
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        value = ops.cast(value, dtype)
        self._check_step_inputs(query, value, processed_keys, value_mask, query_mask)
        self._check_state(attention_state, tuple(value.shape))
        if noise is None and training:
            # A step called alone in training (a decoder's loop draws the
            # noise of every step before it) draws here, never in a step.
            noise = self.step_noise((1, ops.shape(value)[0], ops.shape(value)[1]), training)
            noise = None if noise is None else {key: x[0] for key, x in noise.items()}
        k_rows, inner_noise = self._split_noise(noise, training)
        written = ops.cast(attention_state[WRITTEN], self.state_dtype)  # (B,)
        mask = self._schedule_mask(written, ops.shape(value)[1], k_rows, value_mask)
        inner_state = {key: attention_state[key] for key in self.attention.attention_state_keys}
        context, weights, new_inner = self.attention.attend_step(
            query,
            value,
            processed_keys,
            inner_state,
            value_mask=mask,
            query_mask=query_mask,
            training=training,
            noise=inner_noise,
            memory_prepared=memory_prepared,
        )
        new_written = written + 1.0
        if query_mask is not None:
            # A padded target step writes nothing.
            new_written = ops.where(ops.cast(query_mask, "bool"), new_written, written)
        new_state = {key: ops.cast(x, self.state_dtype) for key, x in new_inner.items()}
        new_state[WRITTEN] = new_written
        return ops.cast(context, dtype), ops.cast(weights, dtype), new_state

    def _split_noise(self, noise, training):
        """This step's slice of `step_noise` → `(k per row (B,) or None, the
        wrapped layer's noise)`. Outside training `k` applies, whatever came."""
        if not noise:
            return None, None
        if _INNER in noise:
            inner = noise[_INNER]
        else:
            prefix = f"{_INNER}."
            inner = {key[len(prefix) :]: x for key, x in noise.items() if key.startswith(prefix)}
            inner = inner or None
        k_rows = noise.get(_K) if training else None
        return k_rows, inner

    def _schedule_mask(self, written, t_v, k_rows, value_mask):
        """The keys this step may read: j < k + t and `value_mask`, bool (B, T_v);
        `value_mask` itself for k = None (the wrapped layer unchanged)."""
        if k_rows is None and self.k is None:
            return value_mask
        k = self.k if k_rows is None else ops.cast(k_rows, self.state_dtype)  # () or (B,)
        limit = ops.cast(written, self.state_dtype) + k  # (B,)
        positions = ops.cast(ops.arange(t_v), self.state_dtype)  # (T_v,)
        read = positions[None, :] < limit[:, None]  # (B, T_v)
        if value_mask is None:
            return read
        return ops.logical_and(ops.cast(value_mask, "bool"), read)

    # ---------------------------------------------------------------- streaming

    def needs_unread_source(self, attention_state, read_count):
        """Whether the step that returned `attention_state` wanted more than
        `read_count` source tokens: k + t > read_count, bool (batch,); True in
        every row for k = None (consecutive decoding reads everything first).

        Args:
            attention_state: the state dict the tried step returned (its
                "wait_k_written" counts that step: t + 1).
            read_count: int32 (batch,), the source tokens read in each row.
        """
        if self.k is None:
            return ops.ones(ops.shape(read_count), dtype="bool")
        written = ops.cast(attention_state[WRITTEN], "int32")  # (B,), t + 1
        return written - 1 + self.k > ops.cast(read_count, "int32")

    # ------------------------------------------------------------------ config

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention": keras.saving.serialize_keras_object(self.attention),
                "k": self.k,
                "training_k": None if self.training_k is None else list(self.training_k),
                "seed": self.seed,
            }
        )
        return config


def wait_k_delays(k, source_length, target_length):
    """The delays of wait-k: g(t) = min(k + t - 1, |x|) for t = 1, ..., |y|.

    g(t) is the number of source tokens read when target token t is written
    (1-based, as Ma et al. 2019 write it); k = None (consecutive decoding)
    reads the whole source first: |x| everywhere. What
    `keras_attention.scoring.latency.Latency.of` takes.

    Args:
        k: an int >= 1, or None.
        source_length: |x|, an int >= 1.
        target_length: |y|, an int >= 0.

    Returns:
        A tuple of |y| ints.
    """
    check_k("k", k, allow_none=True)
    check_positive_int("source_length", source_length)
    if (
        isinstance(target_length, bool)
        or not isinstance(target_length, numbers.Integral)
        or target_length < 0
    ):
        raise ValueError(
            "Invalid value for argument `target_length`. Expected a non-negative "
            f"integer. Received: target_length={target_length!r}"
        )
    if k is None:
        return (int(source_length),) * int(target_length)
    return tuple(min(int(k) + t - 1, int(source_length)) for t in range(1, target_length + 1))


def check_k(name, value, allow_none=False):
    """A wait-k `k`: an int >= 1 (not a bool, a float, NaN or a string), or None."""
    if isinstance(value, float) and math.isnan(value):
        expected = "an integer >= 1 or None (infinity)" if allow_none else "an integer >= 1"
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected {expected}. Received: {name}={value!r}"
        )
    check_positive_int(name, value, allow_none=allow_none)


def _checked_training_k(training_k):
    """`training_k` as a tuple `(low, high)`, or None; a JSON list is accepted."""
    if training_k is None:
        return None
    if not isinstance(training_k, (tuple, list)) or len(training_k) != 2:
        raise ValueError(
            "Invalid value for argument `training_k`. Expected None or a pair "
            f"(low, high) of integers, 1 <= low <= high. Received: training_k={training_k!r}"
        )
    low, high = training_k
    check_k("training_k[0]", low)
    check_k("training_k[1]", high)
    if low > high:
        raise ValueError(
            "Invalid value for argument `training_k`. Expected a pair (low, high) "
            f"with low <= high. Received: training_k={training_k!r}"
        )
    return (int(low), int(high))


def _check_attention(attention):
    if not isinstance(attention, BaseAttention):
        raise ValueError(
            "Invalid value for argument `attention`. Expected an attention layer of "
            "keras_attention (a BaseAttention, e.g. BahdanauAttention) or its config. "
            f"Received: attention={attention!r}"
        )
    if isinstance(attention, WaitKAttention) or (
        type(attention).needs_unread_source is not BaseAttention.needs_unread_source
    ):
        raise ValueError(
            "Invalid value for argument `attention`. WaitKAttention is a read/write "
            f"policy and cannot wrap another: {type(attention).__name__} decides itself "
            "when to read (it defines `needs_unread_source`). Wrap the attention layer "
            f"under it instead. Received: attention={attention!r}"
        )
