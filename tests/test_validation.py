"""Positive-integer arguments: one check, one message, `bool` refused everywhere."""

import re

import numpy as np
import pytest

from keras_attention import BahdanauAttention
from keras_attention import BahdanauMonotonicAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import LuongMonotonicAttention
from keras_attention.arguments.validation import check_positive_int
from keras_attention.export import export_tflite
from keras_attention.generation import beam_search
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.training import averaging
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import export
from keras_attention.translation import make_dataset
from keras_attention.translation import read_parallel
from keras_attention.translation.model import build_translator

# `True` and `False` are ints in Python; a size of True is still a mistake.
NOT_POSITIVE_INTS = [True, False, 0, -1, 1.5, "3"]

SMALL = dict(attention="bahdanau", embedding_dim=4, units=4, dropout=0.0)

# (argument name, a function of its value that builds the object)
ARGUMENTS = {
    "BahdanauAttention.units": ("units", lambda n: BahdanauAttention(n)),
    "LuongAttention.units": ("units", lambda n: LuongAttention("concat", units=n)),
    "LuongAttention.num_heads": ("num_heads", lambda n: LuongAttention(num_heads=n)),
    "BahdanauMonotonicAttention.units": ("units", lambda n: BahdanauMonotonicAttention(n)),
    "LuongMonotonicAttention.units": ("units", lambda n: LuongMonotonicAttention(n)),
    "LocationSensitiveAttention.units": ("units", lambda n: LocationSensitiveAttention(n)),
    "LocationSensitiveAttention.filters": (
        "filters",
        lambda n: LocationSensitiveAttention(4, filters=n),
    ),
    "LocationSensitiveAttention.kernel_size": (
        "kernel_size",
        lambda n: LocationSensitiveAttention(4, kernel_size=n),
    ),
    "build_translator.source_vocab_size": (
        "source_vocab_size",
        lambda n: build_translator(n, 7, **SMALL),
    ),
    "build_translator.target_vocab_size": (
        "target_vocab_size",
        lambda n: build_translator(7, n, **SMALL),
    ),
    "build_translator.embedding_dim": (
        "embedding_dim",
        lambda n: build_translator(7, 7, **{**SMALL, "embedding_dim": n}),
    ),
    "build_translator.units": (
        "units",
        lambda n: build_translator(7, 7, **{**SMALL, "units": n, "encoder_units": 2}),
    ),
    "build_translator.encoder_units": (
        "encoder_units",
        lambda n: build_translator(7, 7, **{**SMALL, "encoder_units": n}),
    ),
}
# Arguments checked before any work (reading, tracing, converting), so that a
# bad value fails at once: (argument name, a function of its value and of a
# temporary folder that calls with it).
CHECKED_FIRST = {
    "beam_search.beam_width": (
        "beam_width",
        lambda n, _: beam_search(None, None, [2], 3, 4, 3, beam_width=n),
    ),
    "export.export_tflite.beam_width": (
        "beam_width",
        lambda n, tmp: export_tflite(None, tmp / "m.tflite", beam_width=n),
    ),
    "translation.export.export_run.max_length": (
        "max_length",
        lambda n, tmp: export.export_run(tmp, tmp / "out", max_length=n),
    ),
    "translation.export.export_run.beam_width": (
        "beam_width",
        lambda n, tmp: export.export_run(tmp, tmp / "out", beam_width=n),
    ),
    "make_dataset.batch_size": (
        "batch_size",
        lambda n, _: make_dataset([], [], None, None, batch_size=n),
    ),
    "make_dataset.max_examples": (
        "max_examples",
        lambda n, _: make_dataset([], [], None, None, max_examples=n),
    ),
    "make_dataset.shuffle_buffer_size": (
        "shuffle_buffer_size",
        lambda n, _: make_dataset([], [], None, None, shuffle_buffer_size=n),
    ),
    "make_dataset.bucket_boundaries": (
        "bucket_boundaries[1]",
        lambda n, _: make_dataset([], [], None, None, bucket_boundaries=(8, n)),
    ),
    "read_parallel.max_words": (
        "max_words",
        lambda n, tmp: read_parallel(tmp / "en", tmp / "fr", max_words=n),
    ),
    "averaging.last_epochs.count": (
        "count",
        lambda n, tmp: averaging.last_epochs(tmp, n),
    ),
    "SubwordTokenizer.build.vocab_size": (
        "vocab_size",
        lambda n, _: SubwordTokenizer.build(["un chien"], vocab_size=n),
    ),
}
# Those whose argument is optional: None means "the default size".
OPTIONAL = {
    "LuongAttention.units",
    "LuongMonotonicAttention.units",
    "build_translator.encoder_units",
}


def _message(name, value):
    return (
        re.escape(f"Invalid value for argument `{name}`. Expected a positive integer")
        + r"( or None)?\. "
        + re.escape(f"Received: {name}={value!r}")
    )


@pytest.mark.parametrize("value", NOT_POSITIVE_INTS, ids=repr)
@pytest.mark.parametrize("where", sorted(ARGUMENTS))
def test_not_a_positive_int_is_refused_with_the_argument_named(where, value):
    name, make = ARGUMENTS[where]
    with pytest.raises(ValueError, match=_message(name, value)):
        make(value)


@pytest.mark.parametrize("where", sorted(ARGUMENTS))
def test_one_is_accepted(where):
    name, make = ARGUMENTS[where]
    made = make(1)
    if not where.startswith("build_translator"):
        assert getattr(made, name) == 1


@pytest.mark.parametrize("where", sorted(set(ARGUMENTS) - OPTIONAL))
def test_none_is_refused_where_the_size_is_required(where):
    name, make = ARGUMENTS[where]
    with pytest.raises(ValueError, match=_message(name, None)):
        make(None)


@pytest.mark.parametrize("value", [True, 0, 2.0, "3"], ids=repr)
@pytest.mark.parametrize("where", sorted(CHECKED_FIRST))
def test_not_a_positive_int_is_refused_before_any_work(where, value, tmp_path):
    name, call = CHECKED_FIRST[where]
    with pytest.raises(ValueError, match=_message(name, value)):
        call(value, tmp_path)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", NOT_POSITIVE_INTS, ids=repr)
def test_helper_message_is_the_keras_form(value):
    with pytest.raises(ValueError) as raised:
        check_positive_int("size", value)
    assert str(raised.value) == (
        f"Invalid value for argument `size`. Expected a positive integer. Received: size={value!r}"
    )


def test_helper_accepts_none_only_when_allowed():
    check_positive_int("size", None, allow_none=True)
    check_positive_int("size", 3, allow_none=True)
    with pytest.raises(ValueError, match=r"positive integer or None\. Received: size=True"):
        check_positive_int("size", True, allow_none=True)
    with pytest.raises(ValueError, match=r"positive integer\. Received: size=None"):
        check_positive_int("size", None)


def test_helper_accepts_numpy_integers_and_refuses_numpy_bools():
    # Sizes read from arrays arrive as NumPy integers.
    check_positive_int("size", np.int64(4))
    check_positive_int("size", np.int32(1))
    for value in (np.int64(0), np.bool_(True), np.float32(2.0)):
        with pytest.raises(ValueError, match="Expected a positive integer"):
            check_positive_int("size", value)


def test_beam_search_takes_a_numpy_beam_width():
    assert check_beam_width(np.int64(3)) == 3
    assert type(check_beam_width(np.int64(3))) is int
