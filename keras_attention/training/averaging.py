"""Checkpoint averaging: the mean of a run's weights over its last epochs.

`train --keep-epochs` saves the weights after every epoch in
`RUN_DIR/epochs/epoch_NNN.weights.h5`. Averaging the last few (Vaswani et
al., 2017; Junczys-Dowmunt et al., 2016) gives one model with the cost of one
at decoding time.
"""

import re
from pathlib import Path

import numpy as np

from keras_attention.arguments.validation import check_positive_int
from keras_attention.files.reading import require_regular_file

EPOCHS_DIR = "epochs"
_EPOCH_FILE = re.compile(r"^epoch_(\d+)\.weights\.h5$")


def epoch_weight_path(run_dir, epoch):
    """`RUN_DIR/epochs/epoch_NNN.weights.h5` for a 1-based epoch number."""
    return Path(run_dir) / EPOCHS_DIR / f"epoch_{epoch:03d}.weights.h5"


def saved_epochs(run_dir):
    """The 1-based epoch numbers with saved weights in `run_dir`, ascending."""
    folder = Path(run_dir) / EPOCHS_DIR
    if not folder.is_dir():
        return []
    found = (_EPOCH_FILE.match(p.name) for p in folder.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def last_epochs(run_dir, count):
    """The last `count` saved epoch numbers of a run.

    Raises:
        ValueError: `count` is not a positive int, or the run has fewer saved
            epochs (the message says how many and where they were looked for).
    """
    check_positive_int("count", count)
    epochs = saved_epochs(run_dir)
    if len(epochs) < count:
        raise ValueError(
            f"Cannot average the last {count} epochs: {Path(run_dir) / EPOCHS_DIR} holds "
            f"{len(epochs)} ({', '.join(map(str, epochs)) or 'none'}). Train with "
            "`--keep-epochs` to save the weights of every epoch."
        )
    return epochs[-count:]


def average_weights(model, paths):
    """Sets `model`'s weights to the mean of the weight files `paths`.

    Floating-point variables get the mean, computed in float64 and cast back
    to each variable's dtype. Other variables (integer counters) keep the
    values of the last file.

    Args:
        model: a built model with the architecture the files were saved from.
        paths: weight files written by `model.save_weights`, in epoch order.

    Returns:
        `model`, with the averaged weights.

    Raises:
        ValueError: `paths` is empty.
        FileNotFoundError: a file is missing (named in the message).
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("Expected at least one weight file to average. Received none.")
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"No weight file at {path}")
        require_regular_file(path, "weight file")  # a FIFO would hang the loading
    variables = model.weights
    floating = [str(v.dtype).startswith(("float", "bfloat")) for v in variables]
    sums = None
    for path in paths:
        model.load_weights(path)
        values = [np.asarray(v.numpy(), dtype=np.float64) for v in variables]
        sums = values if sums is None else [s + v for s, v in zip(sums, values, strict=True)]
    # The last file is loaded: non-float variables keep its values.
    for variable, total, is_float in zip(variables, sums, floating, strict=True):
        if is_float:
            variable.assign((total / len(paths)).astype(variable.dtype))
    return model
