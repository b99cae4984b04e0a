"""Tests of the Multi30k loader (keras_attention.translation.data)."""

import gzip
import hashlib
import logging
import shutil
import tempfile
from pathlib import Path

import keras
import pytest
from _data_paths import multi30k_dir
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_attention.translation import data

DATA_DIR = multi30k_dir()
ENV_VAR = "KERAS_ATTENTION_MULTI30K_DIR"
URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# Pair counts as published (data README), not taken from the module.
PUBLISHED_SIZES = {
    "train": 29000,
    "val": 1014,
    "test_2016_flickr": 1000,
    "test_2017_flickr": 1000,
    "test_2017_mscoco": 461,
}


def _published_hashes():
    lines = (DATA_DIR / "SHA256SUMS").read_text().split("\n")
    return {name: digest for digest, name in (line.split() for line in lines if line)}


def _raw_lines(path):
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]


def _write(path, lines, compress=True):
    raw = b"".join(
        (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in lines
    )
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def _no_network(monkeypatch):
    calls = []

    def fail(fname, **kwargs):
        calls.append(fname)
        raise Exception(f"URL fetch failure on {kwargs['origin']}: no network")

    monkeypatch.setattr(keras.utils, "get_file", fail)
    return calls


def _forbid_reading(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("read_parallel called before all files were checked")

    monkeypatch.setattr(data, "read_parallel", fail)


def test_embedded_hashes_match_sha256sums():
    assert data.SHA256 == _published_hashes()


def test_val_split_loads_all_pairs_in_order(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    corpus = data.load_multi30k("val", data_dir=DATA_DIR)
    assert list(corpus) == ["val"]
    val = corpus["val"]
    assert len(val) == len(val.en) == len(val.fr) == 1014
    assert val.en == [line.strip() for line in _raw_lines(DATA_DIR / "val.en.gz")]
    assert val.fr == [line.strip() for line in _raw_lines(DATA_DIR / "val.fr.gz")]
    stats = val.stats
    assert (stats.read, stats.used, stats.skipped_empty, stats.skipped_long) == (
        1014,
        1014,
        0,
        0,
    )


@pytest.mark.parametrize("split", sorted(PUBLISHED_SIZES))
def test_every_split_has_published_size(split):
    corpus = data.load_multi30k([split], data_dir=DATA_DIR)
    stats = corpus[split].stats
    assert stats.read == PUBLISHED_SIZES[split]
    assert stats.read == stats.used + stats.skipped_empty + stats.skipped_long
    assert len(corpus[split].en) == len(corpus[split].fr) == stats.used


def test_max_words_skips_long_val_pairs_and_counts_them():
    en = [line.strip() for line in _raw_lines(DATA_DIR / "val.en.gz")]
    fr = [line.strip() for line in _raw_lines(DATA_DIR / "val.fr.gz")]
    expected = [
        (e, f) for e, f in zip(en, fr, strict=True) if len(e.split()) <= 10 and len(f.split()) <= 10
    ]
    val = data.load_multi30k("val", data_dir=DATA_DIR, max_words=10)["val"]
    assert list(zip(val.en, val.fr, strict=True)) == expected
    assert val.stats.skipped_long == 1014 - len(expected) > 0
    assert val.stats.read == val.stats.used + val.stats.skipped_long


def test_loader_logs_summary(caplog):
    with caplog.at_level(logging.INFO, logger="keras_attention.translation.data"):
        data.load_multi30k("val", data_dir=DATA_DIR)
    messages = [record.getMessage() for record in caplog.records]
    assert any("val" in m and "read 1014 pairs, used 1014" in m for m in messages)


def test_summary_reports_counts():
    stats = data.ReadStats(read=10, used=6, skipped_empty=3, skipped_long=1, max_words=5)
    assert stats.summary() == ("read 10 pairs, used 6, skipped 4 (3 empty, 1 too long: > 5 words)")


def test_head_keeps_the_first_pairs_aligned():
    stats = data.ReadStats(read=3, used=3, skipped_empty=0, skipped_long=0, max_words=None)
    split = data.ParallelSplit(en=["a", "b", "c"], fr=["x", "y", "z"], stats=stats)
    first = split.head(2)
    assert (first.en, first.fr, first.stats) == (["a", "b"], ["x", "y"], stats)
    assert split.head(None) is split
    assert split.head(10).en == ["a", "b", "c"]
    # 0 used to mean "all pairs": now a count must be positive (or None).
    for n in (0, -1):
        with pytest.raises(ValueError, match="`n`"):
            split.head(n)


def test_mismatched_line_counts_raise_with_both_files_and_counts(tmp_path):
    src = _write(tmp_path / "a.en.gz", ["one", "two", "three"])
    tgt = _write(tmp_path / "a.fr.gz", ["un", "deux"])
    with pytest.raises(ValueError) as info:
        data.read_parallel(src, tgt)
    message = str(info.value)
    assert str(src) in message and str(tgt) in message
    assert "has 3" in message and "has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "two", "three"], compress=False)
    tgt = _write(tmp_path / "a.fr.gz", ["un", "deux", b"trois \xff\xfe"])
    with pytest.raises(ValueError) as info:
        data.read_parallel(src, tgt)
    assert str(tgt) in str(info.value)
    assert "line 3" in str(info.value)


def test_empty_and_long_pairs_are_skipped_and_counted(tmp_path):
    src = _write(tmp_path / "s.gz", ["a b", "", "c", "d e f g", "h", "  i  ", "j k l"])
    tgt = _write(tmp_path / "t.gz", ["x", "y", " \t ", "z", "w x y z", "v", "u"])
    pairs, stats = data.read_parallel(src, tgt, max_words=3)
    assert pairs == [("a b", "x"), ("i", "v"), ("j k l", "u")]
    assert (stats.read, stats.used, stats.skipped_empty, stats.skipped_long) == (
        7,
        3,
        2,
        2,
    )


def test_plain_text_with_crlf_and_no_final_newline(tmp_path):
    src = tmp_path / "s.txt"
    tgt = tmp_path / "t.txt"
    src.write_bytes(b"A dog.\r\nA cat.")
    tgt.write_bytes(b"Un chien.\r\nUn chat.\r\n")
    pairs, stats = data.read_parallel(src, tgt)
    assert pairs == [("A dog.", "Un chien."), ("A cat.", "Un chat.")]
    assert stats.read == stats.used == 2


def test_line_separator_characters_do_not_split_lines(tmp_path):
    # U+2028 and form feed are line breaks for str.splitlines, not for the files.
    src = _write(tmp_path / "s.gz", ["a\u2028b", "c\x0cd"])
    tgt = _write(tmp_path / "t.gz", ["x", "y"])
    pairs, _ = data.read_parallel(src, tgt)
    assert [p[0] for p in pairs] == ["a\u2028b", "c\x0cd"]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", " ", "w", "w w", "w w w w", " w  w "]),
            st.sampled_from(["", "\t", "m", "m m m", "m m m m m"]),
        ),
        max_size=30,
    ),
    st.one_of(st.none(), st.integers(1, 5)),
)
def test_stats_invariant_and_filtering(rows, max_words):
    with tempfile.TemporaryDirectory() as folder:
        src = _write(Path(folder) / "s.gz", [s for s, _ in rows])
        tgt = _write(Path(folder) / "t.gz", [t for _, t in rows])
        pairs, stats = data.read_parallel(src, tgt, max_words=max_words)
    expected = [
        (s.strip(), t.strip())
        for s, t in rows
        if s.strip()
        and t.strip()
        and (max_words is None or (len(s.split()) <= max_words and len(t.split()) <= max_words))
    ]
    assert pairs == expected
    assert stats.read == len(rows)
    assert stats.read == stats.used + stats.skipped_empty + stats.skipped_long
    assert stats.skipped_empty == sum(1 for s, t in rows if not s.strip() or not t.strip())


@pytest.mark.parametrize("max_words", [0, -1, 2.5, True])
def test_invalid_max_words_raises(tmp_path, max_words):
    src = _write(tmp_path / "s.gz", ["a"])
    with pytest.raises(ValueError, match="max_words"):
        data.read_parallel(src, src, max_words=max_words)


def test_unknown_split_raises():
    with pytest.raises(ValueError, match="splits"):
        data.load_multi30k(["val", "test2016"], data_dir=DATA_DIR)


def test_missing_local_files_listed_before_reading(tmp_path, monkeypatch):
    shutil.copy(DATA_DIR / "val.en.gz", tmp_path / "val.en.gz")
    _forbid_reading(monkeypatch)
    with pytest.raises(FileNotFoundError) as info:
        data.load_multi30k(["val", "test_2016_flickr"], data_dir=tmp_path)
    message = str(info.value)
    for name in ["val.fr.gz", "test_2016_flickr.en.gz", "test_2016_flickr.fr.gz"]:
        assert name in message
    assert "val.en.gz" not in message
    assert str(tmp_path) in message
    assert ENV_VAR in message and "--data-dir" in message


def test_missing_files_without_network_fail_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    calls = _no_network(monkeypatch)
    _forbid_reading(monkeypatch)
    with pytest.raises(FileNotFoundError) as info:
        data.load_multi30k(["val", "test_2017_mscoco"])
    message = str(info.value)
    for name in [
        "val.en.gz",
        "val.fr.gz",
        "test_2017_mscoco.en.gz",
        "test_2017_mscoco.fr.gz",
    ]:
        assert name in message
    assert ENV_VAR in message and "--data-dir" in message
    assert "no network" in message
    # After the first failure no further download is attempted.
    assert calls == ["val.en.gz"]


def test_download_route_calls_get_file_with_origin_hash_and_cache(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    calls = []

    def fake_get_file(fname, **kwargs):
        calls.append((fname, kwargs))
        return str(DATA_DIR / fname)

    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    val = data.load_multi30k("val")["val"]
    assert len(val) == 1014
    hashes = _published_hashes()
    assert calls == [
        (
            name,
            {
                "origin": URL + name,
                "file_hash": hashes[name],
                "cache_subdir": "datasets/multi30k",
            },
        )
        for name in ["val.en.gz", "val.fr.gz"]
    ]


def test_env_var_folder_is_used(monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(DATA_DIR))
    _no_network(monkeypatch)
    paths = data.multi30k_paths("val")
    assert paths == {"val": {"en": DATA_DIR / "val.en.gz", "fr": DATA_DIR / "val.fr.gz"}}
    assert len(data.load_multi30k("val")["val"]) == 1014


def test_env_var_folder_missing_files_names_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    _no_network(monkeypatch)
    with pytest.raises(FileNotFoundError) as info:
        data.load_multi30k("val")
    assert "val.en.gz" in str(info.value) and "val.fr.gz" in str(info.value)
    assert str(tmp_path) in str(info.value) and ENV_VAR in str(info.value)


def test_data_dir_argument_wins_over_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))  # Empty folder.
    _no_network(monkeypatch)
    assert len(data.load_multi30k("val", data_dir=DATA_DIR)["val"]) == 1014


def test_sha256_mismatch_names_file_and_both_hashes(tmp_path, monkeypatch):
    shutil.copy(DATA_DIR / "val.en.gz", tmp_path / "val.en.gz")
    shutil.copy(DATA_DIR / "val.en.gz", tmp_path / "val.fr.gz")  # Wrong content.
    _forbid_reading(monkeypatch)
    actual = hashlib.sha256((tmp_path / "val.fr.gz").read_bytes()).hexdigest()
    with pytest.raises(ValueError) as info:
        data.load_multi30k("val", data_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "val.fr.gz") in message
    assert _published_hashes()["val.fr.gz"] in message
    assert actual in message
    assert str(tmp_path / "val.en.gz") not in message
