"""The search of a generator compiled for the Keras backend.

TensorFlow traces it once with `tf.function` (the output bound a tensor, so no
retracing per length); JAX compiles it with `jax.jit` once per source shape and
output bound, the variables' values passed in at every call; PyTorch runs it
eagerly.
"""

import keras
from keras import ops


def compile_search(fn, variables):
    """`fn(source, max_length)` compiled for the backend.

    Args:
        fn: the search, `fn(source, max_length) -> dict of tensors`.
        variables: a function returning the variables `fn` reads (JAX passes
            their current values in, so weights trained after the first call
            are used without compiling again).

    Returns:
        A callable `(source, max_length) -> dict of tensors`.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        traced = tf.function(fn, reduce_retracing=True)
        return lambda s, n: traced(s, ops.convert_to_tensor(n, "int32"))
    if backend == "jax":
        return _jax_jit(fn, variables)
    return lambda s, n: fn(s, ops.convert_to_tensor(n, "int32"))


def _jax_jit(fn, variables):
    """`fn(source, max_length)` under `jax.jit`, max_length static.

    The values of `variables()` are arguments of the compiled function (read
    through a `keras.StatelessScope`), not constants captured when it is
    traced: a generator called, trained further and called again decodes with
    the new weights without compiling again.
    """
    import jax

    def pure(values, source, max_length):
        with keras.StatelessScope(state_mapping=list(zip(variables(), values, strict=True))):
            return fn(source, max_length)

    jitted = jax.jit(pure, static_argnums=2)

    def call(source, max_length):
        return jitted([v.value for v in variables()], source, int(max_length))

    return call


def is_eager(x):
    """Whether `x` holds values (not a symbolic or traced tensor) on TensorFlow;
    always True on the other backends, whose searches are checked eagerly."""
    if keras.backend.backend() != "tensorflow":
        return True
    import tensorflow as tf

    return tf.executing_eagerly() and not isinstance(x, keras.KerasTensor)
