"""The exported search loops carry no tensor sized by the source.

LiteRT's default CPU path (the XNNPACK delegate) resizes and re-plans a
`WHILE` body whose inputs grow, and the first call at a source longer than
any before it then read memory nobody wrote now and then (all-0 tokens, a
NaN log-probability): `benchmarks/lite_first_growth.py` keeps the graph that
meets it and counts the calls. The export pads the decode state to a static
width (`StaticWidth`), so the body never resizes. The defect is rare and
depends on the memory an interpreter gets, so these tests check the graph
that avoids it, and that the padding changes no output.
"""

import numpy as np
import pytest
import tensorflow as tf
from test_seq2seq_generator import case

from keras_attention.export import LiteGenerator
from keras_attention.export.tflite import StaticWidth
from keras_attention.generation.step_search import StepSearch

WIDTH = 9
BEAM = 2


@pytest.fixture(scope="module")
def generator():
    return case("bahdanau_gru").generator


def _search_loop_inputs(function):
    """The input shapes of the function's search loop: its last `While`
    (the encoder's loops come before it)."""
    loops = [op for op in function.graph.get_operations() if "While" in op.type]
    assert loops, "no loop in the graph"
    return [t.shape for t in loops[-1].inputs]


@pytest.mark.parametrize("signature", ["generate", "generate_beam"])
def test_a_static_export_searches_over_static_shapes_only(generator, signature):
    lite = LiteGenerator(generator, beam_width=BEAM, source_length=WIDTH)
    shapes = _search_loop_inputs(getattr(lite, signature))
    unknown = [s for s in shapes if not s.is_fully_defined()]
    assert not unknown, f"{signature}: the loop carries {unknown}"


@pytest.mark.parametrize("signature", ["generate", "generate_beam"])
def test_a_dynamic_export_searches_over_a_state_of_max_source_length(generator, signature):
    # Only the output buffers keep their min(2·S + 10, cap) rows: (R,) the
    # positions, (rows, R) the tokens, (rows, R, W) the attention.
    lite = LiteGenerator(generator, beam_width=BEAM)
    width = generator.max_source_length
    shapes = _search_loop_inputs(getattr(lite, signature))
    rows = {1, BEAM}
    for shape in shapes:
        if shape.is_fully_defined():
            continue
        dims = shape.as_list()
        buffer = dims == [None] or (
            dims[0] in rows and dims[1] is None and dims[2:] in ([], [width])
        )
        assert buffer, f"{signature}: the loop carries {shape} (source-sized)"
    assert any(s.as_list()[1:2] == [width] for s in shapes if s.rank and s.rank >= 2)


def test_the_padded_state_is_the_state_then_zeros(generator):
    source = case("bahdanau_gru").single(1)  # (1, S), S < WIDTH
    length = source.shape[1]
    state, mask = generator.encode(source)
    spec = tf.TensorSpec([1, None], tf.int32)  # unknown length, as the export traces it
    encode = tf.function(StaticWidth(generator, WIDTH).encode, input_signature=[spec])
    padded, padded_mask = encode(tf.constant(source))
    assert padded_mask.shape == (1, WIDTH)
    np.testing.assert_array_equal(padded_mask[:, :length], mask)
    assert not np.asarray(padded_mask[:, length:]).any()
    for key, value in state.items():
        value, got = np.asarray(value), np.asarray(padded[key])
        if value.ndim >= 2 and key != "h":
            assert got.shape == (1, WIDTH, *value.shape[2:]), key
            # Traced against eager: equal up to float rounding.
            np.testing.assert_allclose(got[:, :length], value, atol=1e-6)
            assert not got[:, length:].any(), key
        else:
            np.testing.assert_allclose(got, value, atol=1e-6)


def test_the_search_over_the_padded_state_decodes_as_keras(generator):
    search = StepSearch(StaticWidth(generator, WIDTH))
    spec = tf.TensorSpec([1, None], tf.int32)
    greedy = tf.function(search.greedy_graph, input_signature=[spec])
    for row in range(3):
        source = case("bahdanau_gru").single(row)
        expected = generator.greedy(source)
        got = greedy(tf.constant(source))
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_allclose(got["log_probs"], expected["log_probs"], atol=1e-5)
        weights = np.asarray(got["attention"])
        np.testing.assert_allclose(
            weights[:, :, : source.shape[1]], expected["attention"], atol=1e-6
        )
        assert not weights[:, :, source.shape[1] :].any()


def test_static_width_refuses_a_source_of_static_length(generator):
    source = tf.constant(case("bahdanau_gru").single(1))
    with pytest.raises(ValueError, match="unknown length"):
        StaticWidth(generator, WIDTH).encode(source)
