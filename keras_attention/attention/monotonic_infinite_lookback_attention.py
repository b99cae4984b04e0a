"""`MonotonicInfiniteLookbackAttention`: MILk, a learned read/write policy."""

import keras
from keras import ops

from keras_attention.attention.additive_score import additive_score
from keras_attention.attention.bahdanau_monotonic_attention import BahdanauMonotonicAttention
from keras_attention.attention.masking import masked_softmax
from keras_attention.attention.masking import project
from keras_attention.attention.monotonic_alignment import exclusive_cumsum


@keras.saving.register_keras_serializable(package="keras_attention")
class MonotonicInfiniteLookbackAttention(BahdanauMonotonicAttention):
    """Monotonic Infinite Lookback attention, MILk (Arivazhagan et al., 2019).

    A learned read/write policy for simultaneous translation. A hard monotonic
    head (Raffel et al., 2017, as `BahdanauMonotonicAttention`) chooses how
    far into the source step i reads, the endpoint t_i; a softmax then
    attends over every source position up to it (infinite lookback). With s
    the query and h_j the keys,

        energy_j = v_aᵀ tanh(W_a s + U_a h_j) + r     the monotonic energy
        p_j      = sigmoid(energy_j + σ·n_j)          (noise in training only)
        α_i      = the expected monotonic alignment from p and α_{i-1}
        u_j      = v_cᵀ tanh(W_c s + U_c h_j)         the softmax ("chunk") energy
        β_{i,j}  = Σ_{k≥j} α_{i,k} · exp(u_j) / Σ_{l≤k} exp(u_l)

    β (the paper's eq. for the expected attention in training) are the
    weights returned; they sum to Σ_k α_{i,k} ≤ 1 (the mass that runs past the
    last key is lost, as with monotonic attention). They are computed as α
    times the softmaxes of u over each prefix (`infinite_lookback_weights`):
    stable for any range of energies, masked keys excluded exactly (weight 0,
    and in no divisor).

    In "hard" mode (inference, streaming) α_i is one-hot at the endpoint t_i,
    the monotonic head's first choice at or after t_{i-1}, and the weights are
    the softmax of u over the unmasked positions ≤ t_i. When no position is
    chosen (α_i all zeros) the endpoint is the last unmasked position, as the
    paper does at the end of the source: the weights are then the softmax
    over every unmasked key, while the state α_i stays all zeros as the
    monotonic head left it. Only builtin TFLite operators (cumulative sums,
    no cumulative product).

    Why MILk and not MoChA (Chiu and Raffel, 2018): MoChA's softmax is cut to
    a fixed chunk before the endpoint, MILk's reaches back to the start of the
    source; the paper reports better quality at equal latency, and its hard
    decision is the monotonic head this package already has.

    Not implemented: the paper's latency loss (a Differentiable Average
    Lagging term added to the training loss).

    As a read/write policy (`needs_unread_source`): a simultaneous decoder
    tries a step with the memory masked after the tokens read; a hard
    alignment with no endpoint among them means the step wants to read on.

    Args:
        units: size of the hidden layer inside each tanh.
        sigmoid_noise: standard deviation of the noise added to the monotonic
            energies before the sigmoid, in training only. Defaults to 0.
        score_bias_init: initial value of the scalar bias r. Defaults to 0.
        mode: "parallel", "recursive" or "hard" (see
            `BahdanauMonotonicAttention`). Defaults to "parallel".
        normalize: weight-normalized monotonic energy, as in
            `BahdanauMonotonicAttention`; the softmax energy u stays plain.
            Defaults to False.
        **kwargs: `seed`, the seed of the noise; `kernel_initializer`, the
            initializer of both energies' weights; base layer arguments
            (`name`, `dtype`, ...).

    Call arguments, returns and step-by-step use: those of
    `BaseAlignmentAttention`. The state is `{"alignment": α (batch, T_v)}`,
    not the weights β.

    Example:

    >>> import numpy as np
    >>> layer = MonotonicInfiniteLookbackAttention(units=8, mode="hard")
    >>> context, weights = layer(
    ...     np.zeros((2, 3, 4), "float32"),  # (batch, T_q, d_q)
    ...     np.ones((2, 5, 6), "float32"),  # (batch, T_v, d_v)
    ...     return_attention_scores=True,
    ... )
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 3, 5))
    >>> np.asarray(weights).sum(-1).round(5).tolist()  # a softmax over a prefix
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def build_energy(self, query_dim, key_dim):
        super().build_energy(query_dim, key_dim)  # the monotonic energy's weights
        self.chunk_query_kernel = self.add_weight(
            name="chunk_query_kernel",  # W_cᵀ
            shape=(query_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self.chunk_key_kernel = self.add_weight(
            name="chunk_key_kernel",  # U_cᵀ
            shape=(key_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self.chunk_score_vector = self.add_weight(
            name="chunk_score_vector",  # v_c
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )

    def precompute_keys(self, key):
        """[U_a h_j, U_c h_j] for every key: (batch, T_v, d_k) → (batch, T_v, 2·units)."""
        dtype = self.compute_dtype
        kernel = ops.concatenate([self.key_kernel, self.chunk_key_kernel], axis=1)
        return project(ops.cast(key, dtype), ops.cast(kernel, dtype))  # (B, T_v, 2·units)

    def _energy(self, query, processed_keys):
        keys = processed_keys[:, :, : self.units]  # (B, T_v, units): U_a h_j
        return super()._energy(query, keys)  # (B, T_v)

    def _chunk_energy(self, query, processed_keys):
        """u, (batch, T_v), in the compute dtype."""
        dtype = self.compute_dtype
        keys = processed_keys[:, :, self.units :]  # (B, T_v, units)
        projected = project(query, ops.cast(self.chunk_query_kernel, dtype))  # (B, units)
        return additive_score(projected, keys, ops.cast(self.chunk_score_vector, dtype))

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        alignment, new_state = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )  # α (B, T_v)
        dtype = self.state_dtype
        energy = ops.cast(self._chunk_energy(query, processed_keys), dtype)  # (B, T_v)
        keep = ops.ones_like(energy, dtype="bool") if value_mask is None else value_mask
        keep = ops.cast(keep, "bool")
        if self.mode == "hard":
            # Positions ≤ t_i: nothing chosen before them; every position
            # when α is all zeros (the whole source).
            prefix = ops.less(exclusive_cumsum(alignment), 0.5)  # (B, T_v)
            weights = masked_softmax(energy, ops.logical_and(keep, prefix))
            return weights, new_state
        return infinite_lookback_weights(energy, alignment, keep), new_state

    def needs_unread_source(self, attention_state, read_count):
        """Whether the step wanted a source token not read yet: its alignment found no endpoint.

        The protocol is `BaseAttention.needs_unread_source`'s. With the memory
        masked after `read_count` tokens, the monotonic head of a tried step
        either chose an endpoint among the tokens read (a one-hot alignment:
        write) or ran past them (all zeros: read another). A row whose
        alignment sums to less than 1/2 is answered True: in "hard" mode,
        exactly the rows with no endpoint; in a soft mode, those where the
        step more likely than not ran past the tokens read.

        Args:
            attention_state: `{"alignment": (batch, T_v)}` as the tried step
                returned it.
            read_count: int32 (batch,), the source tokens read in each row
                (the mask already holds it: not read here).

        Returns:
            bool (batch,): True where the step needs another source token.
        """
        alignment = ops.cast(attention_state["alignment"], self.state_dtype)  # (B, T_v)
        return ops.less(ops.sum(alignment, axis=-1), 0.5)  # (B,)


def infinite_lookback_weights(energy, alignment, keep):
    """β_j = Σ_{k≥j} α_k exp(u_j) / Σ_{l≤k} exp(u_l), the expected MILk weights.

    Row k of a (T_v, T_v) matrix is the softmax of u over the unmasked
    positions ≤ k (`masked_softmax`: its own maximum subtracted, masked
    positions exactly 0); β is α times that matrix. Not the single pass of
    cumulative sums: with one shift for the whole row, the prefix sums before
    the largest energy underflow once the energies of a row span more than
    about 87 in float32 (23 with the divisor clipped to 1e-10), and the mass
    of α there is lost. The matrix costs T_v² per row and step, less than the
    additive scores' T_v · units while the source is shorter than `units`.

    Args:
        energy: u, (batch, T_v), float.
        alignment: α, (batch, T_v), in the dtype of `energy`, zero where
            `keep` is False.
        keep: bool (batch, T_v), False at masked keys.

    Returns:
        β, (batch, T_v): zero at masked keys, all zeros in a fully masked row;
        each row sums to that of α.
    """
    positions = ops.arange(ops.shape(energy)[1])  # (T_v,)
    # prefix[k, j]: j ≤ k, the positions that endpoint k looks back over.
    prefix = ops.less_equal(ops.expand_dims(positions, 0), ops.expand_dims(positions, 1))
    allowed = ops.logical_and(ops.expand_dims(prefix, 0), ops.expand_dims(keep, 1))  # (B, k, j)
    # No endpoint at a masked key either: its row is zeros, so α there is
    # never read (nor differentiated).
    allowed = ops.logical_and(allowed, ops.expand_dims(keep, 2))
    # Broadcast by an addition (TFLite's ADD), so the scores have the mask's shape.
    scores = ops.expand_dims(energy, 1) + ops.zeros_like(ops.expand_dims(energy, 2))  # (B, k, j)
    lookback = masked_softmax(scores, allowed)  # (B, T_v, T_v), each row k sums to 1 or 0
    return ops.einsum("bk,bkj->bj", alignment, lookback)  # (B, T_v)
