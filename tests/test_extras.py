"""Each install extra lists what README promises it brings, and none caps a
user's versions.

What these tests catch: an extra that lacks the distribution of a module its
README line promises (checked against the distributions that provide the
module in this environment, `importlib.metadata.packages_distributions`, not
against a table of names kept here), a command whose needs no extra brings,
and a version cap in a user extra. What they cannot catch: a distribution that
stops bringing a module it brought here, or extras that do not resolve
together from the registry (pip's dry run of one extra took 40 s here and
reads the network: tests/test_packaging.py checks the wheel's metadata holds
setup.cfg's extras).
"""

import configparser
import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from keras_attention.backend import check

SETUP = configparser.ConfigParser()
SETUP.read(Path(__file__).resolve().parents[1] / "setup.cfg", encoding="utf-8")
EXTRAS = SETUP["options.extras_require"]
# README's Install lines, as import names: what each extra must make importable.
TENSORFLOW_PROMISE = (
    # the layers and decoders on TensorFlow
    "tensorflow",
    # + translation: tf.data, the tokenizer, TensorBoard logs, scores, plots
    "tensorflow_text",
    "tensorboard",
    "sacrebleu",
    "sacremoses",
    "matplotlib",
    # + export and check_attention's TFLite promise
    "ai_edge_litert",
)
PROMISES = {
    "tensorflow": TENSORFLOW_PROMISE,
    "jax": ("jax",),
    "torch": ("torch",),
    "examples": TENSORFLOW_PROMISE,
    "dev": TENSORFLOW_PROMISE + ("jax", "torch", "pytest", "hypothesis", "ruff", "build", "twine"),
}
USER_EXTRAS = ("tensorflow", "jax", "torch", "examples")


def _requirements(text):
    return [Requirement(line) for line in text.strip().splitlines() if line.strip()]


def _names(text):
    return {canonicalize_name(requirement.name) for requirement in _requirements(text)}


@pytest.mark.parametrize("extra", sorted(PROMISES))
def test_extra_lists_a_distribution_of_every_module_it_promises(extra):
    providers = importlib.metadata.packages_distributions()
    listed = _names(EXTRAS[extra])
    for module in PROMISES[extra]:
        # The tests' environment (the dev extra) has every one installed.
        assert module in providers, f"{module} is not installed in the tests' environment"
        provided_by = {canonicalize_name(name) for name in providers[module]}
        assert provided_by & listed, f"[{extra}] lists none of {sorted(provided_by)} ({module})"


def test_every_extra_has_a_promise():
    assert set(PROMISES) | {"docs"} == set(EXTRAS)


def test_every_translator_need_is_promised_by_the_extra_its_message_names():
    needs = {module for modules in check.TRANSLATOR_NEEDS.values() for module in modules}
    assert needs <= set(check.OPTIONAL_PACKAGES)
    for module, (distribution, extra) in check.OPTIONAL_PACKAGES.items():
        assert module in PROMISES[extra], (module, extra)
        assert canonicalize_name(distribution) in _names(EXTRAS[extra])


@pytest.mark.parametrize("extra", USER_EXTRAS + ("install_requires",))
def test_user_requirements_set_no_upper_bound(extra):
    text = SETUP["options"]["install_requires"] if extra == "install_requires" else EXTRAS[extra]
    for requirement in _requirements(text):
        operators = {spec.operator for spec in requirement.specifier}
        assert operators <= {">="}, f"[{extra}] {requirement} caps a version"


# PyTorch's newest tested release, 2.14, is the CUDA build here (3.0 GB of
# wheels): the dev extra pins the CPU build of 2.13, and .ci/run's fresh
# environment of the torch extra alone resolves to 2.14.
NEWEST_AFTER_README_RUN = {"torch": (2, 13)}


@pytest.mark.parametrize("distribution", sorted(check.TESTED))
def test_dev_pins_the_newest_tested_release(distribution):
    # The tests run on the newest release of the tested range; .ci/run's
    # second environment on the oldest.
    pins = {canonicalize_name(r.name): r for r in _requirements(EXTRAS["dev"])}
    _, _, newest = check.TESTED[distribution]
    pinned = NEWEST_AFTER_README_RUN.get(distribution, newest)
    assert str(pins[distribution].specifier) == f"=={pinned[0]}.{pinned[1]}.*"
    if pinned != newest:
        ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
        assert re.search(rf"for extra in .*\b{distribution}\b.*; do", ci)
        assert 'pip install -q "$(echo dist/*.whl)[$extra]"' in ci


@pytest.mark.parametrize("distribution", sorted(check.TESTED))
def test_user_lower_bound_is_the_oldest_tested_release(distribution):
    texts = [SETUP["options"]["install_requires"]] + [EXTRAS[e] for e in USER_EXTRAS]
    bounds = {
        str(r.specifier)
        for text in texts
        for r in _requirements(text)
        if canonicalize_name(r.name) == distribution
    }
    _, oldest, _ = check.TESTED[distribution]
    assert bounds == {f">={oldest[0]}.{oldest[1]}"}
