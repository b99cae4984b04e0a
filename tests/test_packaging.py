"""The distribution users install: the sdist and the wheel `python -m build`
makes from this tree, their metadata, and the installed copy's version."""

import ast
import configparser
import email
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import keras_attention

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "keras-seq2seq-attention"
# The names the wheel's files start with: the package and its metadata.
WHEEL_STEM = DISTRIBUTION.replace("-", "_")
SETUP = configparser.ConfigParser()
SETUP.read(ROOT / "setup.cfg")


def _source_version():
    """`__version__` as written in the source tree's keras_attention/__init__.py."""
    tree = ast.parse((ROOT / "keras_attention" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__version__"]:
            return node.value.value
    raise AssertionError("keras_attention/__init__.py sets no __version__")


def _package_files():
    """Every file of the source package a wheel must carry, as wheel paths."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "keras_attention").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel built from it, as `python -m build` makes them.

    Without build isolation (the dev extra's setuptools, no download): about
    5 s. The wheel is built from the unpacked sdist, so a file missing from
    the sdist is missing from the wheel too.
    """
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def metadata(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        text = wheel.read(f"{WHEEL_STEM}-{_source_version()}.dist-info/METADATA").decode()
    return email.message_from_string(text)


def test_wheel_holds_the_package_modules_and_nothing_else(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
    package = {name for name in names if name.startswith("keras_attention/")}
    info = names - package
    assert package == _package_files()
    # No tests, benchmarks, examples, web/ or node_modules/ beside the package.
    assert {name.split("/")[0] for name in info} == {f"{WHEEL_STEM}-{_source_version()}.dist-info"}
    assert {name.split("/", 1)[1] for name in info} == {
        "METADATA",
        "WHEEL",
        "RECORD",
        "entry_points.txt",
        "top_level.txt",
        "licenses/LICENSE",
    }


def test_sdist_holds_what_builds_the_wheel_and_no_tests(dist):
    stem = f"{WHEEL_STEM}-{_source_version()}"
    with tarfile.open(dist["sdist"]) as sdist:
        names = {name.removeprefix(f"{stem}/") for name in sdist.getnames()}
    for required in ("README.md", "LICENSE", "CHANGELOG.md", "setup.cfg", "pyproject.toml"):
        assert required in names
    assert _package_files() <= names
    assert not [name for name in names if name.startswith(("tests", "web", "node_modules"))]


def test_metadata_names_the_distribution_version_and_license(metadata):
    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Version"] == _source_version()
    assert metadata["Requires-Python"] == ">=3.10"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]


def test_metadata_description_is_the_readme(metadata):
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().strip() == (ROOT / "README.md").read_text().strip()


def test_metadata_extras_and_requirements_are_setup_cfgs(metadata):
    extras = SETUP["options.extras_require"]
    assert set(metadata.get_all("Provides-Extra")) == set(extras)
    for extra in ("dev", "examples", "tensorflow"):
        declared = {line for line in extras[extra].strip().splitlines() if line}
        written = {
            requirement.split(";")[0].strip()
            for requirement in metadata.get_all("Requires-Dist")
            if f'extra == "{extra}"' in requirement
        }
        assert {Requirement(r) for r in written} == {Requirement(r) for r in declared}


def test_classifiers_are_known_to_the_index(metadata):
    trove_classifiers = pytest.importorskip("trove_classifiers")
    classifiers = metadata.get_all("Classifier")
    assert classifiers
    unknown = [c for c in classifiers if c not in trove_classifiers.classifiers]
    assert not unknown, f"not trove classifiers (the index refuses them): {unknown}"


def test_console_script_is_in_the_wheel(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        entry_points = wheel.read(f"{WHEEL_STEM}-{_source_version()}.dist-info/entry_points.txt")
    assert (
        "keras-attention-translate = keras_attention.translation.cli:console_main"
        in entry_points.decode()
    )


def test_twine_check_accepts_the_sdist_and_the_wheel(dist):
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_installed_metadata_version_is_the_packages_version():
    assert importlib.metadata.version(DISTRIBUTION) == keras_attention.__version__
    assert keras_attention.__version__ == _source_version()
    # An installed wheel: the metadata beside the imported package says so too
    # (not an egg-info that a build left in the repository).
    site = Path(keras_attention.__file__).resolve().parents[1]
    if site != ROOT:
        (beside,) = [
            d
            for d in importlib.metadata.distributions(path=[str(site)])
            if d.metadata["Name"] == DISTRIBUTION
        ]
        assert beside.version == keras_attention.__version__


def test_changelog_has_an_unreleased_section_and_this_version():
    headings = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert headings[0] == "Unreleased"
    assert headings[1].startswith(f"{_source_version()} (")


def test_no_install_line_names_another_projects_distribution():
    # "keras-attention" on the index is someone else's 2019 package.
    paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    paths += (ROOT / "keras_attention").rglob("*.py")
    paths += (ROOT / "examples").glob("*.py")
    offending = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"pip install\s+[\"']?keras-attention\b", line)
    ]
    assert not offending


def _console_script(name):
    """The installed console script `name`, beside the running Python."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is not installed beside {sys.executable}: pip install the package")
    return path


def test_console_script_help_agrees_with_readme():
    script = "keras-attention-translate"
    result = subprocess.run(
        [_console_script(script), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"usage: {script} ")
    listed = re.search(r"\{([a-z,]+)\}", result.stdout).group(1).split(",")
    readme = " ".join((ROOT / "README.md").read_text().split())
    sentence = re.search(
        rf"`{script}` \(or `python -m keras_attention.translation`\) with (.+?), walked", readme
    ).group(1)
    assert sorted(re.findall(r"`([a-z]+)`", sentence)) == sorted(listed)


def test_ci_runs_readmes_test_command_on_the_installed_wheel():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Run the tests.*?```bash\n(.+?)\n```", readme, flags=re.S).group(1)
    (command,) = block.splitlines()  # one line
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci
    assert "python -m build" in command and '"$(echo dist/*.whl)[dev]"' in command
    assert "pip install -e" not in command
    assert "KERAS_ATTENTION_TEST_INSTALLED=1 bash tests/run_all_backends.sh" in command
    # The oldest-Keras environment installs the same wheel, with the
    # tensorflow extra alone.
    assert any(line.startswith('    pip install "$(echo dist/*.whl)[tensorflow]" ') for line in ci)
