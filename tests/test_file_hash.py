"""`keras_attention.file_hash.sha256_of`: a file's SHA-256, read in blocks."""

import hashlib

import pytest

from keras_attention.file_hash import sha256_of


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) * 2 + 7])
def test_sha256_of_a_file_equals_hashlib_on_its_bytes(tmp_path, size):
    data = bytes(i * 7 % 251 for i in range(size))
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    assert sha256_of(path) == hashlib.sha256(data).hexdigest()
    assert sha256_of(str(path)) == hashlib.sha256(data).hexdigest()


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.gz"):
        sha256_of(tmp_path / "missing.gz")
