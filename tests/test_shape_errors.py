"""Every shape mistake raises a ValueError naming the tensor, the expected shape in
symbols and the received shape: eagerly and on `keras.Input` symbolic tensors."""

import keras
import numpy as np
import pytest

from keras_attention import BahdanauAttention
from keras_attention import LuongAttention
from keras_attention import masked_softmax

GOOD = {"query": (2, 3, 4), "value": (2, 5, 6), "key": (2, 5, 6)}

# id: (layer factory, shapes of the bad call (None: as GOOD), whether the layer is
# first built on GOOD shapes, fragments the message must contain).
CASES = {
    "query_rank_4": (
        lambda: BahdanauAttention(8),
        {"query": (2, 3, 4, 1)},
        False,
        ["`query`", "(batch, T_q, d_q)", "(batch, d_q)", "query.shape=(2, 3, 4, 1)"],
    ),
    "value_rank_2": (
        lambda: BahdanauAttention(8),
        {"value": (2, 6), "key": None},
        False,
        ["`value`", "(batch, T_v, d_v)", "value.shape=(2, 6)"],
    ),
    "key_rank_4": (
        lambda: LuongAttention("general"),
        {"key": (2, 5, 6, 1)},
        False,
        ["`key`", "(batch, T_v, d_k)", "key.shape=(2, 5, 6, 1)"],
    ),
    "batch_of_value_differs_from_query": (
        lambda: BahdanauAttention(8),
        {"value": (3, 5, 6), "key": (3, 5, 6)},
        False,
        ["`value`", "(batch, T_v, d_v)", "batch=2", "value.shape=(3, 5, 6)"],
    ),
    "batch_of_key_differs_from_value": (
        lambda: LuongAttention("general"),
        {"key": (3, 5, 6)},
        False,
        ["`key`", "(batch, T_v, d_k)", "batch=2", "key.shape=(3, 5, 6)"],
    ),
    "key_length_differs_from_value": (
        lambda: BahdanauAttention(8),
        {"key": (2, 4, 6)},
        False,
        ["`key`", "(batch, T_v, d_k)", "T_v=5", "key.shape=(2, 4, 6)"],
    ),
    "query_size_differs_from_built": (
        lambda: BahdanauAttention(8),
        {"query": (2, 3, 5)},
        True,
        ["`query`", "(batch, T_q, d_q)", "d_q=4", "query.shape=(2, 3, 5)"],
    ),
    "single_step_query_size_differs_from_built": (
        lambda: LuongAttention("general"),
        {"query": (2, 5)},
        True,
        ["`query`", "(batch, d_q)", "d_q=4", "query.shape=(2, 5)"],
    ),
    "key_size_differs_from_built": (
        lambda: LuongAttention("concat"),
        {"key": (2, 5, 7)},
        True,
        ["`key`", "(batch, T_v, d_k)", "d_k=6", "key.shape=(2, 5, 7)"],
    ),
    "value_size_differs_from_built": (
        lambda: BahdanauAttention(8),
        {"value": (2, 5, 7)},
        True,
        ["`value`", "(batch, T_v, d_v)", "d_v=6", "value.shape=(2, 5, 7)"],
    ),
    "dot_query_and_key_sizes_differ": (
        lambda: LuongAttention("dot"),
        {},
        False,
        ["`key`", "(batch, T_v, d_k=4)", "d_q=4", "key.shape=(2, 5, 6)", "general"],
    ),
    "value_mask_length_differs": (
        lambda: BahdanauAttention(8),
        {"value_mask": (2, 4)},
        False,
        ["`value_mask`", "(batch, T_v)", "value_mask.shape=(2, 4)"],
    ),
    "value_mask_rank_3": (
        lambda: LuongAttention("general"),
        {"value_mask": (2, 5, 1)},
        False,
        ["`value_mask`", "(batch, T_v)", "value_mask.shape=(2, 5, 1)"],
    ),
    "value_mask_batch_differs": (
        lambda: BahdanauAttention(8),
        {"value_mask": (3, 5)},
        False,
        ["`value_mask`", "(batch, T_v)", "value_mask.shape=(3, 5)"],
    ),
    "query_mask_length_differs": (
        lambda: BahdanauAttention(8),
        {"query_mask": (2, 4)},
        False,
        ["`query_mask`", "(batch, T_q)", "query_mask.shape=(2, 4)"],
    ),
    "single_step_query_mask_has_time_axis": (
        lambda: LuongAttention("general"),
        {"query": (2, 4), "query_mask": (2, 3)},
        False,
        ["`query_mask`", "(batch,)", "query_mask.shape=(2, 3)"],
    ),
    "heads_do_not_divide_query_size": (
        lambda: LuongAttention("dot", num_heads=3),
        {"key": None, "value": (2, 5, 4)},
        False,
        ["`query`", "(batch, T_q, d_q)", "num_heads=3", "query.shape=(2, 3, 4)"],
    ),
    "heads_do_not_divide_key_size": (
        lambda: LuongAttention("general", num_heads=2),
        {"key": (2, 5, 5)},
        False,
        ["`key`", "(batch, T_v, d_k)", "num_heads=2", "key.shape=(2, 5, 5)"],
    ),
    "heads_do_not_divide_value_size": (
        lambda: LuongAttention("general", num_heads=2),
        {"value": (2, 5, 7)},
        False,
        ["`value`", "(batch, T_v, d_v)", "num_heads=2", "value.shape=(2, 5, 7)"],
    ),
}


def _tensor(shape, mode, dtype="float32"):
    if mode == "eager":
        if dtype == "bool":
            return np.ones(shape, bool)
        return np.random.default_rng(0).normal(size=shape).astype(dtype)
    return keras.Input(shape=shape[1:], batch_size=shape[0], dtype=dtype)


def _call(layer, shapes, mode):
    kwargs = {}
    for name, shape in shapes.items():
        if shape is not None:
            dtype = "bool" if name.endswith("_mask") else "float32"
            kwargs[name] = _tensor(shape, mode, dtype)
    return layer(**kwargs)


@pytest.mark.parametrize("mode", ["eager", "symbolic"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_shape_raises_value_error_naming_tensor_and_shapes(case, mode):
    make_layer, bad, build_first, fragments = CASES[case]
    layer = make_layer()
    if build_first:
        _call(layer, GOOD, mode)
    with pytest.raises(ValueError) as info:
        _call(layer, {**GOOD, **bad}, mode)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("mode", ["eager", "symbolic"])
def test_good_shapes_do_not_raise(mode):
    """The cases above differ from these shapes only by the mistake."""
    checked = 0
    for case, (make_layer, *_) in CASES.items():
        if case.startswith("dot_") or case.startswith("heads_"):
            continue  # their GOOD shapes are the mistake
        context = _call(make_layer(), GOOD, mode)
        # (batch, T_q, d_v): the query's batch and steps, the value's features.
        assert tuple(context.shape) == (2, 3, 6), case
        checked += 1
    assert checked >= 10


def test_unknown_feature_size_raises_on_symbolic_input():
    query = keras.Input((3, None))
    value = keras.Input((5, 6))
    with pytest.raises(ValueError) as info:
        BahdanauAttention(8)(query, value)
    message = str(info.value)
    for fragment in ["`query`", "d_q", "query.shape=(None, 3, None)"]:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("mode", ["eager", "symbolic"])
def test_processed_keys_of_other_length_raise(mode):
    layer = BahdanauAttention(8)
    _call(layer, GOOD, mode)
    query = _tensor((2, 3, 4), mode)
    value = _tensor((2, 5, 6), mode)
    processed_keys = layer.precompute_keys(_tensor((2, 4, 6), mode))
    with pytest.raises(ValueError) as info:
        layer.attend_sequence(query, value, processed_keys)
    message = str(info.value)
    for fragment in [
        "`processed_keys`",
        "(batch, T_v",
        "processed_keys.shape=(2, 4, 8)",
    ]:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize(
    "mask_shape",
    [(2, 3, 4), (2, 5), (3, 3, 5)],
    ids=["length_differs", "rank_differs", "batch_differs"],
)
def test_masked_softmax_refuses_to_broadcast_mask_silently(mask_shape):
    scores = np.zeros((2, 3, 5), "float32")
    with pytest.raises(ValueError) as info:
        masked_softmax(scores, np.ones(mask_shape, bool))
    message = str(info.value)
    received = "mask.shape=(" + ", ".join(map(str, mask_shape)) + ")"
    for fragment in ["`mask`", "(2, 3, 5)", received]:
        assert fragment in message, f"{fragment!r} not in {message!r}"
