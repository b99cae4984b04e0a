"""Float64 NumPy oracles of every formula, and the layer variants they cover.

The oracles are written from the formulas of the docs, one batch element at a time
with explicit loops over query and key positions, and share no code with
`keras_attention`. Weights are read from a built layer (`layer.query_kernel` ...).

Formulas (q a query, k_j a key, v_j a value; weight names as in the layers):

    Bahdanau            e_j = v_aᵀ tanh(W_a q + U_a k_j)
                        W_aᵀ = query_kernel (d_q, units),
                        U_aᵀ = key_kernel (d_k, units), v_a = score_vector (units,)
    Bahdanau normalize  e_j = (g v_a / ‖v_a‖)ᵀ tanh(W_a q + U_a k_j + b)
                        g = score_scale (), b = score_bias (units,)
    Luong dot           e_j = qᵀ k_j
    Luong general       e_j = qᵀ W k_j, W = kernel[h] (d_q/H, d_k/H) for head h
    Luong concat        e_j = v_aᵀ tanh(W_q q + W_k k_j)
    Luong use_scale     e_j ← scale · e_j
    weights             a_j = exp(e_j) / Σ_{unmasked i} exp(e_i); 0 where masked;
                        all 0 when every key is masked
    context             c = Σ_j a_j v_j; 0 (and a = 0) for a padded query
    heads               q, k, v split into H equal slices along features; head h
                        attends with slice h; contexts concatenated in head order
"""

import numpy as np

from keras_attention import BahdanauAttention
from keras_attention import LuongAttention

# Float32 layer against the float64 oracle: a few float32 roundings (~6e-8 each)
# through matmul, tanh, exp and a short sum.
RTOL = 1e-5
ATOL = 1e-6

D_Q = 4  # query features
D_K = 6  # key features (equal to D_Q for the "dot" score)
D_V = 8  # value features

# Every layer type and option whose formula the oracle knows, by test id.
VARIANTS = {
    "bahdanau": (BahdanauAttention, {"units": 5}),
    "bahdanau_normalize": (BahdanauAttention, {"units": 5, "normalize": True}),
    "luong_dot": (LuongAttention, {"score_mode": "dot"}),
    "luong_dot_scale": (LuongAttention, {"score_mode": "dot", "use_scale": True}),
    "luong_general": (LuongAttention, {"score_mode": "general"}),
    "luong_concat": (
        LuongAttention,
        {"score_mode": "concat", "units": 5, "use_scale": True},
    ),
    "luong_dot_heads": (LuongAttention, {"score_mode": "dot", "num_heads": 2}),
    "luong_general_heads": (
        LuongAttention,
        {"score_mode": "general", "num_heads": 2, "use_scale": True},
    ),
}
BAHDANAU_VARIANTS = [n for n, (cls, _) in VARIANTS.items() if cls is BahdanauAttention]
LUONG_VARIANTS = [n for n, (cls, _) in VARIANTS.items() if cls is LuongAttention]


def make_layer(variant, **overrides):
    """A fresh, unbuilt layer of `variant`, with `overrides` added to its kwargs."""
    cls, kwargs = VARIANTS[variant]
    return cls(**{**kwargs, **overrides})


def dims(variant):
    """(d_q, d_k, d_v) for `variant`: "dot" needs d_k == d_q, the others differ."""
    _, kwargs = VARIANTS[variant]
    d_k = D_Q if kwargs.get("score_mode") == "dot" else D_K
    return D_Q, d_k, D_V


def make_inputs(variant, rng, batch=2, t_q=3, t_v=5, single_step=False):
    """Random float32 `query`, `value`, `key` for `variant` (T_q != T_v by default)."""
    d_q, d_k, d_v = dims(variant)
    query_shape = (batch, d_q) if single_step else (batch, t_q, d_q)
    return {
        "query": rng.normal(size=query_shape).astype("float32"),
        "value": rng.normal(size=(batch, t_v, d_v)).astype("float32"),
        "key": rng.normal(size=(batch, t_v, d_k)).astype("float32"),
    }


def build(layer, inputs):
    """Builds `layer` on `inputs` and gives every weight random values.

    Random values, not the initializers, so that a bias initialized to 0 or a
    scale initialized to 1 cannot hide a missing term.
    """
    layer(**inputs)
    rng = np.random.default_rng(0)
    for weight in layer.weights:
        values = rng.uniform(0.3, 1.0, size=weight.shape) * rng.choice(
            [-1.0, 1.0], size=weight.shape
        )
        weight.assign(values.astype(weight.dtype))
    return layer


# ------------------------------------------------------------------- softmax


def masked_softmax(scores, mask=None):
    """Softmax over the last axis; masked positions 0; a fully masked row all 0.

    Infinite scores take the softmax's limits: a -inf score gets 0 (a row whose
    unmasked scores are all -inf is all 0, like a fully masked row); the +inf
    scores of a row share it equally. A NaN among a row's unmasked scores makes
    every unmasked weight of the row NaN.
    """
    scores = np.asarray(scores, np.float64)
    keep_all = np.ones(scores.shape, bool) if mask is None else mask
    keep_all = np.broadcast_to(np.asarray(keep_all, bool), scores.shape)
    out = np.zeros(scores.shape, np.float64)
    for index in np.ndindex(*scores.shape[:-1]):
        keep = keep_all[index] & (scores[index] != -np.inf)
        if not keep.any():
            continue
        row = scores[index][keep]
        if np.isnan(row).any():
            out[index + (keep,)] = np.nan
            continue
        if np.isposinf(row).any():
            top = np.isposinf(row)
            out[index + (keep,)] = top / top.sum()
            continue
        exp = np.exp(row - row.max())
        out[index + (keep,)] = exp / exp.sum()
    return out


# -------------------------------------------------- scores of one batch element
# q: (T_q, d_q), k: (T_v, d_k) → e: (T_q, T_v)


def bahdanau_scores(q, k, query_kernel, key_kernel, score_vector, g=None, b=None):
    v_a = np.asarray(score_vector, np.float64)
    if g is not None:
        v_a = g * v_a / np.sqrt(np.sum(v_a**2))
    bias = np.zeros_like(v_a) if b is None else np.asarray(b, np.float64)
    w_a = np.asarray(query_kernel, np.float64).T  # (units, d_q)
    u_a = np.asarray(key_kernel, np.float64).T  # (units, d_k)
    e = np.empty((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            e[i, j] = v_a @ np.tanh(w_a @ q[i] + u_a @ k[j] + bias)
    return e


def dot_scores(q, k):
    e = np.empty((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            e[i, j] = q[i] @ k[j]
    return e


def general_scores(q, k, w):
    w = np.asarray(w, np.float64)  # (d_q, d_k)
    e = np.empty((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            e[i, j] = q[i] @ w @ k[j]
    return e


def concat_scores(q, k, query_kernel, key_kernel, score_vector):
    # e_j = v_aᵀ tanh(W_a [q; k_j]) with W_a = [W_q, W_k]: the concatenation
    # written out, so it does not lean on the Bahdanau oracle.
    w_a = np.concatenate(
        [np.asarray(query_kernel, np.float64), np.asarray(key_kernel, np.float64)]
    ).T  # (units, d_q + d_k)
    v_a = np.asarray(score_vector, np.float64)
    e = np.empty((len(q), len(k)))
    for i in range(len(q)):
        for j in range(len(k)):
            e[i, j] = v_a @ np.tanh(w_a @ np.concatenate([q[i], k[j]]))
    return e


def attention(scores, value, query_mask=None, value_mask=None):
    """Weights and context of one batch element from its scores.

    scores (T_q, T_v), value (T_v, d_v), query_mask (T_q,), value_mask (T_v,)
    → context (T_q, d_v), weights (T_q, T_v).
    """
    mask = None if value_mask is None else np.asarray(value_mask, bool)[None, :]
    weights = masked_softmax(scores, mask)
    context = np.zeros((scores.shape[0], value.shape[-1]))
    for i in range(scores.shape[0]):
        for j in range(scores.shape[1]):
            context[i] += weights[i, j] * value[j]
    if query_mask is not None:
        padded = ~np.asarray(query_mask, bool)
        context[padded] = 0.0
        weights[padded] = 0.0
    return context, weights


# ------------------------------------------------------------- a whole layer


def head_scores(layer, q, k, head):
    """Scores of head `head` of `layer` for one batch element (slices given)."""
    config = layer.get_config()
    if isinstance(layer, BahdanauAttention):
        if config["normalize"]:
            g = float(layer.score_scale.numpy())
            b = layer.score_bias.numpy()
        else:
            g = b = None
        return bahdanau_scores(
            q,
            k,
            layer.query_kernel.numpy(),
            layer.key_kernel.numpy(),
            layer.score_vector.numpy(),
            g,
            b,
        )
    mode = config["score_mode"]
    if mode == "dot":
        e = dot_scores(q, k)
    elif mode == "general":
        e = general_scores(q, k, layer.kernel.numpy()[head])
    else:
        e = concat_scores(
            q,
            k,
            layer.query_kernel.numpy(),
            layer.key_kernel.numpy(),
            layer.score_vector.numpy(),
        )
    if config["use_scale"]:
        e = float(layer.scale.numpy()) * e
    return e


def layer_reference(layer, query, value, key=None, query_mask=None, value_mask=None):
    """The float64 oracle of `layer(...)`: (context, weights) in the layer's shapes.

    context (B, T_q, d_v) or (B, d_v); weights (B, T_q, T_v) or (B, T_v), with a
    heads axis after batch when num_heads > 1.
    """
    query = np.asarray(query, np.float64)
    value = np.asarray(value, np.float64)
    key = value if key is None else np.asarray(key, np.float64)
    single_step = query.ndim == 2
    if single_step:
        query = query[:, None, :]
        if query_mask is not None:
            query_mask = np.asarray(query_mask)[:, None]
    heads = getattr(layer, "num_heads", 1)
    batch, t_q, t_v = query.shape[0], query.shape[1], value.shape[1]
    sq, sk, sv = (x.shape[-1] // heads for x in (query, key, value))
    context = np.zeros((batch, t_q, value.shape[-1]))
    weights = np.zeros((batch, heads, t_q, t_v))
    for n in range(batch):
        for h in range(heads):
            e = head_scores(
                layer,
                query[n, :, h * sq : (h + 1) * sq],
                key[n, :, h * sk : (h + 1) * sk],
                h,
            )
            c, a = attention(
                e,
                value[n, :, h * sv : (h + 1) * sv],
                None if query_mask is None else query_mask[n],
                None if value_mask is None else value_mask[n],
            )
            context[n, :, h * sv : (h + 1) * sv] = c
            weights[n, h] = a
    if heads == 1:
        weights = weights[:, 0]
        if single_step:
            weights = weights[:, 0]
    elif single_step:
        weights = weights[:, :, 0]
    if single_step:
        context = context[:, 0]
    return context, weights


# ------------------------------------- attention that carries an alignment state
#
#   location-sensitive  f_t = conv1d(α_{t-1}), or conv1d(Σ_{s<t} α_s) when cumulative;
#                       "same" padding (zeros outside, (width - 1) // 2 taps on the
#                       left), no bias; location_kernel (width, 1, filters)
#                       e_j = vᵀ tanh(W q + V k_j + U f_j + b), α_t = masked softmax
#                       W = query_kernel, V = key_kernel, U = location_projection,
#                       v = score_vector, b = score_bias
#   monotonic energy    Bahdanau: as above (normalize: g, b) + r
#                       Luong: qᵀ (W_m k_j), scale: g · qᵀ (W_m k_j); + r
#                       W_mᵀ = key_kernel (d_k, d_q), g = score_scale, r = energy_bias
#   p_choose            sigmoid(energy + σ n), 0 at masked keys
#   recursive           q_j = (1 - p_{j-1}) q_{j-1} + α_{t-1,j}; α_{t,j} = p_j q_j
#   parallel            Addons: c = exclusive cumprod of clip(1 - p, tiny, 1);
#                       α_t = p · c · cumsum(α_{t-1} / clip(c, 1e-10, 1))
#   hard                one-hot at the first j ≥ (first j with α_{t-1,j} > 0) with
#                       p_j > 1/2; zeros if there is none (or α_{t-1} is all 0)
#   initial state       location: zeros; monotonic: one-hot at the first unmasked key
#   masks               previous weights are 0 at masked keys; a padded query gives
#                       zero context and weights and keeps the state


def conv1d_same(x, kernel):
    """x (T,), kernel (width, 1, filters) → (T, filters), zero padding, TF's "same"."""
    kernel = np.asarray(kernel, np.float64)
    width = kernel.shape[0]
    left = (width - 1) // 2
    out = np.zeros((len(x), kernel.shape[-1]))
    for j in range(len(x)):
        for i in range(width):
            source = j + i - left
            if 0 <= source < len(x):
                out[j] += x[source] * kernel[i, 0]
    return out


def location_sensitive_scores(q, k, previous, w):
    """q (d_q,), k (T_v, d_k), previous (T_v,) → e (T_v,); w: the layer's weights."""
    f = conv1d_same(previous, w["location_kernel"])  # (T_v, filters)
    e = np.empty(len(k))
    for j in range(len(k)):
        hidden = (
            w["query_kernel"].T @ q
            + w["key_kernel"].T @ k[j]
            + w["location_projection"].T @ f[j]
            + w["score_bias"]
        )
        e[j] = w["score_vector"] @ np.tanh(hidden)
    return e


def monotonic_recursive(p, previous):
    """The recurrence itself, one position at a time: p, previous (T_v,) → α (T_v,)."""
    alpha = np.zeros(len(p))
    q = 0.0
    for j in range(len(p)):
        q = previous[0] if j == 0 else (1.0 - p[j - 1]) * q + previous[j]
        alpha[j] = p[j] * q
    return alpha


def monotonic_parallel(p, previous):
    """Addons' closed form, with its clipping: p, previous (T_v,) → α (T_v,)."""
    tiny = np.finfo(np.float64).tiny
    c = np.ones(len(p))
    for j in range(1, len(p)):
        c[j] = c[j - 1] * np.clip(1.0 - p[j - 1], tiny, 1.0)
    return p * c * np.cumsum(previous / np.clip(c, 1e-10, 1.0))


def monotonic_hard(p, previous):
    """One-hot at the first position at or after the previous one with p > 1/2."""
    alpha = np.zeros(len(p))
    attended = np.flatnonzero(np.asarray(previous) > 0)
    if len(attended) == 0:
        return alpha
    for j in range(attended[0], len(p)):
        if p[j] > 0.5:
            alpha[j] = 1.0
            break
    return alpha


MONOTONIC_REFERENCES = {
    "recursive": monotonic_recursive,
    "parallel": monotonic_parallel,
    "hard": monotonic_hard,
}


def monotonic_energy(layer, q, k, w):
    """Energy (T_v,) of a Bahdanau/LuongMonotonicAttention for q (d_q,), k (T_v, d_k)."""
    config = layer.get_config()
    if type(layer).__name__ == "BahdanauMonotonicAttention":
        normalize = config["normalize"]
        e = bahdanau_scores(
            q[None],
            k,
            w["query_kernel"],
            w["key_kernel"],
            w["score_vector"],
            float(w["score_scale"]) if normalize else None,
            w["score_bias"] if normalize else None,
        )[0]
    else:
        w_m = w["key_kernel"].T  # (d_q, d_k)
        e = np.array([q @ (w_m @ k[j]) for j in range(len(k))])
        if config["scale"]:
            e = float(w["score_scale"]) * e
    return e + float(w["energy_bias"])


def initial_alignment_state(layer, batch, t_v, value_mask=None):
    """The oracle of `initial_attention_state`: a dict of (batch, T_v) arrays."""
    keep = np.ones((batch, t_v), bool) if value_mask is None else np.asarray(value_mask, bool)
    if type(layer).__name__ == "LocationSensitiveAttention":
        keys = ("alignment", "cumulative") if layer.get_config()["cumulative"] else ("alignment",)
        return {key: np.zeros((batch, t_v)) for key in keys}
    alignment = np.zeros((batch, t_v))
    for n in range(batch):
        unmasked = np.flatnonzero(keep[n])
        if len(unmasked):
            alignment[n, unmasked[0]] = 1.0
    return {"alignment": alignment}


def alignment_step(layer, q, k, v, state, keep, w, noise=None):
    """One step of one batch element: q (d_q,), k (T_v, d_k), v (T_v, d_v),
    state: dict of (T_v,), keep (T_v,) bool, noise (T_v,) standard normal or None
    → context (d_v,), weights (T_v,), new state."""
    state = {key: np.where(keep, s, 0.0) for key, s in state.items()}
    if type(layer).__name__ == "LocationSensitiveAttention":
        cumulative = layer.get_config()["cumulative"]
        previous = state["cumulative"] if cumulative else state["alignment"]
        e = location_sensitive_scores(q, k, previous, w)
        alpha = masked_softmax(e[None], keep[None])[0]
        new_state = {"alignment": alpha}
        if cumulative:
            new_state["cumulative"] = state["cumulative"] + alpha
    else:
        config = layer.get_config()
        e = monotonic_energy(layer, q, k, w)
        if noise is not None:
            e = e + config["sigmoid_noise"] * noise
        p = np.where(keep, 1.0 / (1.0 + np.exp(-e)), 0.0)
        alpha = MONOTONIC_REFERENCES[config["mode"]](p, state["alignment"])
        new_state = {"alignment": alpha}
    context = np.zeros(v.shape[-1])
    for j in range(len(v)):
        if keep[j]:
            context += alpha[j] * v[j]
    return context, alpha, new_state


def alignment_layer_reference(
    layer, query, value, key=None, query_mask=None, value_mask=None, state=None, noise=None
):
    """The float64 oracle of a stateful attention layer run step by step.

    query (B, T_q, d_q) or (B, d_q); state: dict of (B, T_v) arrays, or None for
    the initial state; noise: optional (T_q, B, T_v) standard normal draws.
    Returns (context, weights, state): (B, [T_q,] d_v), (B, [T_q,] T_v) and the
    state after the last query (a dict of (B, T_v)).
    """
    query = np.asarray(query, np.float64)
    value = np.asarray(value, np.float64)
    key = value if key is None else np.asarray(key, np.float64)
    single_step = query.ndim == 2
    if single_step:
        query = query[:, None, :]
        if query_mask is not None:
            query_mask = np.asarray(query_mask)[:, None]
    batch, t_q, t_v = query.shape[0], query.shape[1], value.shape[1]
    keep = np.ones((batch, t_v), bool) if value_mask is None else np.asarray(value_mask, bool)
    steps = np.ones((batch, t_q), bool) if query_mask is None else np.asarray(query_mask, bool)
    if state is None:
        state = initial_alignment_state(layer, batch, t_v, value_mask)
    state = {name: np.asarray(s, np.float64).copy() for name, s in state.items()}
    w = {
        weight.path.split("/")[-1]: np.asarray(weight.numpy(), np.float64)
        for weight in layer.weights
    }
    context = np.zeros((batch, t_q, value.shape[-1]))
    weights = np.zeros((batch, t_q, t_v))
    for n in range(batch):
        k = np.where(keep[n][:, None], key[n], 0.0)
        v = np.where(keep[n][:, None], value[n], 0.0)
        s = {name: x[n] for name, x in state.items()}
        for t in range(t_q):
            draw = None if noise is None else np.asarray(noise, np.float64)[t, n]
            c, a, new = alignment_step(layer, query[n, t], k, v, s, keep[n], w, draw)
            if steps[n, t]:
                context[n, t], weights[n, t], s = c, a, new
        for name in state:
            state[name][n] = np.where(keep[n], s[name], 0.0)
    if single_step:
        context, weights = context[:, 0], weights[:, 0]
    return context, weights, state


def gmm_reference(kernel, bias, queries, value, value_mask=None, query_mask=None):
    """Graves' (2013) GMM attention in float64: queries (B, T_q, d_q) one by one.

    Returns (contexts (B, T_q, d_v), weights (B, T_q, T_v), final κ (B, K)).
    A padded query (query_mask False) gives zero weights and keeps κ.
    """
    queries = np.asarray(queries, np.float64)
    value = np.asarray(value, np.float64)
    kernel = np.asarray(kernel, np.float64)
    bias = np.asarray(bias, np.float64)
    batch, t_q, _ = queries.shape
    t_v = value.shape[1]
    k = kernel.shape[1] // 3
    kappa = np.zeros((batch, k))
    keep_keys = np.ones((batch, t_v), bool) if value_mask is None else np.asarray(value_mask)
    keep_queries = np.ones((batch, t_q), bool) if query_mask is None else np.asarray(query_mask)
    value = np.where(keep_keys[:, :, None], value, 0.0)
    contexts = np.zeros((batch, t_q, value.shape[2]))
    weights = np.zeros((batch, t_q, t_v))
    u = np.arange(t_v, dtype=np.float64)
    for t in range(t_q):
        for b in range(batch):
            if not keep_queries[b, t]:
                continue
            params = queries[b, t] @ kernel + bias
            alpha, beta = np.exp(params[:k]), np.exp(params[k : 2 * k])
            kappa[b] = kappa[b] + np.exp(params[2 * k :])
            phi = np.zeros(t_v)
            for m in range(k):
                phi += alpha[m] * np.exp(-beta[m] * (kappa[b, m] - u) ** 2)
            phi = np.where(keep_keys[b], phi, 0.0)
            weights[b, t] = phi
            contexts[b, t] = phi @ value[b]
    return contexts, weights, kappa


def milk_weights(u, alpha, keep):
    """MILk's expected weights (Arivazhagan et al., 2019), one row, as the sum reads:
    u, alpha (T_v,), keep (T_v,) bool → β_j = Σ_{k≥j} α_k exp(u_j) / Σ_{l≤k} exp(u_l),
    the sums over unmasked positions; 0 at masked ones."""
    u = np.asarray(u, np.float64)
    beta = np.zeros(len(u))
    for j in range(len(u)):
        if not keep[j]:
            continue
        for k in range(j, len(u)):
            if keep[k]:
                divisor = sum(np.exp(u[m]) for m in range(k + 1) if keep[m])
                beta[j] += alpha[k] * np.exp(u[j]) / divisor
    return beta


def milk_hard_weights(u, alpha, keep):
    """MILk at inference, one row: the softmax of u over the unmasked positions up
    to the endpoint, argmax of the one-hot alpha, or the last unmasked position
    when alpha is all zeros; all zeros when every position is masked."""
    chosen = np.flatnonzero(np.asarray(alpha) > 0)
    unmasked = np.flatnonzero(keep)
    if len(unmasked) == 0:
        return np.zeros(len(u))
    end = chosen[0] if len(chosen) else unmasked[-1]
    prefix = np.asarray(keep, bool) & (np.arange(len(u)) <= end)
    return masked_softmax(np.asarray(u, np.float64)[None], prefix[None])[0]
