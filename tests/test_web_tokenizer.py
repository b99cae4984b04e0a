"""The browser's tokenizer (web/src/tokenizer.js, run in Node) equals the Python one.

The reference is `SubwordTokenizer` (tensorflow-text's FastWordpieceTokenizer)
with vocabularies learned by the package from the Multi30k training split, as
the translator learns them (vocabulary 8,000, lowercased). Compared: the ids
of every English sentence of test_2016_flickr and test_2017_flickr, and of a
list of hostile strings; the detokenized text of the French references' ids
and of random ids. Each vocabulary is learned once for the module.

Needs Node.js (`node` on the PATH); without it the tests skip with the
reason, and under `CI=true` they fail.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from _data_paths import multi30k_dir

from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import load_multi30k

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "browser" / "tokenize.mjs"
TEST_SPLITS = ("test_2016_flickr", "test_2017_flickr")
HOSTILE = [
    "",
    "  \u00a0 ",
    "L’ÉTÉ, à 5$ + 3^2 «oui» — ΟΔΟΣ İstanbul ＡＢＣ ﬁn 日本",
    "a" * 120,
    "é" * 60,  # 120 bytes of UTF-8 in 60 characters
    "tab\tnew\nline\u2028sep\u3000ideographic\u200bzero\ufeffbom",
    "control\x07chars and \x1cfile\x1dseparators \x7f\x85",
    "emoji 🙂👍🏽 and ẞtraße ǅemal Ⅻ ½ ² ㎏",
    "combining e\u0301 vs é, Å vs A\u030a",
    "A dog's ball, the dogs' bone; \"quoted\" (parens) [brackets] {braces} 3.5 1,000 @home #tag",
]


def _node():
    node = shutil.which("node")
    if node is None:
        reason = "Node.js (`node`) is not on the PATH; install it (e.g. apt-get install nodejs)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return node


def _run_js(tmp_path, vocab_file, lower_case, sentences, id_rows):
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps(
            {
                "vocab_file": str(vocab_file),
                "lower_case": lower_case,
                "sentences": list(sentences),
                "id_rows": [[int(i) for i in row] for row in id_rows],
            }
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [_node(), str(DRIVER), str(request)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def corpus():
    folder = multi30k_dir()
    if not (folder / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {folder} (see tests/_data_paths.py)")
    return load_multi30k(("train", *TEST_SPLITS), folder)


@pytest.fixture(scope="module")
def vocabularies(corpus, tmp_path_factory):
    """The translator's two tokenizers, and their vocabulary files."""
    folder = tmp_path_factory.mktemp("vocab")
    out = {}
    for lang in ("en", "fr"):
        lines = getattr(corpus["train"], lang)
        tokenizer = SubwordTokenizer.build(lines, vocab_size=8000, lower_case=True)
        tokenizer.save(folder / lang)
        out[lang] = (tokenizer, folder / lang / "vocab.txt")
    return out


def _python_ids(tokenizer, sentences):
    return tokenizer.tokenize(tf.constant(sentences, dtype=tf.string)).to_list()


def test_source_ids_of_every_test_sentence_equal_tensorflow_text(corpus, vocabularies, tmp_path):
    tokenizer, vocab_file = vocabularies["en"]
    sentences = [s for split in TEST_SPLITS for s in corpus[split].en]
    assert len(sentences) == 2000
    answer = _run_js(tmp_path, vocab_file, True, sentences, [])
    expected = _python_ids(tokenizer, sentences)
    mismatched = [
        (s, mine, theirs)
        for s, mine, theirs in zip(sentences, answer["ids"], expected, strict=True)
        if mine != theirs
    ]
    assert not mismatched, mismatched[:3]


@pytest.mark.parametrize("lower_case", [True, False])
def test_hostile_strings_give_the_same_ids(vocabularies, tmp_path, lower_case):
    # The same vocabulary read cased: capitals it lacks become [UNK] in both.
    tokenizer, vocab_file = vocabularies["en"]
    reference = SubwordTokenizer(tokenizer.vocab, lower_case=lower_case)
    answer = _run_js(tmp_path, vocab_file, lower_case, HOSTILE, [])
    expected = _python_ids(reference, HOSTILE)
    for sentence, mine, theirs in zip(HOSTILE, answer["ids"], expected, strict=True):
        assert mine == theirs, sentence


def test_nul_character_is_refused_with_its_position(vocabularies, tmp_path):
    # tensorflow-text stops reading at U+0000 (here it gave the ids of
    # "control" alone for the whole sentence), so the JavaScript side refuses
    # the text instead of giving other ids.
    tokenizer, vocab_file = vocabularies["en"]
    text = "control\x00chars and more"
    assert _python_ids(tokenizer, [text]) == _python_ids(tokenizer, ["control"])
    answer = _run_js(tmp_path, vocab_file, True, [text], [])
    assert answer["ids"] == [{"error": answer["ids"][0]["error"]}]
    assert "U+0000 at position 7" in answer["ids"][0]["error"]


def test_detokenized_references_equal_tensorflow_text(corpus, vocabularies, tmp_path):
    tokenizer, vocab_file = vocabularies["fr"]
    references = [s for split in TEST_SPLITS for s in corpus[split].fr]
    # As the model outputs them: [START] ... [END], then padding.
    ids = tokenizer.tokenize(tf.constant(references), add_start_end=True).to_tensor().numpy()
    answer = _run_js(tmp_path, vocab_file, True, [], ids)
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]
    assert answer["texts"] == expected
    assert sum(bool(t) for t in expected) == len(references)  # not all empty


def test_detokenized_random_ids_equal_tensorflow_text(vocabularies, tmp_path):
    # Reserved ids anywhere, ids past the vocabulary, "##" pieces first.
    tokenizer, vocab_file = vocabularies["fr"]
    ids = np.random.default_rng(0).integers(0, tokenizer.vocab_size + 5, (300, 14))
    ids = ids.astype(np.int32)
    answer = _run_js(tmp_path, vocab_file, True, [], ids)
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]
    assert answer["texts"] == expected
