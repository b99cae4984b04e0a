"""`SimultaneousGenerator`: greedy decoding while the source arrives.

The reference is the model itself run another way: the offline greedy search
of `Seq2SeqGenerator` on the whole source (consecutive decoding), and a loop
written here that takes, for each target step, the argmax of the model's own
step over exactly the source tokens the trace had read.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LuongAttention
from keras_attention import LuongDecoder
from keras_attention import MonotonicInfiniteLookbackAttention
from keras_attention import WaitKAttention
from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.wait_k_attention import wait_k_delays
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator
from keras_attention.scoring.latency import Latency

SOURCE_VOCAB = 13
TARGET_VOCAB = 11
START, END = 1, 2


def _model(decoder_kind="bahdanau", bidirectional=False, bridge=False, seed=0):
    """source ids → Embedding → GRU (unidirectional unless asked) → decoder."""
    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True)(source)
    rnn = keras.layers.GRU(8, return_sequences=True, return_state=True)
    if bidirectional:
        rnn = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))
        memory = rnn(embedded)
        final = memory[:, -1]
    else:
        memory, final = rnn(embedded)
    initial_state = keras.layers.Dense(8, activation="tanh")(final) if bridge else None
    init = keras.initializers.RandomNormal(stddev=1.0)
    target = keras.layers.Embedding(TARGET_VOCAB, 5, mask_zero=True, embeddings_initializer=init)(
        target_in
    )
    if decoder_kind == "bahdanau":
        decoder = BahdanauDecoder(8, attention=BahdanauAttention(8))
    else:
        decoder = LuongDecoder(8, attention=LuongAttention("general"))
    outputs, _, _ = decoder(target, memory, initial_state=initial_state)
    logits = keras.layers.Dense(TARGET_VOCAB, kernel_initializer=init)(outputs)
    return keras.Model([source, target_in], logits)


def _sources(count, seed=1):
    rng = np.random.default_rng(seed)
    return [list(rng.integers(1, SOURCE_VOCAB, size=rng.integers(1, 7))) for _ in range(count)]


class _EveryOtherStep(BahdanauAttention):
    """A toy read/write policy: a step wants 2 + (steps so far) tokens.

    Its state counts the steps in a per-key entry (every key holds the
    count), so the policy's answer comes from the state, as a real one's.
    """

    attention_state_keys = ("steps",)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, _ = super().step_weights(query, processed_keys, {}, value_mask, training, noise)
        return weights, {"steps": state["steps"] + 1.0}

    def needs_unread_source(self, attention_state, read_count):
        steps = ops.cast(attention_state["steps"][:, 0], "int32")  # after this step
        return ops.less(ops.cast(read_count, "int32"), steps + 1)

    # `ContentAttention`'s fast path skips `step_weights`; the base's does not.
    _step = BaseAttention._step
    _sequence = BaseAttention._sequence


def _policy_model(seed=0):
    return _streaming_model(_EveryOtherStep(8), seed=seed)


@pytest.mark.parametrize("decoder_kind", ["bahdanau", "luong"])
def test_a_layer_that_is_no_policy_decodes_as_offline_greedy(decoder_kind):
    generator = Seq2SeqGenerator.from_model(_model(decoder_kind), START, END)
    simultaneous = SimultaneousGenerator(generator, max_source_length=9)
    for source in _sources(6):
        offline = generator.greedy(np.asarray([source], "int32"))
        length = int(offline["lengths"][0])
        result = simultaneous.translate(source)
        assert result.tokens == tuple(np.asarray(offline["tokens"][0, :length]).tolist())
        # Consecutive: the whole source read before the first write.
        assert result.actions == "R" * len(source) + "W" * length
        assert result.delays == (len(source),) * length
        np.testing.assert_allclose(result.log_prob, float(offline["log_probs"][0]), atol=1e-4)
        np.testing.assert_allclose(
            result.attention, np.asarray(offline["attention"][0, :length]), atol=1e-5
        )


def _reference_policy_decode(generator, source, max_length):
    """Each write's token from the model's own step over exactly the tokens the
    toy policy has read (2 + t before write t), run from scratch here."""
    tokens, delays = [], []
    state = None
    last = START
    for t in range(max_length):
        read = min(2 + t, len(source))
        prefix = np.zeros((1, 9), "int32")
        prefix[0, :read] = source[:read]
        fresh, _ = generator.encode(prefix)
        if state is None:
            state = fresh
        state = dict(state, **{k: fresh[k] for k in ("memory", "processed_keys", "memory_mask")})
        logits, _, state = generator.step(np.asarray([last], "int32"), state)
        last = int(np.argmax(np.asarray(logits)[0]))
        tokens.append(last)
        delays.append(read)
        if last == END:
            break
    return tuple(tokens), tuple(delays)


def test_a_policy_writes_when_its_step_has_read_enough():
    generator = Seq2SeqGenerator.from_model(_policy_model(), START, END)
    simultaneous = SimultaneousGenerator(generator, max_source_length=9)
    for source in _sources(5, seed=3):
        result = simultaneous.translate(source, max_length=8)
        tokens, delays = _reference_policy_decode(generator, source, 8)
        assert result.tokens == tokens
        assert result.delays == delays
        assert result.latency == Latency.of(delays, len(source), len(tokens))
        # The trace: two reads first (or the whole source), then one write
        # per read while the source lasts.
        assert result.actions.index("W") == min(2, len(source))


def test_the_stream_answers_read_until_the_policy_has_enough():
    generator = Seq2SeqGenerator.from_model(_policy_model(), START, END)
    stream = SimultaneousGenerator(generator, max_source_length=9).stream(max_length=5)
    assert stream.write() is None  # nothing read yet
    stream.read(3)
    assert stream.write() is None  # the policy wants 2 tokens
    assert stream.actions == "R"
    stream.read(4)
    assert isinstance(stream.write(), int)
    assert stream.write() is None or stream.done  # the next write wants 3


def test_a_bidirectional_encoder_is_refused():
    generator = Seq2SeqGenerator.from_model(_model(bidirectional=True), START, END)
    with pytest.raises(ValueError, match="unidirectional encoder"):
        SimultaneousGenerator(generator, max_source_length=9)


def test_a_first_state_bridged_from_the_source_is_refused():
    generator = Seq2SeqGenerator.from_model(_model(bridge=True), START, END)
    with pytest.raises(ValueError, match="first state reads the source"):
        SimultaneousGenerator(generator, max_source_length=9)


@pytest.mark.parametrize(
    "token, message",
    [(0, "0 is padding"), (SOURCE_VOCAB, r"\[1, 13\)"), (-2, "Ids must be"), (1.5, "an int id")],
)
def test_a_bad_source_token_is_refused(token, message):
    generator = Seq2SeqGenerator.from_model(_model(), START, END)
    stream = SimultaneousGenerator(generator, max_source_length=9).stream()
    with pytest.raises(ValueError, match=message):
        stream.read(token)
    assert stream.read_count == 0


def test_a_stream_past_its_bound_is_refused_and_still_finishes():
    generator = Seq2SeqGenerator.from_model(_model(), START, END)
    stream = SimultaneousGenerator(generator, max_source_length=3).stream(max_length=4)
    for token in (3, 4, 5):
        stream.read(token)
    with pytest.raises(ValueError, match="max_source_length=3"):
        stream.read(6)
    stream.end_source()
    while not stream.done:
        stream.write()
    assert 1 <= len(stream.tokens) <= 4
    assert stream.actions == "RRR" + "W" * len(stream.tokens)


def test_writing_after_the_output_is_done_is_refused():
    generator = Seq2SeqGenerator.from_model(_model(), START, END)
    stream = SimultaneousGenerator(generator, max_source_length=9).stream(max_length=2)
    stream.read(5)
    stream.end_source()
    stream.write()
    stream.write()
    assert stream.done
    with pytest.raises(ValueError, match="output is done"):
        stream.write()
    with pytest.raises(ValueError, match="source has ended"):
        stream.read(5)


def test_an_empty_source_that_ended_is_refused():
    generator = Seq2SeqGenerator.from_model(_model(), START, END)
    stream = SimultaneousGenerator(generator, max_source_length=9).stream()
    stream.end_source()
    with pytest.raises(ValueError, match="ended empty"):
        stream.write()


def _policy_attention(policy, k):
    if policy == "wait-k":
        return WaitKAttention(BahdanauAttention(8), k=k)
    # Hard decisions, as at inference; with weights of this spread the
    # monotonic head stops at some positions and passes over others.
    spread = keras.initializers.RandomNormal(stddev=1.0)
    return MonotonicInfiniteLookbackAttention(8, mode="hard", kernel_initializer=spread)


def _streaming_model(attention, decoder_kind="bahdanau", seed=0):
    """source ids → Embedding → GRU (unidirectional) → decoder with `attention`."""
    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True)(source)
    memory = keras.layers.GRU(8, return_sequences=True)(embedded)
    init = keras.initializers.RandomNormal(stddev=1.0)
    target = keras.layers.Embedding(TARGET_VOCAB, 5, mask_zero=True, embeddings_initializer=init)(
        target_in
    )
    if decoder_kind == "bahdanau":
        decoder = BahdanauDecoder(8, attention=attention)
    else:
        decoder = LuongDecoder(8, attention=attention)
    outputs, _, _ = decoder(target, memory)
    logits = keras.layers.Dense(TARGET_VOCAB, kernel_initializer=init)(outputs)
    return keras.Model([source, target_in], logits)


def _offline(generator, source, max_length=None):
    offline = generator.greedy(np.asarray([source], "int32"), max_length=max_length)
    length = int(offline["lengths"][0])
    tokens = tuple(np.asarray(offline["tokens"][0, :length]).tolist())
    return tokens, np.asarray(offline["attention"][0, :length])


@pytest.mark.parametrize("decoder_kind", ["bahdanau", "luong"])
@pytest.mark.parametrize("k", [1, 3])
def test_wait_k_streaming_gives_the_offline_tokens_on_its_schedule(decoder_kind, k):
    generator = Seq2SeqGenerator.from_model(
        _streaming_model(_policy_attention("wait-k", k), decoder_kind), START, END
    )
    simultaneous = SimultaneousGenerator(generator, max_source_length=9)
    for source in _sources(6, seed=5):
        tokens, _ = _offline(generator, source)
        result = simultaneous.translate(source)
        # A unidirectional encoder: the whole sentence decoded at once is the
        # sentence decoded as it arrives.
        assert result.tokens == tokens
        assert result.delays == wait_k_delays(k, len(source), len(tokens))
        assert result.actions.count("R") == len(source)


@pytest.mark.parametrize("decoder_kind", ["bahdanau", "luong"])
def test_milk_streaming_gives_the_offline_tokens_and_reads_to_each_endpoint(decoder_kind):
    generator = Seq2SeqGenerator.from_model(
        _streaming_model(_policy_attention("milk", None), decoder_kind), START, END
    )
    simultaneous = SimultaneousGenerator(generator, max_source_length=9)
    early = late = 0
    for source in _sources(8, seed=7):
        tokens, attention = _offline(generator, source, max_length=8)
        result = simultaneous.translate(source, max_length=8)
        assert result.tokens == tokens
        # The hard endpoint is the last position with weight: the offline
        # attention row says how far each write had to read.
        reached = [int(np.nonzero(row > 0)[0].max()) + 1 for row in attention]
        expected = tuple(int(v) for v in np.maximum.accumulate(reached))
        assert result.delays == expected
        early += sum(d < len(source) for d in result.delays)
        late += sum(d > 1 for d in result.delays)
    # Some writes came before the source ended, some after more than one read.
    assert early > 0 and late > 0


def test_a_policy_that_never_reads_is_bounded_by_what_it_has_read():
    """A write-only policy (MILk choosing the first position at every step)
    that never writes END: greedy's bound for the tokens read, 2·n + 10, then
    it reads first; once the source ends, the bound of the whole source."""
    model = _streaming_model(_policy_attention("milk", None))
    generator = Seq2SeqGenerator.from_model(model, START, END)
    generator.decoder.attention.energy_bias.assign(50.0)  # always stop: never read
    readout = model.layers[-1]
    readout.bias.assign(np.eye(TARGET_VOCAB, dtype="float32")[5] * 100.0)  # always 5
    stream = SimultaneousGenerator(generator, max_source_length=9).stream()
    stream.read(5)
    while stream.write() is not None:
        pass
    assert stream.tokens == [5] * 12 and stream.actions == "R" + "W" * 12
    assert not stream.done
    stream.read(6)
    while stream.write() is not None:
        pass
    assert len(stream.tokens) == 14
    stream.end_source()  # 14 = 2·2 + 10: the whole source's bound, reached
    assert stream.done and stream.delays == [1] * 12 + [2, 2]
