"""Where the tests find the Multi30k files.

`$KERAS_ATTENTION_MULTI30K_DIR` if set, else `../shared/data/multi30k` next to the
repository root.
"""

import os
from pathlib import Path

MULTI30K_ENV_VAR = "KERAS_ATTENTION_MULTI30K_DIR"


def multi30k_dir() -> Path:
    override = os.environ.get(MULTI30K_ENV_VAR)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


def require_multi30k() -> str:
    """The Multi30k folder as a string; fails the calling test when its
    training file is missing (the translator's tests need the real data)."""
    import pytest

    folder = multi30k_dir()
    if not (folder / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {folder} (see tests/_data_paths.py)")
    return str(folder)


CMUDICT_TRAIN = "cmudict-0.7b.train"


def cmudict_dir() -> Path:
    """The CMUdict folder (`../shared/data/cmudict` next to the repository root)."""
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "cmudict"


def missing_cmudict() -> str | None:
    """Why the CMUdict tests cannot run, or None when the files are there."""
    if (cmudict_dir() / CMUDICT_TRAIN).exists():
        return None
    return f"CMUdict not found in {cmudict_dir()}"


def require_cmudict():
    """Skips the calling test when CMUdict is missing, and fails it under
    `CI=true`, where the data must be there (as the Multi30k tests do)."""
    import pytest

    reason = missing_cmudict()
    if reason is None:
        return cmudict_dir()
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the data is missing: {reason}")
    pytest.skip(reason)
