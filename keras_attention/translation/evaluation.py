"""Decoding a corpus and scoring it: sacreBLEU, chrF, tokenized BLEU, plots.

Scores:

- `bleu`: sacreBLEU on cased, detokenized text against the raw references
  (the number to report today, with its signature).
- `chrf`: sacreBLEU's chrF.
- `bleu_lc_tok`: BLEU on lowercased, Moses-tokenized hypotheses and references
  (`tokenize="none"`, like multi-bleu.perl), the scoring of the WMT17
  multimodal task papers, to compare with their published numbers.

A simultaneous run (a streaming model with a read/write policy) is decoded by
the same batched greedy search: with a unidirectional encoder and no bridge
its tokens are those of `SimultaneousGenerator`, which reads the source one
token at a time. The delays g(t), the source subwords read before each
written token (END included), follow from the policy: the wait-k schedule
(`schedule_delays`), or MILk's hard endpoints (`milk_delays`), read from the
monotonic head's alignment along the output, not from the attention rows:
the softmax over the prefix can underflow to an exact 0 at the endpoint
itself, and the row then shows an earlier one than the head chose. Both
then obey the streaming decoder's bound (`bounded_delays`): it writes at
most greedy's 2n + 10 tokens on n source tokens read, then reads.
"""

import math
import time

import numpy as np
import tensorflow as tf

from keras_attention.attention.wait_k_attention import wait_k_delays
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.generation.search_defaults import default_max_length
from keras_attention.scoring import plots
from keras_attention.scoring.latency import READ
from keras_attention.scoring.latency import WRITE
from keras_attention.scoring.latency import Latency
from keras_attention.scoring.latency import corpus_latency
from keras_attention.translation.postprocess import postprocess

# Source-length buckets (English words) of the BLEU-by-length plot.
LENGTH_BUCKETS = ((1, 8), (9, 11), (12, 14), (15, 18), (19, 24), (25, 80))


def _sacrebleu():
    try:
        import sacrebleu
    except ImportError as error:
        raise ImportError(
            "Scoring needs sacrebleu: `pip install keras-seq2seq-attention[tensorflow]`."
        ) from error
    return sacrebleu


def _moses_tokenizer(lang):
    try:
        from sacremoses import MosesTokenizer
    except ImportError as error:
        raise ImportError(
            "Tokenized BLEU needs sacremoses: `pip install keras-seq2seq-attention[tensorflow]`."
        ) from error
    return MosesTokenizer(lang=lang)


def decode_and_score(
    translator,
    split,
    method="greedy",
    batch_size=64,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    progress=True,
):
    """Decodes `split.en` with `decode_corpus` and scores it against `split.fr`.

    Returns:
        `(scores, decoded, hypotheses)`: the dict of `score` with `seconds`
        (the decoding wall time) added, the dict of `decode_corpus`, and the
        detokenized hypotheses.
    """
    start = time.time()
    decoded = decode_corpus(
        translator,
        split.en,
        method=method,
        batch_size=batch_size,
        beam_width=beam_width,
        length_penalty=length_penalty,
        progress=progress,
    )
    seconds = time.time() - start
    hypotheses = detokenize_output(decoded["text"])
    scores = score(hypotheses, split.fr)
    scores["seconds"] = seconds
    return scores, decoded, hypotheses


class NonFiniteOutputError(ValueError):
    """The model's scores are NaN or infinite; the message names the sentence.

    Attributes:
        score: the log-probability that is not finite.
        sentence: the index (0-based) of the sentence among those decoded.
    """

    def __init__(self, score, sentence, label=None):
        self.score, self.sentence = score, sentence
        super().__init__(
            f"The model's output is not finite ({score} log-probability) for "
            f"{label or f'sentence {sentence + 1}'}: its weights or activations hold NaN "
            "or infinite values, and every translation would be empty or wrong."
        )


def search_function(
    translator, method="greedy", beam_width=BEAM_WIDTH, length_penalty=LENGTH_PENALTY
):
    """The translator's greedy or beam search as one traced function of (B, S)
    ids, for `decode_corpus(search=...)`: traced once, whatever the shapes."""
    if method not in ("greedy", "beam"):
        raise ValueError(
            "Invalid value for argument `method`. Expected 'greedy' or 'beam'. "
            f"Received: method={method!r}"
        )
    signature = [tf.TensorSpec((None, None), tf.int32)]
    if method == "greedy":
        return tf.function(lambda ids: translator.greedy_graph(ids), input_signature=signature)
    settings = BeamSettings(beam_width, length_penalty)
    return tf.function(lambda ids: translator.beam_graph(ids, settings), input_signature=signature)


def _check_finite(scores, index):
    """Raises NonFiniteOutputError naming the first sentence (of `index`) with a
    log-probability in `scores` (B,) that is NaN or infinite."""
    if np.all(np.isfinite(scores)):
        return
    row = int(np.flatnonzero(~np.isfinite(scores))[0])
    raise NonFiniteOutputError(scores[row], int(index[row]))


def decode_corpus(
    translator,
    sentences,
    method="greedy",
    batch_size=64,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    progress=True,
    search=None,
):
    """Translates `sentences` in length-sorted batches, inside the graph.

    Args:
        translator: a `Translator`.
        sentences: list of source str.
        method: "greedy" or "beam".
        batch_size: sentences per batch.
        beam_width: beam search only.
        length_penalty: beam search only.
        progress: show a Keras progress bar.
        search: the function of `search_function` to decode with (its method
            and beam settings then replace those given here), to reuse one
            traced search across calls; None traces a new one.

    Returns:
        A dict: `text` (list of str, the tokenizer's lowercased, space-split
        output), `tokens` (list of int lists, END excluded), `attention` (list
        of (len(tokens), S) arrays), `source_tokens` (list of int lists),
        `written_attention` (list of (written, S) arrays: the weights of
        every written token, END included when written).

    Raises:
        NonFiniteOutputError: the log-probability of a translation is NaN or
            infinite (a model with NaN weights would otherwise give empty
            lines); the message names the sentence (1-based).
    """
    import keras

    if search is None:
        search = search_function(translator, method, beam_width, length_penalty)
    source = translator.source_tokenizer.tokenize(tf.constant(list(sentences)))
    lengths = source.row_lengths().numpy()
    order = np.argsort(lengths, kind="stable")  # similar lengths share a batch
    results = [None] * len(sentences)
    bar = keras.utils.Progbar(len(sentences), unit_name="sentence") if progress else None
    end_id = translator.target_tokenizer.end_id
    for begin in range(0, len(sentences), batch_size):
        index = order[begin : begin + batch_size]
        ids = tf.cast(tf.gather(source, index).to_tensor(), tf.int32)
        out = search(ids)
        _check_finite(out["log_probs"].numpy(), index)
        tokens = out["tokens"].numpy()
        attention = out["attention"].numpy()
        written = out["lengths"].numpy()  # END included
        text = translator.detokenize(tokens)
        for row, i in enumerate(index):
            seq = tokens[row].tolist()[: int(written[row])]  # the padding after it left out
            n = seq.index(end_id) if end_id in seq else len(seq)
            n_src = int(lengths[i])
            results[i] = (
                text[row],
                seq[:n],
                attention[row, :n, :n_src],
                source[i].numpy().tolist(),
                attention[row, : int(written[row]), :n_src],
            )
        if bar is not None:
            bar.add(len(index))
    return {
        "text": [r[0] for r in results],
        "tokens": [r[1] for r in results],
        "attention": [r[2] for r in results],
        "source_tokens": [r[3] for r in results],
        "written_attention": [r[4] for r in results],
    }


def schedule_delays(policy, source_length, written, k=None):
    """g(t) of a schedule: wait-k's (`wait_k_delays`), or for consecutive
    decoding the whole source before every write.

    Args:
        policy: "wait-k" or "consecutive".
        source_length: S, the source subwords, 1 or more.
        written: the tokens written, END included when written.
        k: the wait-k k the output was decoded with.
    """
    return wait_k_delays(k if policy == "wait-k" else None, source_length, written)


def milk_delays(translator, decoded, batch_size=64):
    """g(t) of each greedy output of a MILk run (hard mode), END included.

    The outputs' tokens are fed back one step at a time, as the search wrote
    them, and each step's hard alignment says its endpoint t_i: g = t_i + 1,
    the source tokens a streaming decoder reads before it writes; S (the
    whole source) when the head chose none. Never decreasing: a step after
    one that read the whole source reads on from there.

    Args:
        translator: a `Translator` of a MILk run (`load_run` sets hard mode).
        decoded: what `decode_corpus` returned for it.
        batch_size: the outputs stepped through at once.

    Returns:
        A list with a tuple of ints per output (empty for an empty source).
    """
    attention = translator.generator.decoder.attention
    (key,) = attention.attention_state_keys  # "alignment": α (B, S)
    start, end = translator.target_tokenizer.start_id, translator.target_tokenizer.end_id
    delays = []
    for begin in range(0, len(decoded["tokens"]), batch_size):
        rows = range(begin, min(begin + batch_size, len(decoded["tokens"])))
        sources = [decoded["source_tokens"][i] for i in rows]
        written = [len(decoded["written_attention"][i]) for i in rows]
        steps = max(written)
        inputs = np.zeros((len(rows), steps), np.int32)  # the token each step reads
        for j, i in enumerate(rows):
            output = (decoded["tokens"][i] + [end])[: written[j]]
            inputs[j, : written[j]] = [start] + output[:-1]
        ids = tf.ragged.constant(sources, dtype=tf.int32).to_tensor()  # (B, S)
        lengths = np.array([len(source) for source in sources])  # (B,)
        state = translator.encode(ids)
        endpoints = np.zeros((len(rows), steps), np.int64)
        for t in range(steps):
            _, _, state = translator.step(tf.constant(inputs[:, t]), state)
            alignment = np.asarray(state[f"attention_{key}"])  # (B, S)
            chosen = alignment.sum(-1) >= 0.5  # one-hot at t_i, or all zeros
            endpoints[:, t] = np.where(chosen, alignment.argmax(-1) + 1, lengths)
        for j, length in enumerate(lengths):
            reached = np.maximum.accumulate(np.minimum(endpoints[j, : written[j]], length))
            delays.append(tuple(int(g) for g in reached) if length else ())
    return delays


def bounded_delays(delays, source_length, max_output_length):
    """`delays` under the streaming decoder's bound on its output: before the
    source has ended, `SimultaneousGenerator` writes token t only once it has
    read n tokens with t - 1 < `default_max_length(n)` (greedy's bound for a
    source of n tokens, 2n + 10), and reads first otherwise. A wait-k
    schedule is never held back (k + t - 1 >= t); a MILk head that stays on
    an early endpoint for many writes is.

    Args:
        delays: g(t) of the policy, one per written token.
        source_length: S; no write waits for more than S tokens.
        max_output_length: the generator's cap on `default_max_length`.
    """
    bounded, read = [], 1
    for t, g in enumerate(delays, start=1):
        while read < source_length and t - 1 >= default_max_length(read, max_output_length):
            read += 1
        bounded.append(max(int(g), read))
    return tuple(bounded)


def simultaneous_latency(translator, decoded):
    """The delays and `Latency` of each output of `decode_corpus` (a
    simultaneous run's greedy outputs), and their corpus means.

    Args:
        translator: a `Translator` of a simultaneous run (its `policy`, and
            for wait-k the k it decoded with, `wait_k`).
        decoded: what `decode_corpus` returned.

    Returns:
        `(delays, latencies, means)`: a tuple of g(t) per sentence, a
        `Latency` per sentence (None for an empty source, which nothing was
        read for), and `corpus_latency` of the others: {"AP", "AL", "DAL"}.
    """
    policy = translator.policy
    if policy == "milk":
        delays = milk_delays(translator, decoded)
    else:
        delays = [
            schedule_delays(policy, len(source), len(weights), translator.wait_k) if source else ()
            for weights, source in zip(
                decoded["written_attention"], decoded["source_tokens"], strict=True
            )
        ]
    cap = translator.generator.max_output_length
    delays = [
        bounded_delays(g, len(source), cap)
        for g, source in zip(delays, decoded["source_tokens"], strict=True)
    ]
    latencies = [
        Latency.of(g, len(source)) if source else None
        for g, source in zip(delays, decoded["source_tokens"], strict=True)
    ]
    means = corpus_latency(latency for latency in latencies if latency is not None)
    return delays, latencies, means


def trace_text(source_pieces, target_pieces, delays):
    """One output's read/write trace as text: `R:piece` for each source
    subword read, `W:piece` for each target subword written, in their order.

    Args:
        source_pieces: the source subwords (str), in order.
        target_pieces: the written subwords (str), END included if written.
        delays: g(t) for each written subword.
    """
    actions, read = [], 0
    for piece, g in zip(target_pieces, delays, strict=True):
        while read < g:
            actions.append(f"{READ}:{source_pieces[read]}")
            read += 1
        actions.append(f"{WRITE}:{piece}")
    actions.extend(f"{READ}:{piece}" for piece in source_pieces[read:])
    return " ".join(actions)


def detokenize_output(text, lang="fr"):
    """The tokenizer's lowercased, space-split output → ordinary cased text."""
    return [postprocess(t, lang, capitalize=True) for t in text]


def moses_lowercase(sentences, lang="fr"):
    """Lowercased, Moses-tokenized text (the WMT17 multimodal scoring)."""
    tokenizer = _moses_tokenizer(lang)
    return [tokenizer.tokenize(s.lower(), return_str=True, escape=False) for s in sentences]


def score(hypotheses, references, lang="fr"):
    """BLEU (cased, detokenized), chrF and lowercased tokenized BLEU.

    Args:
        hypotheses: detokenized hypotheses (see `detokenize_output`).
        references: raw references, one per hypothesis.

    Returns:
        dict with `bleu`, `bleu_signature`, `chrf`, `chrf_signature`,
        `bleu_lc_tok`.
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"Expected one hypothesis per reference. Received {len(hypotheses)} "
            f"hypotheses and {len(references)} references."
        )
    sacrebleu = _sacrebleu()
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    tok = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    lc_tok = tok.corpus_score(
        moses_lowercase(hypotheses, lang), [moses_lowercase(references, lang)]
    )
    return {
        "bleu": round(bleu_score.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf": round(chrf_score.score, 2),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_lc_tok": round(lc_tok.score, 2),
    }


def bleu_by_length(hypotheses, references, sources, buckets=LENGTH_BUCKETS):
    """Lowercased tokenized BLEU per source-length bucket (English words).

    Returns a list of `(low, high, n_sentences, bleu)`; a bucket without
    sentences gets `nan`.
    """
    sacrebleu = _sacrebleu()
    hyp = moses_lowercase(hypotheses)
    ref = moses_lowercase(references)
    lengths = [len(s.split()) for s in sources]
    rows = []
    for low, high in buckets:
        idx = [i for i, n in enumerate(lengths) if low <= n <= high]
        if not idx:
            rows.append((low, high, 0, math.nan))
            continue
        metric = sacrebleu.metrics.BLEU(tokenize="none", force=True)
        value = metric.corpus_score([hyp[i] for i in idx], [[ref[i] for i in idx]])
        rows.append((low, high, len(idx), round(value.score, 2)))
    return rows


def total_variation(p, q, mask=None):
    """Mean total variation distance ½·Σ|p − q| between distributions.

    p, q: (..., V) probabilities; mask: optional (...) bool of the rows to
    average over.
    """
    p = np.asarray(p, np.float64)
    q = np.asarray(q, np.float64)
    tvd = 0.5 * np.abs(p - q).sum(-1)
    if mask is None:
        return float(tvd.mean())
    mask = np.asarray(mask, bool)
    return float(tvd[mask].mean()) if mask.any() else math.nan


def attention_statistics(attention):
    """How sharp a decoder's attention is, over a corpus of decoded sentences.

    Args:
        attention: list of (target steps, source tokens) weight arrays, as
            `decode_corpus` returns them; sentences of one source token or no
            target step are skipped (their entropy has no scale).

    Returns:
        A dict of means over target steps: `entropy`, the entropy of each
        step's weights divided by log(source tokens) (0: all weight on one
        token, 1: uniform); `max_weight`, the largest weight; `on_last_token`,
        the share of steps whose largest weight is on the last source token
        (usually the full stop); `steps`, how many steps were counted.
    """
    entropies, maxima, on_last = [], [], []
    for weights in attention:
        weights = np.asarray(weights, np.float64)  # (T, S)
        if weights.ndim != 2:
            raise ValueError(
                "Invalid value for argument `attention`. Expected arrays of shape "
                f"(target steps, source tokens). Received: shape={weights.shape}"
            )
        steps, source = weights.shape
        if steps == 0 or source < 2:
            continue
        logs = np.log(np.where(weights > 0, weights, 1.0))
        entropies.extend(-(weights * logs).sum(-1) / np.log(source))
        maxima.extend(weights.max(-1))
        on_last.extend(weights.argmax(-1) == source - 1)
    if not entropies:
        return {"entropy": math.nan, "max_weight": math.nan, "on_last_token": math.nan, "steps": 0}
    return {
        "entropy": round(float(np.mean(entropies)), 4),
        "max_weight": round(float(np.mean(maxima)), 4),
        "on_last_token": round(float(np.mean(on_last)), 4),
        "steps": len(entropies),
    }


def plot_bleu_by_length(curves, path, title="BLEU by source length"):
    """One line per model (`keras_attention.scoring.plots.plot_lines`): `curves` maps a
    name to `bleu_by_length` rows."""
    series = {
        name: ([f"{lo}-{hi}" for lo, hi, _, _ in rows], [b for _, _, _, b in rows])
        for name, rows in curves.items()
    }
    plots.plot_lines(
        str(path),
        series,
        "source length (English words)",
        "BLEU (lowercased, tokenized)",
        title=title,
    )
