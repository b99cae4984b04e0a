"""Positive-integer arguments: one check, one message, `bool` refused everywhere."""

import re

import pytest

from keras_attention import BahdanauAttention
from keras_attention import BahdanauMonotonicAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import LuongMonotonicAttention
from keras_attention.translation.model import build_translator
from keras_attention.validation import check_positive_int

# `True` and `False` are ints in Python; a size of True is still a mistake.
NOT_POSITIVE_INTS = [True, False, 0, -1, 1.5, "3"]

SMALL = dict(attention="bahdanau", embedding_dim=4, units=4, dropout=0.0)

# (argument name, a function of its value that builds the object)
ARGUMENTS = {
    "BahdanauAttention.units": ("units", lambda n: BahdanauAttention(n)),
    "LuongAttention.units": ("units", lambda n: LuongAttention("concat", units=n)),
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
