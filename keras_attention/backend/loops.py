"""A scan over time that compiles, differentiates and runs under XLA.

`keras.ops.scan` on TensorFlow builds a `while` loop without
`maximum_iterations`, which XLA cannot differentiate ("XLA compilation requires
a fixed tensor list size"), and it stacks only outputs shaped like the carry.
On TensorFlow this module builds the loop the way Keras' own RNN layers do
(TensorArrays and a bounded `while_loop`); on other backends it defers to
`keras.ops.scan`.
"""

import keras


def scan(step, init, xs):
    """Runs `carry, ys = step(carry, x)` over the leading axis of `xs`.

    `ys` must have the structure, shapes and dtypes of `carry`
    (the contract of `keras.ops.scan`). Returns `(last_carry, stacked_ys)` with
    the time axis first.
    """
    if keras.backend.backend() != "tensorflow":
        return keras.ops.scan(step, init, xs)
    import tensorflow as tf

    flat_xs = [tf.convert_to_tensor(x) for x in keras.tree.flatten(xs)]
    flat_init = [tf.convert_to_tensor(c) for c in keras.tree.flatten(init)]
    length = tf.shape(flat_xs[0])[0]
    xs_arrays = [
        tf.TensorArray(x.dtype, size=length, element_shape=x.shape[1:]).unstack(x) for x in flat_xs
    ]
    ys_arrays = [tf.TensorArray(c.dtype, size=length, element_shape=c.shape) for c in flat_init]

    def body(t, carry, ys_arrays):
        x = keras.tree.pack_sequence_as(xs, [a.read(t) for a in xs_arrays])
        carry, ys = step(keras.tree.pack_sequence_as(init, carry), x)
        flat_ys = keras.tree.flatten(ys)
        ys_arrays = [a.write(t, y) for a, y in zip(ys_arrays, flat_ys, strict=True)]
        return t + 1, keras.tree.flatten(carry), ys_arrays

    _, last, ys_arrays = tf.while_loop(
        lambda t, *_: t < length,
        body,
        (tf.constant(0), flat_init, ys_arrays),
        maximum_iterations=length,
    )
    stacked = [a.stack() for a in ys_arrays]
    return (
        keras.tree.pack_sequence_as(init, last),
        keras.tree.pack_sequence_as(init, stacked),
    )
