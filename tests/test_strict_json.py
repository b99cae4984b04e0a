"""Every JSON file the package writes parses with a strict parser: JSON has no
NaN or infinity, so a float that is not finite is written as `null`."""

import json
import math

import pytest

from keras_attention.files.atomic import write_json


def strict_loads(text):
    """`json.loads` that refuses `NaN`, `Infinity` and `-Infinity`, as
    browsers' `JSON.parse` and `jq` do."""

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_the_strict_parser_refuses_what_python_writes_for_nan():
    with pytest.raises(ValueError, match="not JSON: NaN"):
        strict_loads(json.dumps({"bleu": math.nan}))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_that_is_not_finite_is_written_as_null_at_any_depth(tmp_path, value):
    data = {"bleu": value, "by_length": [{"bucket": "1-10", "bleu": value}, (value, 2.5)]}
    write_json(tmp_path / "results.json", data)
    assert strict_loads((tmp_path / "results.json").read_text(encoding="utf-8")) == {
        "bleu": None,
        "by_length": [{"bucket": "1-10", "bleu": None}, [None, 2.5]],
    }


def test_finite_values_are_written_as_they_were(tmp_path):
    data = {"bleu": 52.63, "n": 1000, "ok": True, "name": "NaN", "none": None, "x": [0.0, -1e-300]}
    write_json(tmp_path / "results.json", data)
    assert strict_loads((tmp_path / "results.json").read_text(encoding="utf-8")) == data
