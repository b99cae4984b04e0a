"""`decode_batches`: many sources decoded in batches of similar length."""

import numpy as np


def decode_batches(generator, sources, batch_size=256, beam_width=None, progress=False):
    """The tokens of every source, decoded greedily or with a beam search.

    The sources are sorted by length and decoded `batch_size` at a time, each
    batch padded with 0 to its longest source: little padding, and the result
    of a source does not depend on the order given. Duplicates are decoded
    once.

    Args:
        generator: a `Seq2SeqGenerator` or an `EnsembleGenerator` (anything
            with `greedy(source)` and `beam(source, beam_width=...)`).
        sources: a list of source id sequences (ints above 0; 0 pads).
        batch_size: sources per batch.
        beam_width: None for greedy search, else the beam search's width
            (its other settings are the generator's defaults).
        progress: show a `keras.utils.Progbar` over the sources.

    Returns:
        A list, one per source in the order given, of its output ids as a
        NumPy int32 row (up to and including the end id, then padding).
    """
    if batch_size < 1:
        raise ValueError(
            f"Invalid value for argument `batch_size`. Expected a positive integer. "
            f"Received: batch_size={batch_size!r}"
        )
    keys = sorted({tuple(int(i) for i in s) for s in sources}, key=lambda s: (len(s), s))
    if progress:
        import keras

        bar = keras.utils.Progbar(len(keys))
    decoded = {}
    for begin in range(0, len(keys), batch_size):
        chunk = keys[begin : begin + batch_size]
        source = np.zeros((len(chunk), max(len(s) for s in chunk)), "int32")  # (B, S)
        for row, ids in enumerate(chunk):
            source[row, : len(ids)] = ids
        if beam_width is None:
            tokens = generator.greedy(source)["tokens"]
        else:
            tokens = generator.beam(source, beam_width=beam_width)["tokens"]
        for ids, row in zip(chunk, np.asarray(tokens), strict=True):
            decoded[ids] = row
        if progress:
            bar.add(len(chunk))
    return [decoded[tuple(int(i) for i in s)] for s in sources]
