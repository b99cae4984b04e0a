"""Argument types for command-line trainers: `type=` of `argparse`.

Each reads one option's text and returns its value, or raises
`argparse.ArgumentTypeError` saying what was expected; argparse then prints
one line naming the option (`--batch-size: expected a positive integer, got
0`) and exits with status 2.

```python
parser.add_argument("--batch-size", type=positive_int, default=128)
```
"""

import argparse
import math


def _number(text, parse, accept, expected):
    """`parse(text)` if it parses and `accept`s it; else the one-line error
    "expected EXPECTED, got TEXT" (NaN is accepted by no range)."""
    try:
        value = parse(text)
    except ValueError:
        value = math.nan
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
    return value


def positive_int(text):
    """An integer of 1 or more."""
    return _number(text, int, lambda v: v >= 1, "a positive integer")


def non_negative_int(text):
    """An integer of 0 or more (0 often meaning "the default" or "none")."""
    return _number(text, int, lambda v: v >= 0, "0 or more")


def positive_float(text):
    """A finite number above 0."""
    return _number(text, float, lambda v: 0.0 < v < math.inf, "a positive number")


def unit_interval(text):
    """A number in [0, 1): a dropout rate, a label smoothing."""
    return _number(text, float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


def positive_int_up_to(bound, reason):
    """The type of an option that takes an integer from 1 to `bound`: 0 or
    less is "expected a positive integer", more than `bound` "expected an
    integer from 1 to BOUND (REASON)".

    Args:
        bound: the largest value accepted.
        reason: what the bound is, e.g. "the widest beam".
    """

    def up_to_bound(text):
        value = positive_int(text)
        if value > bound:
            raise argparse.ArgumentTypeError(
                f"expected an integer from 1 to {bound} ({reason}), got {text}"
            )
        return value

    up_to_bound.__name__ = f"integer from 1 to {bound}"
    return up_to_bound


def comma_separated(choices):
    """The type of an option that takes some of `choices`, comma-separated
    ("float32,int8"): it returns their list, in the order given, without
    empty items.

    Args:
        choices: the names an item may be.
    """
    choices = tuple(choices)

    def some_of(text):
        items = [item for item in text.split(",") if item]
        unknown = [item for item in items if item not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown)}; choose among {', '.join(choices)}"
            )
        return items

    some_of.__name__ = "comma-separated list"
    return some_of
