"""Teacher-forced sequence-to-sequence batches of similar lengths, reshuffled every epoch.

```python
dataset = length_bucketed_dataset(pairs, batch_size=128, seed=0, start_id=1, end_id=2)
model.fit(dataset, epochs=10, shuffle=False)  # the dataset reshuffles itself
```
"""

import math

import numpy as np


def _pad(rows, width=None):
    """Rows of ids as one int32 array (len(rows), width), padded with 0 at the
    end; `width` None: the longest row's length."""
    width = max(len(r) for r in rows) if width is None else width
    out = np.zeros((len(rows), width), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def length_bucketed_batches(pairs, batch_size, rng, start_id, end_id, jitter=1.5):
    """One epoch of batches of pairs of similar source length, in random order.

    The pairs are sorted by source length plus uniform noise in [0, `jitter`)
    (which shuffles sources of equal length, and neighbouring lengths a
    little), cut into batches of `batch_size` (the last may be smaller), and
    the batches shuffled: little padding, a different epoch each call.

    Args:
        pairs: a list of `(source ids, target ids)`, lists of ints without
            start or end ids; 0 is padding.
        batch_size: pairs per batch.
        rng: a `numpy.random.Generator`, advanced by each call.
        start_id: the id the decoder input starts with.
        end_id: the id the target ends with.
        jitter: the width of the noise added to source lengths.

    Returns:
        A list of `((source, decoder_input), target)` int32 arrays of shapes
        (B, S), (B, T + 1), (B, T + 1): the decoder reads `start_id` and the
        target ids and predicts the target ids and `end_id`.
    """
    noise = rng.uniform(0, jitter, len(pairs))
    order = np.argsort([len(s) + n for (s, _), n in zip(pairs, noise, strict=True)], kind="stable")
    batches = []
    for begin in range(0, len(order), batch_size):
        chunk = [pairs[i] for i in order[begin : begin + batch_size]]
        source = _pad([s for s, _ in chunk])  # (B, S)
        target = _pad([t + [end_id] for _, t in chunk])  # (B, T + 1)
        decoder_input = _pad([[start_id] + t for _, t in chunk], target.shape[1])
        batches.append(((source, decoder_input), target))
    rng.shuffle(batches)
    return batches


def length_bucketed_dataset(pairs, batch_size, seed, start_id, end_id, jitter=1.5):
    """`length_bucketed_batches` as a `tf.data.Dataset` of known length that
    makes new batches every epoch from `numpy.random.default_rng(seed)`: the
    same seed gives the same batches in the same order. Fit it with
    `shuffle=False`. Needs TensorFlow (imported here)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def generate():
        yield from length_bucketed_batches(pairs, batch_size, rng, start_id, end_id, jitter)

    spec = tf.TensorSpec((None, None), tf.int32)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=((spec, spec), spec))
    # A known length gives the progress bar its total.
    num_batches = math.ceil(len(pairs) / batch_size)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset.prefetch(2)
