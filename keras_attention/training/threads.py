"""`set_intra_op_threads`: TensorFlow's threads per operation, set before it starts."""

import sys


def set_intra_op_threads(threads):
    """Sets TensorFlow's threads per operation; 0 or None leaves its default.

    With one thread per operation, TensorFlow runs independent operations
    side by side (a bidirectional RNN's two directions, the gradients of
    different layers) instead of splitting each small matrix product over the
    cores: on a 2-core CPU a training step of the G2P example's recipe takes
    0.8 times as long (benchmarks/g2p_step_time.py). It must be set before
    TensorFlow runs anything; when it has already started (a model built
    earlier in the same process), a note on stderr says so and nothing
    changes. Only TensorFlow reads it; it is imported here, not before.

    Args:
        threads: int, 0 or more.

    Raises:
        ValueError: `threads` is negative.
    """
    if threads is not None and threads < 0:
        raise ValueError(
            "Invalid value for argument `threads`. Expected 0 or more. "
            f"Received: threads={threads!r}"
        )
    if not threads:
        return
    import tensorflow as tf

    threading = tf.config.threading
    if threading.get_intra_op_parallelism_threads() == threads:
        return
    try:
        threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:
        print(
            f"Note: {threads} intra-op threads not applied: TensorFlow has already "
            f"started in this process with {threading.get_intra_op_parallelism_threads()} "
            "(0: its default)",
            file=sys.stderr,
        )
