"""`.keras` files saved by keras_attention 0.1.0 load with identical outputs.

The files in `tests/data/legacy_0_1/` were written once by the code of that
version (`make_fixtures.py` there), with the outputs it computed stored
beside them; they are not regenerated. Every attention kind, in both
decoders, must load with today's code and give those outputs again.
"""

from pathlib import Path

import keras
import numpy as np
import pytest

import keras_attention  # noqa: F401  (registers the layers)

FOLDER = Path(__file__).parent / "data" / "legacy_0_1"
NAMES = sorted(path.stem for path in FOLDER.glob("*.keras"))


def test_every_legacy_file_is_present():
    assert len(NAMES) == 12
    for name in NAMES:
        assert (FOLDER / f"{name}.npz").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_legacy_file_loads_with_identical_outputs(name):
    keras.backend.clear_session()
    stored = np.load(FOLDER / f"{name}.npz")
    model = keras.saving.load_model(FOLDER / f"{name}.keras")
    logits, weights = model.predict([stored["source"], stored["target"]], verbose=0)
    np.testing.assert_allclose(logits, stored["logits"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weights, stored["weights"], rtol=1e-5, atol=1e-6)
