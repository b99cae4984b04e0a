"""`tf.data` pipelines of subword ids for teacher-forced training.

Each batch is `((source_ids, decoder_input_ids), target_ids)`, all int32 and
padded with 0 (`[PAD]`):

    source_ids          (B, S)   the source subwords, no [START] or [END]
    decoder_input_ids   (B, T)   [START] y_1 ... y_n
    target_ids          (B, T)   y_1 ... y_n [END]

The source carries no [START] or [END]: the encoder needs no boundary marker and
every non-zero source position is a real subword, so `source_ids != 0` is the
source mask. The decoder input and the target are the same sequence shifted by
one, so they have the same length and the same padding; a loss with
`ignore_class=0` (or sample weights `target_ids != 0`) ignores the padding.

Order: the sentences are tokenized once, up front, and held in memory. With
`shuffle=True` they are reshuffled at every pass over the dataset (each Keras
epoch), from `seed`: two datasets built with the same seed (and the same global
TensorFlow seed, see `tf.random.set_seed`) give the same sequence of epochs.
Batches then group sentences of similar length (`bucket_boundaries`) to save
padding, and are prefetched.

Shapes: each batch is padded to its longest sentence, so the batch shapes vary
from step to step. TensorFlow traces the training step once for all of them
(its `tf.function` relaxes the shapes), but JAX compiles the step again for
every new shape: a few seconds each, for each of the dozens of shapes of an
epoch and of a validation. `fixed_shapes=True` pads every batch to
`batch_size` rows and both its sequences to one width per length bucket (the
longest pair that bucket holds), so that an epoch comes in as many shapes as
it touches buckets. The extra rows are all padding (an empty source, no target
token) and the extra columns too: a loss that ignores the padding id
(`ignore_class=0`) and the masks of the model make them change nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.arguments.validation import check_same_count

# Upper bounds (exclusive) of the length buckets, in subwords. Multi30k sentences
# have about 15-17 subwords with a ~3k vocabulary, rarely more than 50.
DEFAULT_BUCKET_BOUNDARIES = (8, 12, 16, 20, 24, 32, 48, 64)


def make_dataset(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    src_tokenizer,
    tgt_tokenizer,
    batch_size: int = 64,
    shuffle: bool = True,
    seed: int | None = 0,
    max_examples: int | None = None,
    bucket_boundaries: Sequence[int] | None = DEFAULT_BUCKET_BOUNDARIES,
    shuffle_buffer_size: int | None = None,
    fixed_shapes: bool = False,
) -> tf.data.Dataset:
    """Builds a batched, padded dataset of aligned sentence pairs.

    Args:
        src_texts: sequence of source sentences (str).
        tgt_texts: sequence of target sentences, `tgt_texts[i]` translating
            `src_texts[i]`.
        src_tokenizer: a `SubwordTokenizer` (anything with `tokenize` and
            `pad_id == 0`) for the source language.
        tgt_tokenizer: the same for the target; its `start_id` and `end_id`
            frame the target.
        batch_size: positive int, the largest batch. Batches at the end of an
            epoch (one per length bucket) may be smaller.
        shuffle: bool, reshuffle the pairs at every pass over the dataset.
        seed: int or None, the shuffle seed. `None` gives a different order in
            every run.
        max_examples: optional positive int, keep only the first pairs (before
            shuffling), e.g. for tiny runs.
        bucket_boundaries: increasing positive ints, the length buckets
            (length = the longer of source and target sequence). `None` batches
            in order without bucketing, e.g. for evaluation.
        shuffle_buffer_size: optional positive int; default: the number of
            pairs (a full shuffle).
        fixed_shapes: bool. False: each batch is padded to its longest
            sentence. True (for JAX, see above): each batch is padded with
            rows of 0 to `batch_size` rows, and its source, decoder input and
            target to one width: the longest length its bucket holds (the
            bucket's upper boundary minus 1; past the last boundary, the
            boundaries go on in steps of the last one: with the default ones,
            widths 7, 11, 15, 19, 23, 31, 47, 63, then 127, 191, ...). Without
            `bucket_boundaries`, the widths are those of
            `DEFAULT_BUCKET_BOUNDARIES`. The batches and their order are the
            same as with False.

    Returns:
        A `tf.data.Dataset` of `((source_ids, decoder_input_ids), target_ids)`.
    """
    check_positive_int("batch_size", batch_size)
    check_positive_int("max_examples", max_examples, allow_none=True)
    check_positive_int("shuffle_buffer_size", shuffle_buffer_size, allow_none=True)
    bucket_boundaries = _checked_boundaries(bucket_boundaries)
    src_texts, tgt_texts = _checked_pairs(src_texts, tgt_texts, src_tokenizer, tgt_tokenizer)
    if max_examples is not None:
        src_texts = src_texts[:max_examples]
        tgt_texts = tgt_texts[:max_examples]
    source, target, dataset = _framed(src_texts, tgt_texts, src_tokenizer, tgt_tokenizer)
    if shuffle:
        dataset = dataset.shuffle(
            shuffle_buffer_size or len(src_texts), seed=seed, reshuffle_each_iteration=True
        )

    dataset = _batched(dataset, batch_size, bucket_boundaries, source, target)
    if fixed_shapes:
        pad = functools.partial(
            _pad_to_fixed_shape,
            rows=batch_size,
            boundaries=bucket_boundaries or DEFAULT_BUCKET_BOUNDARIES,
        )
        dataset = dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.map(_to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _framed(src_texts, tgt_texts, src_tokenizer, tgt_tokenizer):
    """The pairs tokenized once, up front: `(source, target, dataset)`, the
    ragged ids (N, None) and a cached dataset of framed pairs (the cache keeps
    the framed rows in memory; a shuffle after it reorders them at every
    pass)."""
    source = tf.cast(src_tokenizer.tokenize(src_texts), tf.int32)  # (N, None)
    target = tf.cast(tgt_tokenizer.tokenize(tgt_texts), tf.int32)  # (N, None)
    frame = functools.partial(_frame, start_id=tgt_tokenizer.start_id, end_id=tgt_tokenizer.end_id)
    dataset = tf.data.Dataset.from_tensor_slices((source, target)).map(frame).cache()
    return source, target, dataset


def _checked_boundaries(bucket_boundaries):
    """`bucket_boundaries` as a tuple, or None; a ValueError unless they are
    strictly increasing positive integers."""
    if bucket_boundaries is None:
        return None
    bucket_boundaries = tuple(bucket_boundaries)
    for i, boundary in enumerate(bucket_boundaries):
        check_positive_int(f"bucket_boundaries[{i}]", boundary)
    if not bucket_boundaries or list(bucket_boundaries) != sorted(set(bucket_boundaries)):
        raise ValueError(
            "Invalid value for argument `bucket_boundaries`. Expected strictly "
            "increasing positive integers, or None. "
            f"Received: bucket_boundaries={bucket_boundaries!r}"
        )
    return bucket_boundaries


def _checked_pairs(src_texts, tgt_texts, src_tokenizer, tgt_tokenizer):
    """The texts as lists; a ValueError unless they are aligned, not empty, and
    both tokenizers pad with 0."""
    src_texts = list(src_texts)
    tgt_texts = list(tgt_texts)
    check_same_count(src_texts, tgt_texts, "`src_texts`", "`tgt_texts`", "sentences")
    if not src_texts:
        raise ValueError("Invalid value for argument `src_texts`. Received no pairs.")
    for name, tokenizer in (("src_tokenizer", src_tokenizer), ("tgt_tokenizer", tgt_tokenizer)):
        if tokenizer.pad_id != 0:
            raise ValueError(
                f"Invalid value for argument `{name}`. Expected a tokenizer with "
                f"pad_id=0 (batches are padded with 0). Received: pad_id="
                f"{tokenizer.pad_id}"
            )
    return src_texts, tgt_texts


def _batched(dataset, batch_size, bucket_boundaries, source, target):
    """Pads and batches framed pairs, by length bucket unless `bucket_boundaries`
    is None; `source` and `target` (N, None) give the number of batches."""
    padded_shapes = ([None], [None], [None])
    padding_values = (0, 0, 0)
    if bucket_boundaries is None:
        dataset = dataset.padded_batch(
            batch_size, padded_shapes=padded_shapes, padding_values=padding_values
        )
    else:
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=_pair_length,
            bucket_boundaries=list(bucket_boundaries),
            bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1),
            padded_shapes=padded_shapes,
            padding_values=padding_values,
        )
        # Bucketing hides the number of batches from tf.data, and Keras then
        # warns that the input "ran out of data" after the first epoch. The
        # number is known: it depends on the lengths, not on the order.
        lengths = tf.maximum(source.row_lengths(), target.row_lengths() + 1)
        buckets = np.searchsorted(bucket_boundaries, lengths.numpy(), side="right")
        per_bucket = np.bincount(buckets, minlength=len(bucket_boundaries) + 1)
        num_batches = int(np.sum(-(-per_bucket // batch_size)))  # Ceiling.
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset


def _frame(source, target, start_id, end_id):
    # Slices of a RaggedTensor arrive as 1-D tensors; returning them as such
    # gives the dense element spec that padded batching needs.
    start = tf.constant([start_id], tf.int32)
    end = tf.constant([end_id], tf.int32)
    decoder_input = tf.concat([start, target], axis=0)  # (T,): [START] y
    decoder_target = tf.concat([target, end], axis=0)  # (T,): y [END]
    return source, decoder_input, decoder_target


def _pair_length(source, decoder_input, decoder_target):
    # The same length as the one counted for assert_cardinality above.
    del decoder_input  # As long as decoder_target.
    return tf.maximum(tf.shape(source)[0], tf.shape(decoder_target)[0])


def _fixed_width(length, boundaries):
    """The width of a batch whose longest sentence (source, or target with
    [END]) has `length` subwords, a scalar int32 tensor: the smallest boundary
    above `length`, minus 1; past the last boundary `b`, the next multiple of
    `b`, minus 1."""
    last = boundaries[-1]
    index = tf.searchsorted(tf.constant(boundaries, tf.int32), tf.reshape(length, [1]), "right")
    upper = tf.where(
        length < last,
        tf.gather(boundaries, tf.minimum(index[0], len(boundaries) - 1)),
        (length // last + 1) * last,  # past the last boundary, in steps of it
    )
    return upper - 1


def _pad_to_fixed_shape(source, decoder_input, decoder_target, rows, boundaries):
    # Both sequences to one width: the bucket's longest, not the batch's.
    longest = tf.maximum(tf.shape(source)[1], tf.shape(decoder_target)[1])
    width = _fixed_width(longest, boundaries)
    extra_rows = rows - tf.shape(source)[0]

    def pad(ids):  # (b, t) -> (rows, width), zeros: [PAD]
        return tf.pad(ids, [[0, extra_rows], [0, width - tf.shape(ids)[1]]])

    return pad(source), pad(decoder_input), pad(decoder_target)


def _to_model_inputs(source, decoder_input, decoder_target):
    return (source, decoder_input), decoder_target
