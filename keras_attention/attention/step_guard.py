"""No random draw inside an attention step: a guard that makes one an error.

A step runs inside a loop over time (a scan on JAX, a `while_loop` on
TensorFlow, a `WHILE` in an exported model). A draw there leaks a tracer on
JAX, makes the exported function stateful on TensorFlow (the export then fails
with messages that name neither the draw nor the step), and differs between
backends. The contract draws before the loop, in `step_noise`.

`no_random_draws(method)` is a context manager: while it is open in a thread,
every `keras.random.*` function and every `keras.random.SeedGenerator.next`
(what a `Dropout` layer or a seeded draw calls) raises `RandomDrawInStepError`
naming `method` and pointing to `step_noise`. The check runs in Python, when
the step is traced or run, so it fires at trace time on every backend, in
`fit`, in generation and at export.

The hooks are Keras' public names (`keras.random` and its `SeedGenerator`),
wrapped once, on the first use of the guard; the wrappers cost one
thread-local read per draw outside a step. A draw that reaches a backend's
random kernels without either (an unseeded `keras.layers.Dropout` on PyTorch
calls the backend directly) is not seen: the public hooks reach no further
without importing `keras.src`.
"""

import contextlib
import functools
import threading

import keras

_local = threading.local()
_lock = threading.Lock()
_installed = False


class RandomDrawInStepError(RuntimeError):
    """A random number was drawn inside an attention step (see the module docstring)."""


def _active_method():
    stack = getattr(_local, "methods", None)
    return stack[-1] if stack else None


def _refuse(what):
    method = _active_method()
    if method is None:
        return
    raise RandomDrawInStepError(
        f"{method} drew random numbers ({what}) inside an attention step. A step "
        "runs inside a loop over time (a scan on JAX, a while loop on TensorFlow, a "
        "WHILE in an exported model), where a draw leaks a tracer or makes the "
        "exported function stateful. Draw the numbers of every step before the "
        "loop: override `step_noise(shape, training)` to return them, (T_dec, batch, "
        "...), and read this step's slice as the `noise` argument of step_weights "
        "(docs/custom_attention.md, 'Random numbers: before the loop')."
    )


def _guarded_function(name, function):
    @functools.wraps(function)
    def guarded(*args, **kwargs):
        _refuse(f"keras.random.{name}")
        return function(*args, **kwargs)

    guarded._keras_attention_guard = True
    return guarded


def _install():
    """Wraps the public draws of `keras.random` once, for every thread."""
    global _installed
    with _lock:
        if _installed:
            return
        generator = keras.random.SeedGenerator
        next_draw = generator.next

        @functools.wraps(next_draw)
        def guarded_next(self, *args, **kwargs):
            _refuse(f"SeedGenerator.next of {self.name!r}")
            return next_draw(self, *args, **kwargs)

        generator.next = guarded_next
        for name in dir(keras.random):
            function = getattr(keras.random, name)
            if name.startswith("_") or name == "SeedGenerator" or not callable(function):
                continue
            if not getattr(function, "_keras_attention_guard", False):
                setattr(keras.random, name, _guarded_function(name, function))
        _installed = True


@contextlib.contextmanager
def no_random_draws(method):
    """Inside the block, a random draw in this thread raises `RandomDrawInStepError`.

    Args:
        method: what runs inside, as the message names it
            (e.g. "MyAttention.step_weights").
    """
    _install()
    stack = getattr(_local, "methods", None)
    if stack is None:
        stack = _local.methods = []
    stack.append(method)
    try:
        yield
    finally:
        stack.pop()
