"""`ErrorRates`: how often predicted sequences miss their references, and by
how many tokens, overall and by length.

The measures of grapheme-to-phoneme (word and phone error rates, WER and
PER), speech recognition (WER over words) and OCR (character error rate):
each prediction is scored against one or more references (a word with two
pronunciations has two). The sequence is right when it equals one of them;
its token errors are its edit distance (`keras_attention.scoring.edit_distance`) to
the closest one, and that reference's length is what the token error rate
divides by.

```python
from keras_attention.scoring.error_rates import ErrorRates

references = {"READ": [("R", "IY", "D"), ("R", "EH", "D")], "CAT": [("K", "AE", "T")]}
predictions = {"READ": ["R", "EH", "D"], "CAT": ["K", "AH", "T"]}
rates = ErrorRates.of(predictions, references, names=("word", "phone", "wer", "per"))
assert (rates.sequence_error_rate, rates.token_errors, rates.reference_tokens) == (50.0, 1, 6)
print(rates.summary("greedy"))  # greedy: WER 50.00 % (1 of 2 words), PER 16.67 % (1 of 6 phones)
```
"""

import dataclasses
import time

from keras_attention.scoring.edit_distance import edit_distance

# What `ErrorRates` calls its sequences, their tokens and the two rates by
# default; G2P says ("word", "phone", "wer", "per").
NAMES = ("sequence", "token", "ser", "ter")


def sequence_errors(predicted, references):
    """(correct, errors, reference length) of one prediction.

    correct: 1 if the prediction equals one of the references, else 0.
    errors: its edit distance to the closest reference, whose length is
    returned (the first listed among equally close ones).

    Args:
        predicted: a sequence of tokens.
        references: a non-empty list of sequences of tokens.

    Raises:
        ValueError: `references` is empty.
    """
    if not references:
        raise ValueError(
            "Invalid value for argument `references`. Expected at least one reference "
            f"sequence. Received: references={references!r}"
        )
    predicted = tuple(predicted)
    distances = [(edit_distance(predicted, tuple(ref)), len(ref)) for ref in references]
    errors, length = min(distances, key=lambda d: d[0])
    return int(any(predicted == tuple(ref) for ref in references)), errors, length


@dataclasses.dataclass(frozen=True)
class ErrorRates:
    """The counts behind a sequence error rate and a token error rate.

    Args:
        sequences: how many sequences were scored.
        wrong_sequences: how many of them equal none of their references.
        token_errors: the sum of their edit distances to the closest reference.
        reference_tokens: the sum of those references' lengths.
        names: (sequence, token, sequence rate, token rate), the words that
            `as_dict`, `summary` and `error_rate_table` use, e.g.
            ("word", "phone", "wer", "per") for G2P.
    """

    sequences: int
    wrong_sequences: int
    token_errors: int
    reference_tokens: int
    names: tuple = NAMES

    @classmethod
    def of(cls, predictions, references, names=NAMES):
        """Scores every sequence of `references` (in its order).

        Args:
            predictions: {key: predicted tokens}, holding every key of
                `references`.
            references: {key: [reference tokens, ...]}, at least one key and
                at least one reference each.
            names: see the class.

        Raises:
            ValueError: `references` is empty, a key has no reference, or a
                key of `references` has no prediction (each named).
        """
        if not references:
            raise ValueError("No references to score: `references` is empty.")
        missing = [key for key in references if key not in predictions]
        if missing:
            raise ValueError(
                f"{len(missing)} of the {len(references)} references have no prediction, "
                f"first {missing[0]!r}."
            )
        correct = errors = length = 0
        for key, refs in references.items():
            if not refs:
                raise ValueError(f"{key!r} has no reference sequence.")
            c, e, n = sequence_errors(predictions[key], refs)
            correct += c
            errors += e
            length += n
        return cls(len(references), len(references) - correct, errors, length, tuple(names))

    @property
    def sequence_error_rate(self):
        """The share of wrong sequences, in percent."""
        return 100.0 * self.wrong_sequences / self.sequences

    @property
    def token_error_rate(self):
        """The token errors over the reference tokens, in percent; NaN when the
        references hold no token."""
        if not self.reference_tokens:
            return float("nan")
        return 100.0 * self.token_errors / self.reference_tokens

    def as_dict(self):
        """The rates and counts under the names, e.g. for ("word", "phone",
        "wer", "per"): `wer`, `per`, `words`, `wrong_words`, `phone_errors`,
        `reference_phones`."""
        sequence, token, sequence_rate, token_rate = self.names
        return {
            sequence_rate: self.sequence_error_rate,
            token_rate: self.token_error_rate,
            f"{sequence}s": self.sequences,
            f"wrong_{sequence}s": self.wrong_sequences,
            f"{token}_errors": self.token_errors,
            f"reference_{token}s": self.reference_tokens,
        }

    def summary(self, label):
        """One line, e.g. `greedy: WER 7.01 % (841 of 12,000 words), PER 1.72 %
        (1,432 of 83,260 phones)`.

        Args:
            label: what was scored (a decoding, a model), first on the line.
        """
        sequence, token, sequence_rate, token_rate = self.names
        return (
            f"{label}: {sequence_rate.upper()} {self.sequence_error_rate:.2f} % "
            f"({self.wrong_sequences:,} of {self.sequences:,} {sequence}s), "
            f"{token_rate.upper()} {self.token_error_rate:.2f} % "
            f"({self.token_errors:,} of {self.reference_tokens:,} {token}s)"
        )


def error_rates_by_length(predictions, references, buckets, names=NAMES, length=len):
    """[(bucket, `ErrorRates` or None)]: the sequences of each length range.

    Args:
        predictions: {key: predicted tokens}, as `ErrorRates.of` takes.
        references: {key: [reference tokens, ...]}.
        buckets: ((low, high), ...) inclusive ranges of `length(key)`; a
            bucket without a key gives None.
        names: see `ErrorRates`.
        length: the length of a key (default `len`: letters of a word).
    """
    rows = []
    for low, high in buckets:
        part = {k: r for k, r in references.items() if low <= length(k) <= high}
        rows.append(((low, high), ErrorRates.of(predictions, part, names) if part else None))
    return rows


def error_rate_table(by_decoding, unit="length"):
    """A Markdown table of both rates by length, one column per decoding.

    Args:
        by_decoding: {label: rows of `error_rates_by_length`}, every list
            over the same buckets; a bucket is left out when it is None.
        unit: the first column's heading (what the lengths count).
    """
    labels = list(by_decoding)
    first = next((s for _, s in by_decoding[labels[0]] if s is not None), None)
    sequence, _, sequence_rate, token_rate = first.names if first else NAMES
    rates = f"{sequence_rate.upper()} / {token_rate.upper()}"
    lines = [
        f"| {unit} | {sequence}s | " + " | ".join(f"{n} {rates}" for n in labels) + " |",
        "|---|---:|" + "---:|" * len(labels),
    ]
    for i, ((low, high), rates_of_first) in enumerate(by_decoding[labels[0]]):
        if rates_of_first is None:
            continue
        cells = []
        for label in labels:
            s = by_decoding[label][i][1]
            cells.append(f"{s.sequence_error_rate:.1f} % / {s.token_error_rate:.1f} %")
        row = f"| {low}-{high} | {rates_of_first.sequences:,} | " + " | ".join(cells) + " |"
        lines.append(row)
    return "\n".join(lines)


def score_decodings(
    decode, references, decodings, buckets, names=NAMES, *, unit="length", length=len, report=None
):
    """Scores several decodings of the same sequences, overall and by length.

    Args:
        decode: a function of one setting (e.g. a beam width, None for greedy)
            returning {key: predicted tokens} for every key of `references`.
        references: {key: [reference tokens, ...]}, as `ErrorRates.of` takes.
        decodings: {label: setting}, e.g. {"greedy": None, "beam 4": 4}.
        buckets: the length ranges of `error_rates_by_length`.
        names: see `ErrorRates`.
        unit: what the lengths count, the key of each bucket's range.
        length: the length of a key (default `len`: letters of a word).
        report: a function called with each decoding's `summary` line and
            its time as the decoding ends (e.g. `print`); None: silent.

    Returns:
        `(results, by_length)`: {label: `as_dict()` with "seconds" and
        "by_length", a list of {unit: [low, high], **as_dict()} for the
        buckets that hold sequences}, and {label: rows of
        `error_rates_by_length`} for `error_rate_table` and
        `plot_error_rates_by_length`.
    """
    results, by_length = {}, {}
    for label, setting in decodings.items():
        started = time.perf_counter()
        predictions = decode(setting)
        rates = ErrorRates.of(predictions, references, names)
        result = results[label] = rates.as_dict()
        result["seconds"] = round(time.perf_counter() - started, 1)
        rows = by_length[label] = error_rates_by_length(
            predictions, references, buckets, names, length
        )
        result["by_length"] = [{unit: list(b), **r.as_dict()} for b, r in rows if r is not None]
        if report is not None:
            report(f"{rates.summary(label)} in {result['seconds']:.0f} s")
    return results, by_length


def plot_error_rates_by_length(path, by_decoding, xlabel="length", title=None):
    """The sequence error rate by length, one line per decoding, to a PNG.

    Args:
        path: the PNG file (`keras_attention.scoring.plots.plot_lines`).
        by_decoding: {label: rows of `error_rates_by_length`}; buckets
            without sequences are left out.
        xlabel: the horizontal axis' name, e.g. "word length (letters)".
        title: the figure's title, or None.
    """
    from keras_attention.scoring import plots

    series, sequence = {}, NAMES[0]
    for label, rows in by_decoding.items():
        kept = [(bucket, rates) for bucket, rates in rows if rates is not None]
        if kept:
            sequence, _, sequence_rate, _ = kept[0][1].names
            series[f"{label} {sequence_rate.upper()}"] = (
                [f"{low}-{high}" for (low, high), _ in kept],
                [rates.sequence_error_rate for _, rates in kept],
            )
    plots.plot_lines(path, series, xlabel, f"{sequence} error rate (%)", title)
