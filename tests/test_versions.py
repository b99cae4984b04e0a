"""Releases outside the tested range: one warning at import, naming the range."""

import importlib.metadata
import os
import subprocess
import sys
import warnings

import pytest

from keras_attention.backend import check


def _versions(**installed):
    """A stand-in for `importlib.metadata.version` with these releases."""

    def version(distribution):
        if distribution not in installed:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return installed[distribution]

    return version


def _warnings(backend, **installed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check.warn_untested_versions(backend, _versions(**installed))
    return caught


def test_tested_releases_give_no_warning():
    assert not _warnings("tensorflow", keras="3.15.1", tensorflow="2.21.0")
    assert not _warnings("torch", keras="3.12.0", torch="2.13.0+cpu")
    assert not _warnings("torch", keras="3.15.1", torch="2.14.1+cu130")
    assert not _warnings("jax", keras="3.13.2", jax="0.10.2")


@pytest.mark.parametrize(
    "backend, installed, expected",
    [
        (
            "tensorflow",
            {"keras": "3.16.0", "tensorflow": "2.21.0"},
            "Keras 3.16.0 (tested: 3.12 to 3.15)",
        ),
        (
            "tensorflow",
            {"keras": "3.15.1", "tensorflow": "2.22.0rc0"},
            "TensorFlow 2.22.0rc0 (tested: 2.16 to 2.21)",
        ),
        ("jax", {"keras": "3.15.1", "jax": "0.12.0"}, "JAX 0.12.0 (tested: 0.10)"),
        ("torch", {"keras": "3.15.1", "torch": "2.15.0"}, "PyTorch 2.15.0 (tested: 2.13 to 2.14)"),
        (
            "tensorflow",
            {"keras": "3.11.3", "tensorflow": "2.21.0"},
            "Keras 3.11.3 (tested: 3.12 to 3.15)",
        ),
    ],
)
def test_a_release_outside_the_range_gives_one_warning_naming_it(backend, installed, expected):
    caught = _warnings(backend, **installed)
    assert len(caught) == 1
    assert caught[0].category is check.UntestedVersionWarning
    assert expected in str(caught[0].message)


def test_keras_and_backend_outside_the_range_give_one_warning_naming_both():
    caught = _warnings("torch", keras="3.16.0", torch="2.15.0")
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "Keras 3.16.0 (tested: 3.12 to 3.15)" in message
    assert "PyTorch 2.15.0 (tested: 2.13 to 2.14)" in message
    assert "\n" not in message


def test_only_the_selected_backend_is_checked():
    # A PyTorch beside the TensorFlow backend is not the package's concern.
    assert not _warnings("tensorflow", keras="3.15.1", tensorflow="2.21.0", torch="2.15.0")


def test_a_backend_that_is_not_installed_gives_no_warning():
    assert not _warnings("jax", keras="3.15.1")


def test_the_warning_can_be_filtered_by_its_category_and_by_its_message():
    for how in ({"category": check.UntestedVersionWarning}, {"message": "Untested release"}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", **how)
            check.warn_untested_versions("tensorflow", _versions(keras="3.16.0"))
        assert not caught, how


@pytest.mark.parametrize(
    "environ, keras_json, expected",
    [
        ({"KERAS_BACKEND": "jax"}, '{"backend": "torch"}', "jax"),
        ({}, '{"backend": "torch"}', "torch"),
        ({}, None, "tensorflow"),
        ({}, "not json", "tensorflow"),
    ],
)
def test_selected_backend_reads_it_as_keras_does(
    environ, keras_json, expected, tmp_path, monkeypatch
):
    # Before Keras is imported (check.py runs first); here Keras is imported.
    monkeypatch.delitem(sys.modules, "keras")
    if keras_json is not None:
        (tmp_path / "keras.json").write_text(keras_json, encoding="utf-8")
    assert check.selected_backend({**environ, "KERAS_HOME": str(tmp_path)}) == expected


def test_importing_the_package_with_an_untested_keras_warns_once():
    # The package root imports backend.check first: the warning comes at
    # `import keras_attention`, once, before Keras is imported.
    script = (
        "import importlib.metadata as m, sys\n"
        "real = m.version\n"
        "m.version = lambda name: '3.99.0' if name == 'keras' else real(name)\n"
        "import keras_attention\n"
        "import keras_attention.backend.check\n"
    )
    # JAX and PyTorch import faster than TensorFlow; .ci/run's environments of
    # one extra each have one backend (the oldest: TensorFlow alone).
    env = {key: value for key, value in os.environ.items() if key != "KERAS_BACKEND"}
    for backend in ("jax", "torch"):
        if backend in check.installed_backends():
            env["KERAS_BACKEND"] = backend
            break
    result = subprocess.run(
        [sys.executable, "-W", "always", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "UntestedVersionWarning" in line]
    assert len(lines) == 1, result.stderr
    assert "Keras 3.99.0 (tested: 3.12 to 3.15)" in lines[0]


@pytest.mark.parametrize("backend", sorted(set(check.TESTED) - {"keras"}))
def test_the_tests_run_on_tested_releases(backend):
    # README's test command (the dev extra), and .ci/run's oldest environment and
    # its newest PyTorch.
    if backend not in check.installed_backends():
        pytest.skip(f"{backend} is not installed here")
    assert check.untested_versions(backend) == []
