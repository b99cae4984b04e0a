"""Argument checks shared by the layers and the translation toolkit."""

import functools
import inspect
import numbers


def check_positive_int(name, value, allow_none=False):
    """Raises `ValueError` unless `value` is a positive integer.

    A Python int or a NumPy integer (`np.int64(4)`, read from an array) is
    accepted; callers that need a Python int take `int(value)`. A `bool` is
    refused although Python counts it as an `int`: `units=True` is a mistake,
    not 1. So are floats, even whole ones, and strings of digits.

    Args:
        name: the argument's name, as the message prints it.
        value: the value received.
        allow_none: also accept None (an optional size).

    Raises:
        ValueError: "Invalid value for argument `name`. Expected a positive
            integer. Received: name=value" (with "or None" when allowed).
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        expected = "a positive integer or None" if allow_none else "a positive integer"
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected {expected}. Received: {name}={value!r}"
        )


def check_same_count(first, second, first_name, second_name, unit):
    """Raises `ValueError` unless two parallel sequences hold as many items.

    Args:
        first: a sized sequence (e.g. source lines).
        second: the sequence that must match it item for item.
        first_name: how the message names `first` (a file, an argument).
        second_name: likewise for `second`.
        unit: what one item is, plural ("lines", "sentences").
    """
    if len(first) != len(second):
        raise ValueError(
            f"{first_name} and {second_name} are not aligned: {first_name} has "
            f"{len(first)} {unit}, {second_name} has {len(second)}."
        )


def bound_arguments(method, args, kwargs):
    """The arguments `method` takes, by name, defaults filled in, from `args`, `kwargs`.

    A method that takes what another takes (`compute_output_spec` what `call`
    takes, an override what the method it overrides takes) is written
    `(*args, **kwargs)` and binds them here: the list stays in one signature.
    An override's `attend_step` runs at every decoder step when a backend runs
    eagerly, so the signature is read once per function, not at every call.
    """
    function = getattr(method, "__func__", method)
    if function is not method:  # a bound method: its instance is the first argument
        args = (method.__self__, *args)
    bound = _signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = bound.arguments
    if function is not method:
        arguments.pop(next(iter(arguments)))  # `self`, which the caller did not pass
    return arguments


@functools.cache
def _signature(function):
    return inspect.signature(function)
