"""Tests of make_dataset (keras_attention.translation.pipeline).

The tokenizers here have a character vocabulary (every character, alone and as a
`##` continuation), so the expected ids of every sentence follow from the text
alone: one id per non-space character, in order.
"""

import collections
import unicodedata
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from _data_paths import multi30k_dir

from keras_attention.translation import data
from keras_attention.translation.pipeline import make_dataset
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.tokenizer import SubwordTokenizer

N = 200
PAD, START, END = 0, 2, 3


def _char_tokenizer(sentences):
    chars = sorted({c for s in sentences for c in unicodedata.normalize("NFKC", s)})
    chars = [c for c in chars if not c.isspace()]
    return SubwordTokenizer(
        list(RESERVED_TOKENS) + chars + ["##" + c for c in chars], lower_case=False
    )


def _is_punctuation(char):
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _expected_ids(tokenizer, sentence):
    index = {token: i for i, token in enumerate(tokenizer.vocab)}
    ids = []
    for chunk in unicodedata.normalize("NFKC", sentence).split():
        word_start = True
        for char in chunk:
            if _is_punctuation(char):
                ids.append(index[char])
                word_start = True
            else:
                ids.append(index[char if word_start else "##" + char])
                word_start = False
    return tuple(ids)


@pytest.fixture(scope="module")
def setup():
    val = data.load_multi30k("val", data_dir=multi30k_dir())["val"]
    en, fr = val.en[:N], val.fr[:N]
    en_tok, fr_tok = _char_tokenizer(en), _char_tokenizer(fr)
    expected = [
        (_expected_ids(en_tok, e), _expected_ids(fr_tok, f)) for e, f in zip(en, fr, strict=True)
    ]
    return en, fr, en_tok, fr_tok, expected


def _make(setup, **kwargs):
    en, fr, en_tok, fr_tok, _ = setup
    kwargs.setdefault("batch_size", 16)
    return make_dataset(en, fr, en_tok, fr_tok, **kwargs)


def _batches(dataset):
    return [(src.numpy(), dec.numpy(), tgt.numpy()) for (src, dec), tgt in dataset]


def _unpadded_rows(batches):
    """(source ids, target ids without [END]) of every row, in dataset order."""
    rows = []
    for src, _, tgt in batches:
        for s, t in zip(src, tgt, strict=True):
            s_len = np.count_nonzero(s)
            t_len = np.count_nonzero(t)
            rows.append((tuple(s[:s_len].tolist()), tuple(t[: t_len - 1].tolist())))
    return rows


def test_element_spec_is_int32_source_decoder_input_target(setup):
    spec = _make(setup).element_spec
    int_matrix = tf.TensorSpec(shape=(None, None), dtype=tf.int32)
    assert spec == ((int_matrix, int_matrix), int_matrix)


def test_batch_shapes(setup):
    batches = _batches(_make(setup, batch_size=16))
    assert sum(src.shape[0] for src, _, _ in batches) == N
    for src, dec, tgt in batches:
        assert src.ndim == 2 and src.dtype == np.int32
        assert dec.shape == tgt.shape and dec.shape[0] == src.shape[0] <= 16
        assert dec.dtype == tgt.dtype == np.int32


def test_decoder_input_is_start_plus_target_and_target_ends_with_end(setup):
    for _, dec, tgt in _batches(_make(setup)):
        for d, t in zip(dec, tgt, strict=True):
            length = np.count_nonzero(t)
            assert np.all(t[:length] != PAD) and np.all(t[length:] == PAD)
            assert np.all(d[length:] == PAD)
            assert d[0] == START and t[length - 1] == END
            np.testing.assert_array_equal(d[1:length], t[: length - 1])
            assert START not in t and END not in d


def test_source_is_padded_with_zero_and_has_no_start_or_end(setup):
    for src, _, _ in _batches(_make(setup)):
        for s in src:
            length = np.count_nonzero(s)
            assert np.all(s[:length] != PAD) and np.all(s[length:] == PAD)
            assert START not in s and END not in s
        assert np.count_nonzero(src[:, -1]) > 0  # Padded to the longest row only.


def test_rows_hold_the_expected_ids(setup):
    expected = setup[4]
    rows = _unpadded_rows(_batches(_make(setup)))
    assert collections.Counter(rows) == collections.Counter(expected)


def test_without_shuffle_or_buckets_order_is_kept(setup):
    batches = _batches(_make(setup, shuffle=False, bucket_boundaries=None, batch_size=32))
    assert [src.shape[0] for src, _, _ in batches] == [32] * 6 + [8]
    assert _unpadded_rows(batches) == setup[4]


def test_max_examples_keeps_the_first_pairs(setup):
    rows = _unpadded_rows(_batches(_make(setup, max_examples=50)))
    assert collections.Counter(rows) == collections.Counter(setup[4][:50])


def test_same_seed_gives_same_epochs_and_epochs_differ(setup):
    first = _make(setup, seed=7)
    second = _make(setup, seed=7)
    first_epochs = [_unpadded_rows(_batches(first)) for _ in range(2)]
    second_epochs = [_unpadded_rows(_batches(second)) for _ in range(2)]
    assert first_epochs == second_epochs
    assert first_epochs[0] != first_epochs[1]
    assert collections.Counter(first_epochs[0]) == collections.Counter(first_epochs[1])


def test_other_seed_gives_other_order(setup):
    assert _unpadded_rows(_batches(_make(setup, seed=1))) != _unpadded_rows(
        _batches(_make(setup, seed=2))
    )


def test_unbucketed_shuffle_is_deterministic_too(setup):
    def epochs(dataset):
        return [_unpadded_rows(_batches(dataset)) for _ in range(2)]

    a = epochs(_make(setup, seed=3, bucket_boundaries=None))
    b = epochs(_make(setup, seed=3, bucket_boundaries=None))
    assert a == b and a[0] != a[1] and a[0] != setup[4]


def test_batches_group_rows_of_one_length_bucket(setup):
    boundaries = (50, 60, 70, 80)
    batches = _batches(_make(setup, bucket_boundaries=boundaries, batch_size=8))
    buckets_seen = set()
    for src, _, tgt in batches:
        lengths = np.maximum(np.count_nonzero(src, axis=1), np.count_nonzero(tgt, axis=1))
        buckets = set(np.searchsorted(boundaries, lengths, side="right").tolist())
        assert len(buckets) == 1
        buckets_seen |= buckets
    assert len(buckets_seen) > 2


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"max_examples": 0}, "max_examples"),
        ({"bucket_boundaries": (10, 10)}, "bucket_boundaries"),
        ({"bucket_boundaries": ()}, "bucket_boundaries"),
        ({"shuffle_buffer_size": -1}, "shuffle_buffer_size"),
    ],
)
def test_invalid_arguments_raise(setup, kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        _make(setup, **kwargs)


def test_misaligned_texts_raise(setup):
    en, fr, en_tok, fr_tok, _ = setup
    with pytest.raises(ValueError, match="aligned"):
        make_dataset(en, fr[:-1], en_tok, fr_tok, batch_size=8)


def test_keras_fit_trains_on_the_batches(setup):
    _, _, en_tok, fr_tok, _ = setup
    source = keras.Input((None,), dtype="int32")
    decoder_input = keras.Input((None,), dtype="int32")
    context = keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(en_tok.vocab_size, 8)(source)
    )  # (B, 8)
    hidden = keras.layers.Embedding(fr_tok.vocab_size, 8)(decoder_input)  # (B, T, 8)
    hidden = hidden + keras.layers.Reshape((1, 8))(context)
    logits = keras.layers.Dense(fr_tok.vocab_size)(hidden)  # (B, T, V)
    model = keras.Model([source, decoder_input], logits)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(_make(setup, max_examples=64), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert all(np.isfinite(history.history["loss"]))
    assert not [w for w in caught if "ran out of data" in str(w.message)]


@pytest.mark.parametrize(
    "bucket_boundaries, batch_size",
    [(None, 7), ((30, 50, 60, 70), 7), ((30, 50, 60, 70), 16), ((100,), 16)],
)
def test_cardinality_is_the_number_of_batches(setup, bucket_boundaries, batch_size):
    dataset = _make(setup, bucket_boundaries=bucket_boundaries, batch_size=batch_size)
    cardinality = int(dataset.cardinality())
    assert cardinality == len(_batches(dataset)) == len(_batches(dataset))


# ------------------------------------------------- fixed_shapes (for JAX)

FIXED_BOUNDARIES = (50, 60, 70, 80)


def _longest(src, tgt):
    """The longest sentence of a batch: source, or target with [END]."""
    return int(max(np.count_nonzero(src, axis=1).max(), np.count_nonzero(tgt, axis=1).max()))


def _bucket_width(length, boundaries):
    """The longest length the bucket of `length` holds; past the last
    boundary the buckets go on in steps of it."""
    uppers = list(boundaries) + [boundaries[-1] * k for k in range(2, 10)]
    return next(upper for upper in uppers if length < upper) - 1


@pytest.mark.parametrize("bucketed", [True, False])
def test_fixed_shapes_pad_every_batch_to_its_buckets_width(setup, bucketed):
    boundaries = FIXED_BOUNDARIES if bucketed else None
    kwargs = dict(batch_size=16, seed=5, bucket_boundaries=boundaries)
    plain = _batches(_make(setup, **kwargs))
    fixed = _batches(_make(setup, fixed_shapes=True, **kwargs))
    assert len(fixed) == len(plain) == int(_make(setup, fixed_shapes=True, **kwargs).cardinality())
    widths = FIXED_BOUNDARIES if bucketed else (8, 12, 16, 20, 24, 32, 48, 64)
    for (src, dec, tgt), (fixed_src, fixed_dec, fixed_tgt) in zip(plain, fixed, strict=True):
        rows, width = src.shape[0], _bucket_width(_longest(src, tgt), widths)
        for ids, padded in ((src, fixed_src), (dec, fixed_dec), (tgt, fixed_tgt)):
            assert padded.shape == (16, width) and padded.dtype == np.int32
            np.testing.assert_array_equal(padded[:rows, : ids.shape[1]], ids)  # the same batch
            assert not padded[rows:].any() and not padded[:, ids.shape[1] :].any()
    # One shape per width: the few shapes JAX compiles, for many more.
    shapes = {b[0].shape for b in fixed}
    assert len(shapes) == len({_bucket_width(_longest(s, t), widths) for s, _, t in plain})
    assert 1 < len(shapes) < len({(b[0].shape, b[2].shape) for b in plain})


@pytest.mark.parametrize(
    "length, width",
    [(1, 7), (7, 7), (8, 11), (11, 11), (12, 15), (47, 47), (48, 63), (63, 63), (64, 127)]
    + [(127, 127), (128, 191), (200, 255)],
)
def test_fixed_width_is_the_longest_length_of_the_bucket(length, width):
    from keras_attention.translation import pipeline

    assert _bucket_width(length, pipeline.DEFAULT_BUCKET_BOUNDARIES) == width  # the reference
    got = pipeline._fixed_width(tf.constant(length), pipeline.DEFAULT_BUCKET_BOUNDARIES)
    assert int(got) == width


def _one_batch(model, x, y):
    """This batch's own loss and accuracy: Keras 3.12's `test_on_batch` keeps
    averaging over the calls before it unless the metrics are reset."""
    model.reset_metrics()
    return model.test_on_batch(x, y, return_dict=True)


def test_fixed_shapes_leave_every_batchs_loss_unchanged(setup):
    """The translator's masks and its loss's `ignore_class=0` make the extra
    rows and columns change nothing: each batch's loss and accuracy are
    those of the batch padded to its longest sentence (float32)."""
    from keras_attention.translation import training

    _, _, en_tok, fr_tok, _ = setup
    config = dict(training.PRESETS["tiny"], attention="bahdanau", input_feeding=True)
    model = training.compiled_model(config, en_tok, fr_tok, seed=0)
    kwargs = dict(batch_size=16, seed=3, bucket_boundaries=FIXED_BOUNDARIES)
    plain, fixed = _make(setup, **kwargs), _make(setup, fixed_shapes=True, **kwargs)
    results, padded = [], 0
    pairs = zip(plain.as_numpy_iterator(), fixed.as_numpy_iterator(), strict=True)
    for (x, y), (fixed_x, fixed_y) in pairs:
        padded += fixed_y.shape != y.shape
        results.append([_one_batch(model, *batch) for batch in ((x, y), (fixed_x, fixed_y))])
    assert padded > len(results) // 2
    # (batches, 2): padded to the longest sentence, to the fixed shape.
    losses = np.array([[r["loss"] for r in pair] for pair in results])
    assert np.all(losses > 1.0)  # an untrained model: far from 0
    np.testing.assert_allclose(losses[:, 1], losses[:, 0], rtol=1e-6)
    # The accuracy reads the model's output mask: padding is not counted.
    accuracies = np.array([[r["accuracy"] for r in pair] for pair in results])
    np.testing.assert_allclose(accuracies[:, 1], accuracies[:, 0], rtol=1e-6)
