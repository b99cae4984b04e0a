"""Multi30k English-French loader (task 1, raw text).

Where the files come from, in this order:

1. an explicit `data_dir` argument,
2. the folder named by the `KERAS_ATTENTION_MULTI30K_DIR` environment variable,
3. a download of each gzipped file into the Keras cache
   (`~/.keras/datasets/multi30k`, or under `$KERAS_HOME`).

Every requested file is located and checked against its published sha256 before
any of them is read, so a missing or corrupted file fails at once, with one error
that lists all of them. A local folder is authoritative: files missing from it are
reported, never downloaded.

Example:

```python
corpus = load_multi30k(splits=("train", "val"), data_dir="data/multi30k")
train = corpus["train"]
train.en[0], train.fr[0], train.stats.summary()
```
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

from keras_attention.arguments.validation import check_positive_int
from keras_attention.arguments.validation import check_same_count
from keras_attention.files.file_hash import sha256_of
from keras_attention.files.reading import read_bytes

logger = logging.getLogger(__name__)

ENV_VAR = "KERAS_ATTENTION_MULTI30K_DIR"
BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
CACHE_SUBDIR = "datasets/multi30k"
LANGUAGES = ("en", "fr")

# Number of sentence pairs in each published split.
SPLIT_SIZES = {
    "train": 29_000,
    "val": 1_014,
    "test_2016_flickr": 1_000,
    "test_2017_flickr": 1_000,
    "test_2017_mscoco": 461,
}
SPLITS = tuple(SPLIT_SIZES)

# sha256 of the gzipped files as published under BASE_URL.
SHA256 = {
    "test_2016_flickr.en.gz": ("611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
    "test_2016_flickr.fr.gz": ("6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90"),
    "test_2017_flickr.en.gz": ("76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074"),
    "test_2017_flickr.fr.gz": ("3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496"),
    "test_2017_mscoco.en.gz": ("aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58"),
    "test_2017_mscoco.fr.gz": ("754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0"),
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}

_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True)
class ReadStats:
    """What happened to the sentence pairs of one parallel file pair.

    Invariant: `read == used + skipped_empty + skipped_long`.

    Attributes:
        read: pairs (lines) in the files.
        used: pairs returned.
        skipped_empty: pairs with an empty side (after stripping whitespace).
        skipped_long: pairs with a side longer than `max_words` words.
        max_words: the limit that was applied, or `None`.
    """

    read: int
    used: int
    skipped_empty: int
    skipped_long: int
    max_words: int | None = None

    def summary(self) -> str:
        """One line such as `read 1014 pairs, used 1012, skipped 2 (...)`."""
        limit = "no limit" if self.max_words is None else f"> {self.max_words} words"
        return (
            f"read {self.read} pairs, used {self.used}, skipped "
            f"{self.skipped_empty + self.skipped_long} "
            f"({self.skipped_empty} empty, {self.skipped_long} too long: {limit})"
        )


@dataclasses.dataclass(frozen=True)
class ParallelSplit:
    """One split of Multi30k: aligned English and French sentences.

    Attributes:
        en: English sentences, stripped of surrounding whitespace.
        fr: French sentences; `fr[i]` translates `en[i]`.
        stats: the `ReadStats` of reading this split.
    """

    en: list[str]
    fr: list[str]
    stats: ReadStats

    def __len__(self) -> int:
        return len(self.en)

    def head(self, n: int | None) -> ParallelSplit:
        """The first `n` pairs (all of them when `n` is None), same stats.

        Raises:
            ValueError: `n` is not a positive integer (0 or -1 would
                silently keep all pairs or drop the last one).
        """
        check_positive_int("n", n, allow_none=True)
        if n is None:
            return self
        return ParallelSplit(en=self.en[:n], fr=self.fr[:n], stats=self.stats)


def read_parallel(
    src_path: str | os.PathLike,
    tgt_path: str | os.PathLike,
    max_words: int | None = None,
) -> tuple[list[tuple[str, str]], ReadStats]:
    """Reads aligned sentence pairs from two files (gzip or plain UTF-8 text).

    Line N of `src_path` pairs with line N of `tgt_path`. Both sides are
    stripped. A pair is skipped (and counted) when either side is empty, or when
    either side has more than `max_words` whitespace-separated words.

    Args:
        src_path: source-language file, one sentence per line.
        tgt_path: target-language file with the same number of lines.
        max_words: optional positive int, the longest side kept, in words.

    Returns:
        `(pairs, stats)`: a list of `(source, target)` strings and a `ReadStats`.

    Raises:
        ValueError: the files have different line counts, a gzip file is
            truncated or damaged (the message names the file), a line is not
            valid UTF-8 (the message names the file and the 1-based line), or
            `max_words` is not a positive int.
    """
    check_positive_int("max_words", max_words, allow_none=True)
    src_lines = _read_lines(src_path)
    tgt_lines = _read_lines(tgt_path)
    check_same_count(src_lines, tgt_lines, str(src_path), str(tgt_path), "lines")

    pairs = []
    skipped_empty = 0
    skipped_long = 0
    for number, (src_raw, tgt_raw) in enumerate(zip(src_lines, tgt_lines, strict=True), start=1):
        src = _decode(src_raw, src_path, number)
        tgt = _decode(tgt_raw, tgt_path, number)
        if not src or not tgt:
            skipped_empty += 1
        elif max_words is not None and (
            len(src.split()) > max_words or len(tgt.split()) > max_words
        ):
            skipped_long += 1
        else:
            pairs.append((src, tgt))
    stats = ReadStats(
        read=len(src_lines),
        used=len(pairs),
        skipped_empty=skipped_empty,
        skipped_long=skipped_long,
        max_words=max_words,
    )
    return pairs, stats


def multi30k_paths(
    splits: Iterable[str] | str = SPLITS,
    data_dir: str | os.PathLike | None = None,
) -> dict[str, dict[str, Path]]:
    """Finds (or downloads) and verifies the Multi30k files of `splits`.

    Args:
        splits: split names (see `SPLITS`), or one name.
        data_dir: optional folder holding `{split}.{en,fr}.gz`. Without it, the
            folder in `$KERAS_ATTENTION_MULTI30K_DIR` is used, else the files are
            downloaded into the Keras cache.

    Returns:
        `{split: {"en": path, "fr": path}}`.

    Raises:
        FileNotFoundError: one or more files are missing from the folder, or
            could not be downloaded. The message lists every such file.
        ValueError: an unknown split, or a file whose sha256 does not match.
    """
    splits = _check_splits(splits)
    names = [f"{split}.{lang}.gz" for split in splits for lang in LANGUAGES]

    if data_dir is not None:
        paths = _local_paths(names, Path(data_dir).expanduser(), "the data_dir argument")
    elif os.environ.get(ENV_VAR):
        folder = Path(os.environ[ENV_VAR]).expanduser()
        paths = _local_paths(names, folder, f"the {ENV_VAR} environment variable")
    else:
        paths = _download(names)

    mismatches = []
    for name, path in paths.items():
        actual = sha256_of(path)
        if actual != SHA256[name]:
            mismatches.append(f"{path}: expected sha256 {SHA256[name]}, found {actual}")
    if mismatches:
        raise ValueError(
            "Multi30k files do not match their published sha256 (corrupted or "
            "different files):\n  " + "\n  ".join(mismatches)
        )
    return {split: {lang: paths[f"{split}.{lang}.gz"] for lang in LANGUAGES} for split in splits}


def load_multi30k(
    splits: Iterable[str] | str = SPLITS,
    data_dir: str | os.PathLike | None = None,
    max_words: int | None = None,
) -> dict[str, ParallelSplit]:
    """Loads Multi30k English-French sentence pairs.

    All requested files are located and verified first (see `multi30k_paths`),
    then read with `read_parallel`; each split's `ReadStats.summary()` is logged
    at INFO level.

    `max_words` applies to every requested split. Load evaluation splits with
    `max_words=None` so that scores are computed on the complete test sets.

    Args:
        splits: split names (see `SPLITS`), or one name.
        data_dir: optional folder with the `.gz` files (see `multi30k_paths`).
        max_words: optional positive int; pairs with a longer side are skipped.

    Returns:
        `{split: ParallelSplit}` in the order of `splits`.
    """
    paths = multi30k_paths(splits, data_dir)
    corpus = {}
    for split, files in paths.items():
        pairs, stats = read_parallel(files["en"], files["fr"], max_words=max_words)
        logger.info("Multi30k %s: %s", split, stats.summary())
        corpus[split] = ParallelSplit(
            en=[en for en, _ in pairs], fr=[fr for _, fr in pairs], stats=stats
        )
    return corpus


def _check_splits(splits) -> tuple[str, ...]:
    if isinstance(splits, str):
        splits = (splits,)
    splits = tuple(splits)
    unknown = [split for split in splits if split not in SPLIT_SIZES]
    if unknown or not splits:
        raise ValueError(
            f"Invalid value for argument `splits`. Expected a non-empty subset of "
            f"{SPLITS}. Received: splits={splits!r}"
        )
    return tuple(dict.fromkeys(splits))  # Drop repeats, keep the order.


def _remedy(first_step: str) -> str:
    return (
        f"{first_step} Fetch the gzipped task-1 raw files from {BASE_URL} if "
        f"needed; then pass the folder as the `data_dir` argument, in the {ENV_VAR} "
        "environment variable or with the examples' --data-dir option."
    )


def _local_paths(names: list[str], folder: Path, origin: str) -> dict[str, Path]:
    # A FIFO or a device there is not missing: reading it says what it is.
    missing = [name for name in names if not (folder / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"Multi30k files missing from {folder} (given by {origin}): "
            f"{', '.join(missing)}. "
            + _remedy("Put them in that folder, or use a folder that holds them.")
        )
    return {name: folder / name for name in names}


def _download(names: list[str]) -> dict[str, Path]:
    # Imported here: reading a local folder does not need TensorFlow.
    import keras

    paths = {}
    failed = None
    for name in names:
        try:
            paths[name] = Path(
                keras.utils.get_file(
                    name,
                    origin=BASE_URL + name,
                    file_hash=SHA256[name],
                    cache_subdir=CACHE_SUBDIR,
                )
            )
        except Exception as error:
            # One failure (usually no network) stops further attempts: each
            # could wait for its own timeout.
            failed = (name, error)
            break
    if failed is not None:
        failed_name, error = failed
        missing = [name for name in names if name not in paths]
        raise FileNotFoundError(
            f"Could not download the Multi30k files {', '.join(missing)} "
            f"({failed_name}: {error}). " + _remedy("Put all of them in one folder.")
        ) from error
    return paths


def _read_lines(path: str | os.PathLike) -> list[bytes]:
    data = read_bytes(path, "data file")  # a FIFO is refused, not waited on
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            # gzip names no file; a truncated download or copy is the usual cause.
            raise ValueError(
                f"{path}: truncated or damaged gzip file ({len(data)} bytes; "
                f"{type(error).__name__}: {error})."
            ) from None
    if not data:
        return []
    # Split on "\n" only: str.splitlines would also split on characters such as
    # U+2028 or form feed inside a sentence and break the alignment.
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _decode(line: bytes, path: str | os.PathLike, number: int) -> str:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}, line {number}: invalid UTF-8 ({error.reason} at byte {error.start})."
        ) from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    return text.strip()
