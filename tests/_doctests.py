"""Running the examples of a class's docstring, as the tests of each layer do."""

import doctest


def assert_docstring_examples_run(cls, globs=None):
    """Runs every `>>>` example of `cls`'s own docstring; fails on none or on
    any that fails. `globs`: the names the examples use besides the class."""
    names = {cls.__name__: cls, **(globs or {})}
    examples = doctest.DocTestFinder(recurse=False).find(cls, globs=names)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for example in examples:
        runner.run(example)
    assert runner.tries > 0, f"{cls.__name__}'s docstring has no example"
    assert runner.failures == 0, f"{runner.failures} example(s) of {cls.__name__} failed"
