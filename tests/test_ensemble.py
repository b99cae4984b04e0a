"""`EnsembleGenerator` against float64 references that know nothing of `step`.

Two members with different decoders and one target vocabulary (Bahdanau GRU,
Luong "general" LSTM with tied embeddings, from `test_seq2seq_generator`).
The reference calls each member's whole teacher-forced model on the growing
prefix `[START] + tokens`, averages the members' probabilities in float64 and
takes the argmax: the ensemble's greedy output. The members disagree on the
test batch, so the mean decides tokens that neither member alone would give.
"""

import functools

import keras
import numpy as np
import pytest
from test_seq2seq_generator import LENGTHS
from test_seq2seq_generator import MAX_LENGTH
from test_seq2seq_generator import MIN_MARGIN
from test_seq2seq_generator import PAD
from test_seq2seq_generator import SOURCE_VOCAB
from test_seq2seq_generator import START
from test_seq2seq_generator import TARGET_VOCAB
from test_seq2seq_generator import build_model
from test_seq2seq_generator import cut_at_end
from test_seq2seq_generator import make_sources
from test_seq2seq_generator import pick_end_id
from test_seq2seq_generator import teacher_forced

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention.generation import EnsembleGenerator

MEMBERS = (("bahdanau_gru", 0), ("luong_general_lstm_tied", 2))


def mean_log_probs(calls, source, target_in):
    """log of the members' mean probability, float64 (B, T, V), teacher-forced."""
    probs = []
    for call in calls:
        logits = call(source, target_in).astype(np.float64)  # (B, T, V)
        logits -= logits.max(-1, keepdims=True)
        probs.append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    return np.log(np.mean(probs, axis=0))


def reference_greedy(calls, source, steps=MAX_LENGTH):
    """The ensemble's greedy tokens (B, steps), END not yet chosen; None when a
    step is too close to call (or picks PAD)."""
    target_in = np.full((len(source), 1), START, np.int32)
    for _ in range(steps):
        last = mean_log_probs(calls, source, target_in)[:, -1]  # (B, V)
        top = np.sort(last, axis=-1)
        tokens = last.argmax(-1).astype(np.int32)
        if np.any(top[:, -1] - top[:, -2] <= MIN_MARGIN) or np.any(tokens == PAD):
            return None
        target_in = np.concatenate([target_in, tokens[:, None]], axis=1)
    return target_in[:, 1:]


def reference_log_prob(calls, source, tokens, lengths):
    """Σ_t log mean_i p_i(token_t) over each row's tokens, END included, float64."""
    target_in = np.concatenate([np.full((len(tokens), 1), START, np.int32), tokens[:, :-1]], 1)
    for row, n in enumerate(lengths):
        target_in[row, n:] = PAD  # the step after END is padding
    log_p = mean_log_probs(calls, source, target_in)
    picked = np.take_along_axis(log_p, tokens[..., None].astype(np.int64), -1)[..., 0]
    keep = np.arange(tokens.shape[1])[None, :] < np.asarray(lengths)[:, None]
    return (picked * keep).sum(-1)


class Case:
    """The two members, the padded batch, the reference and the generators."""

    def __init__(self):
        self.source = make_sources("ids")
        self.models = [build_model(name, seed) for name, seed in MEMBERS]
        self.calls = [teacher_forced(model, self.source) for model in self.models]
        self.reference = reference_greedy(self.calls, self.source)
        assert self.reference is not None, "the members' mean is too close to call"
        self.end_id = pick_end_id(self.reference)
        self.members = [Seq2SeqGenerator.from_model(m, START, self.end_id) for m in self.models]
        self.ensemble = EnsembleGenerator(self.members)


@functools.cache
def case():
    return Case()


def test_greedy_takes_the_best_mean_probability_at_every_step():
    c = case()
    expected, lengths = cut_at_end(c.reference, c.end_id)
    out = c.ensemble.greedy(c.source, max_length=MAX_LENGTH)
    np.testing.assert_array_equal(out["tokens"], expected)
    np.testing.assert_array_equal(out["lengths"], lengths)
    assert len(set(lengths.tolist())) > 1  # rows end at different steps
    reference = reference_log_prob(c.calls, c.source, out["tokens"], out["lengths"])
    np.testing.assert_allclose(out["log_probs"], reference, atol=1e-4, rtol=0)


def test_the_members_disagree_so_the_mean_decides():
    c = case()
    out = c.ensemble.greedy(c.source, max_length=MAX_LENGTH)
    alone = [m.greedy(c.source, max_length=MAX_LENGTH)["tokens"] for m in c.members]
    assert not np.array_equal(alone[0], alone[1])
    assert any(not np.array_equal(tokens, out["tokens"]) for tokens in alone)


def test_beam_log_probs_are_the_mean_probability_along_its_tokens():
    c = case()
    out = c.ensemble.beam(c.source, beam_width=3, length_penalty=0.6, max_length=MAX_LENGTH)
    reference = reference_log_prob(c.calls, c.source, out["tokens"], out["lengths"])
    np.testing.assert_allclose(out["log_probs"], reference, atol=1e-4, rtol=0)
    lp = ((5.0 + out["lengths"]) / 6.0) ** 0.6  # the GNMT score of the best hypothesis
    np.testing.assert_allclose(out["scores"], reference / lp, atol=1e-4, rtol=0)
    assert out["all_tokens"].shape == (len(LENGTHS), 3, MAX_LENGTH)
    assert np.all(np.diff(out["all_scores"], axis=1) <= 0)  # best first


def test_attention_is_the_mean_of_the_members_teacher_forced_weights():
    c = case()
    out = c.ensemble.greedy(c.source, max_length=MAX_LENGTH)
    tokens, lengths = out["tokens"], out["lengths"]
    target_in = np.concatenate([np.full((len(tokens), 1), START, np.int32), tokens[:, :-1]], 1)
    weights = []
    for member in c.members:
        memory, initial_state, mask = member.encoder(c.source)
        embedded = member.target_embedding(target_in)
        _, member_weights, _ = member.decoder(
            embedded, memory, initial_state=initial_state, memory_mask=mask
        )
        weights.append(keras.ops.convert_to_numpy(member_weights).astype(np.float64))
    mean = np.mean(weights, axis=0)  # (B, T, S)
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(out["attention"][row, :n], mean[row, :n], atol=1e-5)
        assert not out["attention"][row, n:].any()  # zeros after END


@pytest.mark.parametrize("index", [0, 1])
def test_an_ensemble_of_one_decodes_as_its_member(index):
    c = case()
    member = c.members[index]
    alone = EnsembleGenerator([member])
    for search, kwargs in (("greedy", {}), ("beam", {"beam_width": 3})):
        expected = getattr(member, search)(c.source, max_length=MAX_LENGTH, **kwargs)
        out = getattr(alone, search)(c.source, max_length=MAX_LENGTH, **kwargs)
        np.testing.assert_array_equal(out["tokens"], expected["tokens"])
        np.testing.assert_array_equal(out["lengths"], expected["lengths"])
        np.testing.assert_allclose(out["log_probs"], expected["log_probs"], atol=1e-5)
        np.testing.assert_allclose(out["attention"], expected["attention"], atol=1e-6)


def test_beam_of_width_one_without_penalty_equals_greedy():
    c = case()
    greedy = c.ensemble.greedy(c.source, max_length=MAX_LENGTH)
    beam = c.ensemble.beam(c.source, beam_width=1, length_penalty=0.0, max_length=MAX_LENGTH)
    np.testing.assert_array_equal(beam["tokens"], greedy["tokens"])
    np.testing.assert_array_equal(beam["lengths"], greedy["lengths"])
    np.testing.assert_allclose(beam["log_probs"], greedy["log_probs"], atol=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_padded_row_decodes_like_the_row_alone(search):
    c = case()
    batch = getattr(c.ensemble, search)(c.source)  # each row its own default bound
    for row, n in enumerate(LENGTHS):
        alone = getattr(c.ensemble, search)(c.source[row : row + 1, :n])
        length = int(alone["lengths"][0])
        assert int(batch["lengths"][row]) == length
        np.testing.assert_array_equal(batch["tokens"][row, :length], alone["tokens"][0, :length])


def test_a_source_of_padding_only_gives_an_empty_output():
    c = case()
    source = c.source.copy()
    source[1] = PAD  # no real position in row 1
    out = c.ensemble.greedy(source, max_length=MAX_LENGTH)
    expected = c.ensemble.greedy(c.source, max_length=MAX_LENGTH)
    assert out["lengths"][1] == 0 and not out["tokens"][1].any()
    for row in (0, 2):
        np.testing.assert_array_equal(out["tokens"][row], expected["tokens"][row])


# ------------------------------------------------------------------ refusals


def _other_vocabulary_generator():
    """A tiny model whose target vocabulary has one more token."""
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.GRU(6, return_sequences=True)(
        keras.layers.Embedding(SOURCE_VOCAB, 4, mask_zero=True)(source)
    )
    embedded = keras.layers.Embedding(TARGET_VOCAB + 1, 4, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(6, BahdanauAttention(5))(embedded, memory)
    logits = keras.layers.Dense(TARGET_VOCAB + 1)(outputs)
    model = keras.Model([source, target_in], logits)
    return Seq2SeqGenerator.from_model(model, START, case().end_id)


def _features_generator():
    model = build_model("bahdanau_lstm_features")
    return Seq2SeqGenerator.from_model(model, START, case().end_id)


@pytest.mark.parametrize(
    "members, message",
    [
        (lambda c: [], r"Expected a list of at least one Seq2SeqGenerator"),
        (lambda c: c.members[0], r"Expected a list of at least one Seq2SeqGenerator"),
        (lambda c: [c.members[0], "model"], r"Received: generators\[1\]='model'"),
        (
            lambda c: [
                c.members[0],
                c.members[1],
                Seq2SeqGenerator.from_model(c.models[1], START, 3 + (c.end_id == 3)),
            ],
            r"one end_id.*generators\[0\]\.end_id=\d+ and generators\[2\]\.end_id=\d+",
        ),
        (
            lambda c: [c.members[0], Seq2SeqGenerator.from_model(c.models[1], 4, c.end_id)],
            r"one start_id.*generators\[1\]\.start_id=4",
        ),
        (
            lambda c: [c.members[0], _other_vocabulary_generator()],
            rf"one target_vocabulary_size.*generators\[1\]\.target_vocabulary_size="
            rf"{TARGET_VOCAB + 1}",
        ),
        (
            lambda c: [c.members[0], _features_generator()],
            r"one source_spec.*generators\[1\]\.source_spec=",
        ),
    ],
    ids=["empty", "not_a_list", "not_a_generator", "end_id", "start_id", "vocabulary", "source"],
)
def test_mismatched_members_are_refused_naming_the_member(members, message):
    with pytest.raises(ValueError, match=r"Invalid value for argument `generators`\. .*" + message):
        EnsembleGenerator(members(case()))


def test_a_source_id_outside_a_members_vocabulary_is_refused():
    c = case()
    source = c.source.copy()
    source[1, 2] = SOURCE_VOCAB
    with pytest.raises(ValueError, match=rf"Invalid token id in `source`: {SOURCE_VOCAB} at"):
        c.ensemble.greedy(source)


# -------------------------------------------------------------------- export


def test_export_copies_reduced_precision_members_to_float32(dtype_policy):
    from keras_attention.backend.precision import float32_generator
    from keras_attention.backend.precision import reduced_precision_layers

    c = case()
    assert float32_generator(c.ensemble) is c.ensemble  # float32 already
    dtype_policy("mixed_float16")
    mixed = Seq2SeqGenerator.from_model(build_model(*MEMBERS[0]), START, c.end_id)
    dtype_policy("float32")
    assert reduced_precision_layers(mixed.model)
    copy = float32_generator(EnsembleGenerator([mixed, c.members[1]]))
    assert isinstance(copy, EnsembleGenerator) and copy.members[1] is c.members[1]
    assert not reduced_precision_layers(copy.members[0].model)
    assert copy.members[0].end_id == c.end_id


@pytest.mark.tensorflow
def test_saved_model_and_builtin_tflite_decode_as_the_ensemble(tmp_path):
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention.export import export_saved_model
    from keras_attention.export import export_tflite
    from keras_attention.export import non_builtin_operators

    c = case()
    export_saved_model(c.ensemble, tmp_path / "saved", beam_width=3)
    served = tf.saved_model.load(str(tmp_path / "saved")).signatures
    greedy = c.ensemble.greedy(c.source)
    beam = c.ensemble.beam(c.source, beam_width=3)
    out = served["serving_default"](source=tf.constant(c.source))
    np.testing.assert_array_equal(out["tokens"].numpy(), greedy["tokens"])
    out = served["beam"](source=tf.constant(c.source))
    np.testing.assert_array_equal(out["tokens"].numpy(), beam["tokens"])

    path = tmp_path / "ensemble.tflite"
    export_tflite(c.ensemble, path, beam_width=3)
    assert non_builtin_operators(path) == {}
    interpreter = Interpreter(model_path=str(path))
    for row, n in enumerate(LENGTHS):
        source = c.source[row : row + 1, :n]
        for name, search in (("generate", c.ensemble.greedy), ("generate_beam", None)):
            lite = interpreter.get_signature_runner(name)(source=source)
            expected = search(source) if search else c.ensemble.beam(source, beam_width=3)
            length = int(expected["lengths"][0])
            assert int(lite["lengths"][0]) == length
            tokens = expected["tokens"][0, :length]
            np.testing.assert_array_equal(lite["tokens"][0, :length], tokens)
