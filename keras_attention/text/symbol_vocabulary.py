"""`SymbolVocabulary`: symbols (characters, phones, words) and their ids, with
the special ids first."""


class SymbolVocabulary:
    """Symbols ↔ ids: id = index in `symbols`, the first `specials` ids reserved
    (padding, START, END), never encoded and dropped by `decode`.

    ```python
    letters = SymbolVocabulary.from_sequences(["CAT", "TAB"], kind="character")
    assert letters.symbols == ["<pad>", "A", "B", "C", "T"]
    assert letters.encode("BAT", "word") == [2, 1, 4]
    phones = SymbolVocabulary(["<pad>", "<s>", "</s>", "AE", "K", "T"], specials=3, end_id=2)
    assert phones.decode([4, 3, 5, 2, 5]) == ["K", "AE", "T"]  # up to END
    ```

    Args:
        symbols: every symbol, the specials first; each once.
        specials: how many leading ids are special (1: padding; 3: padding,
            START, END).
        end_id: the special id `decode` stops at; None: it reads every id.
        kind: what a symbol is, for messages ("character", "phone").
    """

    def __init__(self, symbols, specials=1, end_id=None, kind="symbol"):
        symbols = list(symbols)
        if len(set(symbols)) != len(symbols):
            repeated = sorted({s for s in symbols if symbols.count(s) > 1})
            raise ValueError(
                "Invalid value for argument `symbols`. Expected each symbol once. "
                f"Received: {repeated!r} more than once"
            )
        if not 0 <= specials <= len(symbols):
            raise ValueError(
                "Invalid value for argument `specials`. Expected 0 to "
                f"len(symbols)={len(symbols)}. Received: specials={specials!r}"
            )
        if end_id is not None and not 0 <= end_id < specials:
            raise ValueError(
                "Invalid value for argument `end_id`. Expected a special id, 0 to "
                f"{specials - 1}. Received: end_id={end_id!r}"
            )
        self.symbols = symbols
        self.specials = specials
        self.end_id = end_id
        self.kind = kind
        self.ids = {s: i for i, s in enumerate(symbols) if i >= specials}

    @classmethod
    def from_sequences(cls, sequences, specials=("<pad>",), end_id=None, kind="symbol"):
        """The vocabulary of every symbol in `sequences`, sorted, after `specials`.

        Args:
            sequences: an iterable of sequences of symbols (strings are
                sequences of characters).
            specials: the special symbols, ids 0, 1, ...
            end_id: see the class.
            kind: see the class.
        """
        found = sorted({s for sequence in sequences for s in sequence})
        return cls([*specials, *found], len(specials), end_id, kind)

    def __len__(self):
        return len(self.symbols)

    def unknown(self, sequence):
        """The symbols of `sequence` that have no id, sorted, each once."""
        return sorted({s for s in sequence if s not in self.ids})

    def encode(self, sequence, name="sequence", max_length=None):
        """The ids of `sequence`'s symbols.

        Args:
            sequence: a sequence of symbols.
            name: what the sequence is, for the message ("word", "sentence").
            max_length: the most symbols a sequence may have; None: any.

        Raises:
            ValueError: a symbol has no id, or the sequence is longer than
                `max_length`; the message names the sequence (its first 40
                symbols) and those symbols (and the known ones, if 100 or
                fewer), or its length.
        """
        unknown = self.unknown(sequence)
        if unknown:
            characters = all(isinstance(s, str) and len(s) == 1 for s in self.ids)
            known = list(self.ids)
            if characters:
                unknown, known = "".join(unknown), "".join(known)
            note = f" (known: {known!r})" if len(self.ids) <= 100 else ""
            raise ValueError(
                f"The {name} {_shown(sequence)} has {self.kind}s outside the vocabulary: "
                f"{unknown!r}{note}"
            )
        if max_length is not None and len(sequence) > max_length:
            raise ValueError(
                f"The {name} {_shown(sequence)} has {len(sequence)} {self.kind}s, more than the "
                f"{max_length} it may have"
            )
        return [self.ids[s] for s in sequence]

    def decode(self, ids):
        """The symbols of `ids` up to `end_id` (excluded), specials dropped.

        Args:
            ids: an iterable of integer ids (numpy integers too).
        """
        symbols = []
        for i in ids:
            i = int(i)
            if i == self.end_id:
                break
            if i >= self.specials:
                symbols.append(self.symbols[i])
        return symbols


def _shown(sequence):
    """A sequence in a message: its first 40 symbols, "..." when there are more."""
    return repr(sequence[:40]) + ("..." if len(sequence) > 40 else "")
