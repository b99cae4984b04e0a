"""The tests that need data skip without it, but never under `CI=true`.

A skip in CI would let a test that guards a promise pass silently on a machine
where the data did not arrive; CI fails instead (as the browser tests do).
"""

import _data_paths
import pytest


@pytest.fixture
def no_cmudict(monkeypatch, tmp_path):
    monkeypatch.setattr(_data_paths, "cmudict_dir", lambda: tmp_path / "cmudict")


def test_missing_cmudict_fails_under_ci(no_cmudict, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the data is missing: CMUdict"):
        _data_paths.require_cmudict()


def test_missing_cmudict_skips_outside_ci(no_cmudict, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="CMUdict not found in"):
        _data_paths.require_cmudict()


def test_present_cmudict_is_its_folder(monkeypatch, tmp_path):
    (tmp_path / _data_paths.CMUDICT_TRAIN).write_text("")
    monkeypatch.setattr(_data_paths, "cmudict_dir", lambda: tmp_path)
    monkeypatch.setenv("CI", "true")
    assert _data_paths.require_cmudict() == tmp_path
