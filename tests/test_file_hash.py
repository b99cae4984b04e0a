"""`keras_attention.files.file_hash`: a file's SHA-256, read in blocks, and its check."""

import hashlib

import pytest

from keras_attention.files.file_hash import check_sha256
from keras_attention.files.file_hash import sha256_of


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


def test_check_sha256_passes_the_right_digest_in_either_case(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes(b"A  AH\n")
    digest = hashlib.sha256(b"A  AH\n").hexdigest()
    check_sha256(path, digest)
    check_sha256(str(path), digest.upper())


def test_check_sha256_names_the_file_and_both_digests_when_they_differ(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes(b"A  AH\n")
    actual = hashlib.sha256(b"A  AH\n").hexdigest()
    wrong = hashlib.sha256(b"B  B IY\n").hexdigest()
    with pytest.raises(ValueError) as error:
        check_sha256(path, wrong)
    assert str(error.value).startswith(f"{path}: sha256 {actual} differs from the expected {wrong}")


def test_check_sha256_of_a_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        check_sha256(tmp_path / "missing.txt", "0" * 64)
