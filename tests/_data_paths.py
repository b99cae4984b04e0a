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
