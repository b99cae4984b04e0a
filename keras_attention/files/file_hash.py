"""`sha256_of`: the SHA-256 of a file; `check_sha256`: the check of a data
file against its published hash (CMUdict, Multi30k)."""

import hashlib

from keras_attention.files.reading import open_regular


def sha256_of(path):
    """The hex SHA-256 digest of the file at `path`, read 1 MiB at a time.

    Args:
        path: a file path (str or `os.PathLike`); a FIFO or a device is
            refused before it is opened (`NotARegularFileError`).
    """
    digest = hashlib.sha256()
    with open_regular(path, "rb", "data file") as file:  # a FIFO is refused, not waited on
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path, expected):
    """Raises `ValueError` naming `path` and both digests unless the file's
    SHA-256 is `expected` (a hex digest, any case).

    Args:
        path: a file path (str or `os.PathLike`); `FileNotFoundError` naming
            it when it does not exist.
        expected: the published hex digest.
    """
    actual = sha256_of(path)
    if actual != expected.lower():
        raise ValueError(
            f"{path}: sha256 {actual} differs from the expected {expected}; "
            "the file is altered or another version"
        )
