"""The documentation cannot drift from the code.

- Every ```python block of docs/*.md runs (one test per block, named after the
  page and the block's index). The blocks of one page share one namespace and
  run in order, like the cells of a notebook, so that a page can build on what
  its earlier blocks defined (the error helper of debugging_shapes.md, the
  tokenizers of translation.md); each page starts from an empty namespace in a
  temporary folder of its own. Run alone, a block first runs the blocks before
  it. Only ```python blocks run: ```bash blocks are commands for the real data
  and a trained model, ```text blocks show output or signatures.
- The commands that the docs copy from README.md and from the translator's
  `--help` are still the real ones.
- `mkdocs build --strict` (with the API reference generated from the
  docstrings) succeeds.
- Every test that docs/reliability.md names as checking a guarantee exists.
"""

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from keras_attention.translation import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)
# Languages that would hide Python from the tests: write ```python instead.
UNTESTED_PYTHON = {"py", "py3", "python3", "pycon", "ipython"}


def code_blocks(text, language):
    return [body for lang, body in FENCE.findall(text) if lang.strip() == language]


def python_blocks(page):
    return code_blocks(page.read_text(encoding="utf-8"), "python")


BLOCKS = [(page.name, index) for page in PAGES for index in range(len(python_blocks(page)))]

# page name -> {"namespace", "next" (index of the next block to run), "folder"}
_page_runs = {}


def _run_block(page_name, index, run):
    block = python_blocks(DOCS / page_name)[index]
    code = compile(block, f"docs/{page_name} block {index}", "exec")
    cwd = os.getcwd()
    os.chdir(run["folder"])  # (contextlib.chdir needs Python 3.11)
    try:
        exec(code, run["namespace"])
    finally:
        os.chdir(cwd)
        keras.config.set_dtype_policy("float32")


def test_docs_have_python_blocks():
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(("page_name", "index"), BLOCKS, ids=[f"{p}-{i}" for p, i in BLOCKS])
def test_docs_block_runs(page_name, index, tmp_path_factory):
    run = _page_runs.get(page_name)
    if run is None or run["next"] > index:
        run = {
            "namespace": {"__name__": f"docs_{Path(page_name).stem}"},
            "next": 0,
            "folder": tmp_path_factory.mktemp(Path(page_name).stem),
        }
        _page_runs[page_name] = run
    try:
        while run["next"] < index:  # the blocks this one builds on
            earlier = run["next"]
            try:
                _run_block(page_name, earlier, run)
            except Exception as error:
                raise AssertionError(
                    f"docs/{page_name} block {earlier}, which block {index} builds on, failed"
                ) from error
            run["next"] += 1
        _run_block(page_name, index, run)
        run["next"] += 1
    except BaseException:
        # A failed block leaves the namespace half-built: start the page over.
        _page_runs.pop(page_name, None)
        raise


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_code_is_fenced_as_python(page):
    languages = {lang.strip() for lang, _ in FENCE.findall(page.read_text(encoding="utf-8"))}
    assert not languages & UNTESTED_PYTHON, "use ```python so that the block runs"


def test_getting_started_copies_the_readme_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (DOCS / "getting_started.md").read_text(encoding="utf-8")
    commands = [line for block in code_blocks(readme, "bash") for line in block.splitlines()]
    assert any("run_translator.sh" in line for line in commands)
    assert any("pytest" in line for line in commands)
    for line in commands:
        assert line in page, f"README command not in docs/getting_started.md: {line}"


def _translator_help():
    texts = []
    for argv in ([], ["train"], ["evaluate"], ["translate"], ["explain"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            cli.parse_args([*argv, "--help"])
        texts.append(out.getvalue())
    return "\n".join(texts)


def test_translation_page_documents_every_option():
    options = set(re.findall(r"(--[a-z][a-z-]*)", _translator_help())) - {"--help"}
    assert {"--data-dir", "--run-dir", "--preset", "--heatmaps", "--seed"} <= options
    page = (DOCS / "translation.md").read_text(encoding="utf-8")
    missing = sorted(option for option in options if f"`{option}`" not in page)
    assert not missing, f"options of the translator CLI missing from translation.md: {missing}"


def test_site_builds_with_mkdocs_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip(
        "mkdocstrings_handlers.python",
        reason="mkdocstrings[python] is not installed: pip install -e '.[docs]'",
    )
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in (
        "BahdanauAttention",
        "LuongDecoder",
        "beam_search",
        "SubwordTokenizer",
        "check_attention",
    ):
        assert name in api


def test_every_test_the_reliability_page_names_exists():
    named = set(re.findall(r"`(test_\w+)", (DOCS / "reliability.md").read_text()))
    defined = set()
    for path in (ROOT / "tests").glob("*.py"):
        defined |= set(re.findall(r"^\s*def (test_\w+)", path.read_text(), re.M))
    assert named, "docs/reliability.md names no test"
    assert sorted(named - defined) == []
