"""`sha256_of`: the SHA-256 of a file, the check of a downloaded data file
against its published hash (CMUdict, Multi30k)."""

import hashlib


def sha256_of(path):
    """The hex SHA-256 digest of the file at `path`, read 1 MiB at a time.

    Args:
        path: a file path (str or `os.PathLike`).
    """
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
