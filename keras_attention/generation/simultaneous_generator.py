"""`SimultaneousGenerator`: greedy decoding while the source arrives.

A simultaneous decoder reads the source one token at a time and, after each
read, writes target tokens or reads on. The policy is the attention layer's
(`BaseAttention.needs_unread_source`): before each write the generator tries
the decoder's step over the tokens read so far and asks the layer whether the
step wanted one not read yet; then it discards the step and reads, else it
writes the step's most probable token. `WaitKAttention` answers by its
schedule, `MonotonicInfiniteLookbackAttention` by its learned choice, and any
other layer always wants more (it reads the whole source first: consecutive
decoding, which gives the tokens of `Seq2SeqGenerator.greedy`).

Streaming is exact only for a model that was trained as it decodes:

- the memory at a source position reads only the tokens up to it (a
  unidirectional encoder: a `GRU`, not a `Bidirectional`), so the memory of
  the tokens read so far is what the whole source would give there;
- the decoder's first state does not read the source (zeros, or a learned
  constant), since it is needed before the source has ended.

The generator checks both on a probe source when it is made, and refuses a
model that breaks either, naming which.

```python
stream = SimultaneousGenerator(Seq2SeqGenerator.from_model(model, 1, 2)).stream()
for token in source_tokens:            # as they arrive
    stream.read(token)
    while (token := stream.write()) is not None:
        show(token)                    # None: the policy reads first
stream.end_source()
while not stream.done:
    show(stream.write())
stream.actions, stream.delays          # "RRWRW...", g(t) for each written token
```
"""

import dataclasses
import numbers

import numpy as np
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.generation.search_defaults import check_max_length
from keras_attention.generation.search_defaults import default_max_length
from keras_attention.scoring.latency import READ
from keras_attention.scoring.latency import WRITE
from keras_attention.scoring.latency import Latency
from keras_attention.scoring.latency import delays_of_trace

# The entries of the decode state that the source gives; the others (the
# recurrent state, the attention state) are carried from write to write.
_MEMORY_KEYS = ("memory", "processed_keys", "memory_mask")


@dataclasses.dataclass(frozen=True)
class SimultaneousResult:
    """One source decoded while it arrived.

    Attributes:
        tokens: the written tokens, END included when written.
        actions: the trace, one "R" per read and one "W" per write.
        delays: g(t) for each written token: the source tokens read before it.
        log_prob: the sum of the written tokens' log-probabilities.
        attention: (len(tokens), source length) float32, each write's weights.
        latency: `keras_attention.scoring.latency.Latency` of the trace.
    """

    tokens: tuple
    actions: str
    delays: tuple
    log_prob: float
    attention: np.ndarray
    latency: Latency


class SimultaneousGenerator:
    """Greedy decoding of an attentional encoder-decoder while its source arrives.

    Args:
        generator: a `Seq2SeqGenerator` (e.g. of `from_model`) over token ids,
            whose decoder is a `BahdanauDecoder` or `LuongDecoder`; its
            attention layer is the read/write policy.
        max_source_length: the most source tokens a stream holds (the width of
            its memory). Defaults to the generator's. A stream refuses a read
            past it with a `ValueError`: end the source, or build the
            generator with a larger bound.

    Raises:
        ValueError: the decoder has no attention; the source is not token ids;
            the memory at a position reads later tokens (a bidirectional
            encoder) or the decoder's first state reads the source (a bridge
            from the encoder), found on a probe source.
    """

    def __init__(self, generator, max_source_length=None):
        decoder = getattr(generator, "decoder", None)
        if not isinstance(decoder, BaseDecoder):
            raise ValueError(
                "Invalid value for argument `generator`. Expected a Seq2SeqGenerator "
                "whose decoder is a BahdanauDecoder or LuongDecoder: a simultaneous "
                "decoder reads the source through attention. Received a decoder: "
                f"{decoder!r}"
            )
        spec = generator.source_spec
        if spec is not None and (len(spec[0]) != 1 or "int" not in spec[1]):
            raise ValueError(
                "Invalid value for argument `generator`. A simultaneous decoder reads "
                "token ids (batch, S) one at a time; the model's source input is "
                f"{spec[1]} of shape (batch, {', '.join(map(str, spec[0]))})."
            )
        if max_source_length is None:
            max_source_length = generator.max_source_length
        check_positive_int("max_source_length", max_source_length)
        self.generator = generator
        self.decoder = decoder
        self.attention = decoder.attention
        self.max_source_length = int(max_source_length)
        self._check_streamable()

    # ------------------------------------------------------------ checks

    def encode_tokens(self, tokens):
        """The encoder on source tokens read: `(memory (1, n, d), the decoder's
        first state, mask bool (1, n))` for a list of n token ids."""
        source = ops.convert_to_tensor(np.asarray([tokens], dtype="int32"))
        memory, initial_state, mask = self.generator.encoder(source)
        if mask is None:
            mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        return memory, initial_state, ops.cast(mask, "bool")

    def _check_streamable(self):
        """The two conditions of the module docstring, on a probe source."""
        size = self.generator.source_vocabulary_size or 3
        length = min(6, self.max_source_length)
        probe = [1 + (7 * i + 3) % max(size - 1, 1) for i in range(length)]
        changed = list(probe)
        changed[-1] = 1 + (changed[-1] % max(size - 1, 1))
        if changed == probe or length < 2:
            return  # a one-token vocabulary or bound: nothing to compare
        memory, initial, _ = self.encode_tokens(probe)
        memory_b, initial_b, _ = self.encode_tokens(changed)
        before = ops.convert_to_numpy(memory)[:, : length - 1]
        before_b = ops.convert_to_numpy(memory_b)[:, : length - 1]
        if not np.allclose(before, before_b, rtol=1e-5, atol=1e-6):
            raise ValueError(
                "The model's memory at a source position reads later source tokens "
                "(a bidirectional encoder?): changing the last token changed the "
                "memory before it. A simultaneous decoder needs a unidirectional "
                "encoder (e.g. a GRU, not a Bidirectional GRU), trained so."
            )
        for a, b in zip(_flat(initial), _flat(initial_b), strict=True):
            if not np.allclose(ops.convert_to_numpy(a), ops.convert_to_numpy(b)):
                raise ValueError(
                    "The decoder's first state reads the source (a bridge from the "
                    "encoder?): changing the last source token changed it. A "
                    "simultaneous decoder starts before the source has ended: give "
                    "the decoder no initial_state (zeros), trained so."
                )

    # ------------------------------------------------------------- decoding

    def stream(self, max_length=None):
        """A new stream, empty: read tokens into it and ask it to write.

        Args:
            max_length: the most tokens written, END included; None: the
                bound `Seq2SeqGenerator.greedy` uses, 2·S + 10 (at most the
                generator's `max_output_length`) for the S tokens read: before
                the source has ended, a stream that has written that many for
                the tokens read so far reads first.
        """
        return SimultaneousStream(self, max_length)

    def translate(self, source, max_length=None):
        """Decodes a whole source as if it arrived one token at a time.

        Args:
            source: a sequence of token ids (no padding 0).
            max_length: as in `stream`.

        Returns:
            A `SimultaneousResult`.
        """
        stream = self.stream(max_length)
        for token in _checked_source(source):
            stream.read(token)
            while not stream.done and stream.write() is not None:
                pass
        stream.end_source()
        while not stream.done:
            stream.write()
        return stream.result()


class SimultaneousStream:
    """One source read as it arrives: `read`, `end_source`, `write`.

    Made by `SimultaneousGenerator.stream`. Attributes: `tokens` (written,
    END included), `actions` ("R"/"W" trace), `delays`, `done` (END written
    or `max_length` reached), `source_ended`, `read_count`.
    """

    def __init__(self, simultaneous, max_length):
        self._sim = simultaneous
        generator = simultaneous.generator
        self._max_length = check_max_length(max_length, generator.max_output_length)
        self.source = []
        self.tokens = []
        self.actions = ""
        self.log_prob = 0.0
        self.attention = []
        self.source_ended = False
        self.done = False
        self._state = None  # the decode state, after the last write
        self._memory = None  # the memory entries of the tokens read, at full width

    @property
    def delays(self):
        """g(t) for each written token, read off the trace."""
        return list(delays_of_trace(self.actions))

    @property
    def read_count(self):
        return len(self.source)

    def read(self, token):
        """Reads the next source token (an int id, not 0: 0 is padding)."""
        if self.source_ended:
            raise ValueError("The source has ended: `read` after `end_source`.")
        _check_token(token, self._sim.generator.source_vocabulary_size)
        if len(self.source) >= self._sim.max_source_length:
            raise ValueError(
                f"The source already holds max_source_length={self._sim.max_source_length} "
                "tokens: call `end_source` (the output then finishes), or build the "
                "SimultaneousGenerator with a larger `max_source_length`."
            )
        self.source.append(int(token))
        self.actions += READ
        self._memory = None

    def end_source(self):
        """Says the source is whole: from now on every `write` writes (the
        output is done at once if it already holds greedy's bound for it)."""
        self.source_ended = True
        if self.source and len(self.tokens) >= self._bound(len(self.source)):
            self.done = True

    def write(self):
        """Writes the next target token, or answers None: read first.

        Returns:
            The token written (END included), or None when the policy needs
            a source token not read yet (nothing changes then).

        Raises:
            ValueError: the output is done (END written or `max_length`
                reached), or nothing was read and the source has ended.
        """
        if self.done:
            raise ValueError(
                "The output is done (END written or max_length reached): nothing "
                "more to write. Start a new stream."
            )
        if not self.source:
            if self.source_ended:
                raise ValueError("The source ended empty: there is nothing to translate.")
            return None
        generator = self._sim.generator
        if (
            not self.source_ended
            and self._max_length is None
            and len(self.tokens) >= self._bound(len(self.source))
        ):
            # As many tokens as greedy gives a whole source of this length at
            # most: read first (a policy that never reads stays bounded).
            return None
        state = self._decode_state()
        last = self.tokens[-1] if self.tokens else generator.start_id
        tokens = ops.convert_to_tensor(np.asarray([last], dtype="int32"))
        logits, weights, new_state = generator.step(tokens, state)
        if not self.source_ended:
            attention = self._sim.attention
            attention_state = {
                key: new_state[f"attention_{key}"] for key in attention.attention_state_keys
            }
            read_count = ops.convert_to_tensor(np.asarray([len(self.source)], dtype="int32"))
            wanted = attention.needs_unread_source(attention_state, read_count)
            if bool(ops.convert_to_numpy(wanted)[0]):
                return None
        log_probs = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))[0]
        token = int(np.argmax(log_probs))  # the lowest id among equals, as greedy's
        self.tokens.append(token)
        self.actions += WRITE
        self.log_prob += float(log_probs[token])
        row = ops.convert_to_numpy(ops.cast(weights, "float32"))[0]
        self.attention.append(row)
        self._state = new_state
        bounded = self.source_ended or self._max_length is not None
        self.done = token == generator.end_id or (
            bounded and len(self.tokens) >= self._bound(len(self.source))
        )
        return token

    def _bound(self, read):
        """The most tokens written with `read` source tokens: `max_length`, or
        greedy's bound for a source of that length (2·read + 10, at most the
        generator's `max_output_length`)."""
        if self._max_length is not None:
            return self._max_length
        return default_max_length(read, self._sim.generator.max_output_length)

    def _decode_state(self):
        """The decode state over the tokens read: memory entries from them,
        padded to the stream's width; the rest carried from the last write."""
        if self._memory is None:
            sim = self._sim
            memory, initial_state, mask = sim.encode_tokens(self.source)  # (1, n, d), (1, n)
            pad = sim.max_source_length - len(self.source)
            memory = ops.pad(memory, ((0, 0), (0, pad), (0, 0)))  # (1, W, d)
            mask = ops.pad(mask, ((0, 0), (0, pad)), constant_values=False)  # (1, W)
            fresh = sim.decoder.get_decode_state(memory, initial_state, mask)
            if self._state is None:
                self._state = fresh
            self._memory = {key: fresh[key] for key in _MEMORY_KEYS}
        state = dict(self._state)
        state.update(self._memory)
        return state

    def result(self):
        """The `SimultaneousResult` of what is written so far."""
        source_length = max(len(self.source), 1)
        attention = np.zeros((len(self.tokens), len(self.source)), "float32")
        for i, row in enumerate(self.attention):
            attention[i] = row[: len(self.source)]
        latency = None
        if self.tokens:
            latency = Latency.of(tuple(self.delays), source_length, len(self.tokens))
        return SimultaneousResult(
            tokens=tuple(self.tokens),
            actions=self.actions,
            delays=tuple(self.delays),
            log_prob=self.log_prob,
            attention=attention,
            latency=latency,
        )


def _flat(state):
    if state is None:
        return []
    if isinstance(state, (list, tuple)):
        return [s for part in state for s in _flat(part)]
    return [state]


def _check_token(token, vocabulary_size):
    if isinstance(token, np.integer):
        token = int(token)
    if isinstance(token, bool) or not isinstance(token, numbers.Integral):
        raise ValueError(
            f"Invalid source token: expected an int id. Received: {token!r} "
            f"({type(token).__name__})"
        )
    if token <= 0 or (vocabulary_size is not None and token >= vocabulary_size):
        bound = f"[1, {vocabulary_size})" if vocabulary_size is not None else "1 or more"
        raise ValueError(f"Invalid source token: {token}. Ids must be in {bound} (0 is padding).")


def _checked_source(source):
    return [int(t) if isinstance(t, np.integer) else t for t in list(source)]
