"""How long a simultaneous decoder waits: AP, AL and DAL from its read/write trace.

A simultaneous decoder reads the source one token at a time and, after each
read, writes target tokens or reads on. Its latency is measured by the
delays g(1), ..., g(|y|): g(t) is how many source tokens had been read when
target token t was written. The three measures of the field:

- Average Proportion (Cho and Esipova 2016), the mean share of the source
  read before each write: AP = sum_t g(t) / (|x| |y|), in (0, 1].
- Average Lagging (Ma et al. 2019, STACL), how many source tokens the
  decoder lags behind an ideal one that writes in step with the reading,
  counted up to the first write after the whole source was read:
  AL = 1/tau sum_{t <= tau} (g(t) - (t - 1) / r), with r = |y| / |x| and
  tau the first t with g(t) = |x| (|y| when the source is never all read).
  Wait-k on a source and a target of equal length has AL = k.
- Differentiable Average Lagging (Cherry and Foster 2019), AL without its
  cut at tau: a write after the source is all read still costs 1 / gamma
  more than the one before it, g'(1) = g(1),
  g'(t) = max(g(t), g'(t - 1) + 1 / gamma), gamma = |y| / |x|, and
  DAL = 1/|y| sum_t (g'(t) - (t - 1) / gamma).

```python
from keras_attention.scoring.latency import Latency

trace = "RRRWRWRWWW"  # wait-3 on 5 source tokens, 5 target tokens written
latency = Latency.of_trace(trace)
assert (latency.delays, latency.average_lagging) == ((3, 4, 5, 5, 5), 3.0)
```

`target_length` is the hypothesis' length (the tokens written, END
included when the decoder writes it as a token) unless given: SimulEval
and the papers' tables use the hypothesis; a reference length may be
passed instead.
"""

import dataclasses
import math
import numbers

READ = "R"
WRITE = "W"


def delays_of_trace(trace):
    """The delays g(t) of a read/write trace.

    Args:
        trace: a sequence of actions, each `"R"` (read one source token) or
            `"W"` (write one target token), as a string or a list.

    Returns:
        A tuple with one entry per write: the source tokens read before it.

    Raises:
        ValueError: an action is neither `"R"` nor `"W"` (its position is
            named).
    """
    delays, read = [], 0
    for position, action in enumerate(trace):
        if action == READ:
            read += 1
        elif action == WRITE:
            delays.append(read)
        else:
            raise ValueError(
                "Invalid value for argument `trace`. Expected actions 'R' (read) and "
                f"'W' (write). Received: {action!r} at position {position}"
            )
    return tuple(delays)


def _check(delays, source_length, target_length):
    if isinstance(source_length, bool) or not isinstance(source_length, int) or source_length < 1:
        raise ValueError(
            "Invalid value for argument `source_length`. Expected a positive integer. "
            f"Received: source_length={source_length!r}"
        )
    if not delays:
        raise ValueError(
            "Invalid value for argument `delays`. Expected at least one written target "
            "token: latency is not defined for an empty output. Received: delays=()"
        )
    if target_length is not None and (
        isinstance(target_length, bool) or not isinstance(target_length, int) or target_length < 1
    ):
        raise ValueError(
            "Invalid value for argument `target_length`. Expected a positive integer or "
            f"None. Received: target_length={target_length!r}"
        )
    previous = 0
    for t, g in enumerate(delays, start=1):
        if isinstance(g, bool) or not isinstance(g, int) or not previous <= g <= source_length:
            raise ValueError(
                "Invalid value for argument `delays`. Expected integers that never decrease, "
                f"from 0 to source_length={source_length}. Received: g({t})={g!r} after "
                f"g({t - 1})={previous}"
            )
        previous = g


@dataclasses.dataclass(frozen=True)
class Latency:
    """The delays of one output and its AP, AL and DAL.

    Attributes:
        delays: g(1), ..., g(|y|), source tokens read before each write.
        source_length: |x|, the source tokens of the sentence.
        target_length: |y| in the ratios r and gamma: the writes, or the
            length given.
    """

    delays: tuple
    source_length: int
    target_length: int

    @classmethod
    def of(cls, delays, source_length, target_length=None):
        """The latency of `delays` over a source of `source_length` tokens.

        Raises:
            ValueError: `delays` is empty, decreases, or leaves [0,
                source_length]; a length is not a positive integer.
        """
        # NumPy integers become ints; a bool stays a bool, and is refused.
        delays = tuple(
            int(g) if isinstance(g, numbers.Integral) and not isinstance(g, bool) else g
            for g in delays
        )
        _check(delays, source_length, target_length)
        return cls(delays, source_length, target_length or len(delays))

    @classmethod
    def of_trace(cls, trace, source_length=None, target_length=None):
        """The latency of a read/write trace; `source_length` defaults to its reads."""
        delays = delays_of_trace(trace)
        if source_length is None:
            source_length = sum(1 for action in trace if action == READ)
        return cls.of(delays, source_length, target_length)

    @property
    def average_proportion(self):
        return sum(self.delays) / (self.source_length * len(self.delays))

    @property
    def average_lagging(self):
        rate = self.target_length / self.source_length  # r = |y| / |x|
        tau = next(
            (t for t, g in enumerate(self.delays, start=1) if g == self.source_length),
            len(self.delays),
        )
        return math.fsum(g - (t - 1) / rate for t, g in enumerate(self.delays[:tau], 1)) / tau

    @property
    def differentiable_average_lagging(self):
        gamma = self.target_length / self.source_length
        total, lagged = 0.0, None
        for t, g in enumerate(self.delays, start=1):
            lagged = g if lagged is None else max(g, lagged + 1 / gamma)  # g'(t)
            total += lagged - (t - 1) / gamma
        return total / len(self.delays)

    def as_dict(self):
        """AP, AL and DAL under the names reports use."""
        return {
            "AP": self.average_proportion,
            "AL": self.average_lagging,
            "DAL": self.differentiable_average_lagging,
        }


def corpus_latency(latencies):
    """The mean AP, AL and DAL over sentences, as the papers report them.

    Raises:
        ValueError: `latencies` is empty.
    """
    latencies = list(latencies)
    if not latencies:
        raise ValueError(
            "Invalid value for argument `latencies`. Expected at least one sentence's "
            "`Latency`. Received: an empty list"
        )
    rows = [latency.as_dict() for latency in latencies]
    return {name: math.fsum(row[name] for row in rows) / len(rows) for name in rows[0]}
