"""Every Python block of README.md runs as printed."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), {})
    printed = capsys.readouterr().out
    # Every "# comment" after a print call states what it prints.
    for line in BLOCKS[index].splitlines():
        if line.startswith("print(") and "#" in line:
            expected = line.split("#", 1)[1].strip()
            expected = expected.split(": ", 1)[-1].split(" = ")[-1]
            assert expected in printed, (line, printed)
