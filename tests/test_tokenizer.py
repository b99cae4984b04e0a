"""Tests of SubwordTokenizer and postprocess (keras_attention.translation.tokenizer).

The vocabulary is learned once, from 2,000 training sentences (vocabulary 1,000),
to keep the module fast.
"""

import json
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from _data_paths import multi30k_dir

from keras_attention.translation import data
from keras_attention.translation.postprocess import postprocess
from keras_attention.translation.tokenizer import SubwordTokenizer
from keras_attention.translation.tokenizer import normalize_text

DATA_DIR = multi30k_dir()


def _is_punctuation(char):
    # BERT's definition: ASCII symbols and Unicode punctuation (P*).
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _split_words(text):
    """Reference word split: whitespace, then each punctuation char on its own."""
    words = []
    for chunk in text.split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                    current = ""
                words.append(char)
            else:
                current += char
        if current:
            words.append(current)
    return words


@pytest.fixture(scope="module")
def corpus():
    return data.load_multi30k(("train", "val"), data_dir=DATA_DIR)


@pytest.fixture(scope="module")
def fr_tokenizer(corpus):
    return SubwordTokenizer.build(corpus["train"].fr[:2000], vocab_size=1000)


@pytest.fixture(scope="module")
def val_fr(corpus):
    return corpus["val"].fr[:300]


def _rows(ragged):
    return [list(row) for row in ragged.to_list()]


def _ids(tokenizer, tokens):
    return [tokenizer.vocab.index(token) for token in tokens]


def test_reserved_tokens_have_fixed_ids(fr_tokenizer):
    assert fr_tokenizer.vocab[:4] == ("[PAD]", "[UNK]", "[START]", "[END]")
    assert (
        fr_tokenizer.pad_id,
        fr_tokenizer.unk_id,
        fr_tokenizer.start_id,
        fr_tokenizer.end_id,
    ) == (0, 1, 2, 3)
    assert fr_tokenizer.vocab_size == len(fr_tokenizer.vocab)
    assert 500 < fr_tokenizer.vocab_size <= 1000
    assert fr_tokenizer.lower_case is False


def test_tokenize_returns_int32_ragged_without_reserved_ids(fr_tokenizer, val_fr):
    ids = fr_tokenizer.tokenize(val_fr)
    assert isinstance(ids, tf.RaggedTensor)
    assert ids.dtype == tf.int32
    assert ids.shape.rank == 2 and ids.nrows() == len(val_fr)
    flat = ids.flat_values.numpy()
    assert flat.min() >= 1 and flat.max() < fr_tokenizer.vocab_size
    assert not np.isin(flat, [0, 2, 3]).any()


def test_add_start_end_wraps_each_row(fr_tokenizer, val_fr):
    plain = _rows(fr_tokenizer.tokenize(val_fr[:20]))
    wrapped = _rows(fr_tokenizer.tokenize(val_fr[:20], add_start_end=True))
    assert wrapped == [[2] + row + [3] for row in plain]


def test_empty_string_gives_empty_row(fr_tokenizer):
    assert _rows(fr_tokenizer.tokenize(["", "  "])) == [[], []]
    assert _rows(fr_tokenizer.tokenize([""], add_start_end=True)) == [[2, 3]]


def test_wordpiece_splits_match_vocabulary(fr_tokenizer):
    ids = _rows(fr_tokenizer.tokenize(["chiens"]))[0]
    pieces = [fr_tokenizer.vocab[i] for i in ids]
    assert "".join(p.removeprefix("##") for p in pieces) == "chiens"
    assert not pieces[0].startswith("##")
    assert all(p.startswith("##") for p in pieces[1:])


def test_graph_round_trip_on_val_matches_reference_split(fr_tokenizer, val_fr):
    ids = fr_tokenizer.tokenize(val_fr)
    text = [t.decode("utf-8") for t in fr_tokenizer.detokenize(ids.to_tensor()).numpy()]
    known = [i for i, row in enumerate(_rows(ids)) if fr_tokenizer.unk_id not in row]
    assert len(known) >= 0.95 * len(val_fr)
    for i in known:
        assert text[i] == " ".join(_split_words(val_fr[i]))


def test_postprocessed_round_trip_on_val_restores_text(fr_tokenizer, val_fr):
    ids = fr_tokenizer.tokenize(val_fr)
    text = fr_tokenizer.detokenize(ids.to_tensor()).numpy()
    known = [i for i, row in enumerate(_rows(ids)) if fr_tokenizer.unk_id not in row]
    restored = [postprocess(text[i], "fr") == " ".join(val_fr[i].split()) for i in known]
    # Measured on all of val: 1013 of 1014 ("J.P." comes back as "J. P.").
    assert sum(restored) >= 0.99 * len(known)


def test_unknown_character_becomes_one_unk_for_the_word(fr_tokenizer):
    ids = _rows(fr_tokenizer.tokenize(["un ☃homme chien"]))[0]
    assert (
        ids
        == _rows(fr_tokenizer.tokenize(["un"]))[0]
        + [1]
        + _rows(fr_tokenizer.tokenize(["chien"]))[0]
    )


def test_detokenize_stops_at_end_and_strips_reserved(fr_tokenizer):
    chien, s, homme, point = _ids(fr_tokenizer, ["chien", "##s", "homme", "."])
    ids = tf.constant(
        [
            [2, chien, s, 0, 1, homme, point, 3, homme, 0],
            [chien, 3, 3, homme, 0, 0, 0, 0, 0, 0],
            [3, chien, 0, 0, 0, 0, 0, 0, 0, 0],
            [homme, homme, 0, 0, 0, 0, 0, 0, 0, 0],
        ],
        dtype=tf.int32,
    )
    text = fr_tokenizer.detokenize(ids).numpy().tolist()
    assert text == [b"chiens homme .", b"chien", b"", b"homme homme"]


def test_detokenize_drops_ids_outside_vocabulary(fr_tokenizer):
    (chien,) = _ids(fr_tokenizer, ["chien"])
    ids = tf.constant([[chien, fr_tokenizer.vocab_size, -5, chien]], dtype=tf.int32)
    assert fr_tokenizer.detokenize(ids).numpy().tolist() == [b"chien chien"]


def test_lookup_returns_token_strings(fr_tokenizer):
    ids = fr_tokenizer.tokenize(["Un chien."], add_start_end=True).to_tensor()
    tokens = [t.decode() for t in fr_tokenizer.lookup(ids).numpy()[0]]
    assert tokens[0] == "[START]" and tokens[-1] == "[END]"
    assert [fr_tokenizer.vocab[i] for i in ids.numpy()[0]] == tokens


def test_nfkc_normalization(fr_tokenizer):
    # Ligature, full-width letters, decomposed accent.
    raw = ["ﬁlet Ｕｎ cafe\u0301"]
    normalized = ["filet Un café"]
    assert fr_tokenizer.normalize(raw).numpy().tolist() == [s.encode() for s in normalized]
    assert _rows(fr_tokenizer.tokenize(raw)) == _rows(fr_tokenizer.tokenize(normalized))


def test_lower_case_option(fr_tokenizer):
    lower = SubwordTokenizer(fr_tokenizer.vocab, lower_case=True)
    assert lower.normalize(["ÉTÉ Élan"]).numpy().tolist() == ["été élan".encode()]
    assert _rows(lower.tokenize(["UN HOMME"])) == _rows(fr_tokenizer.tokenize(["un homme"]))
    assert _rows(fr_tokenizer.tokenize(["Un"])) != _rows(fr_tokenizer.tokenize(["un"]))


@pytest.mark.parametrize("lower_case", [False, True])
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_normalize_text_matches_graph_on_val(corpus, fr_tokenizer, lang, lower_case):
    sentences = getattr(corpus["val"], lang)
    tokenizer = SubwordTokenizer(fr_tokenizer.vocab, lower_case=lower_case)
    graph = [s.decode() for s in tokenizer.normalize(sentences).numpy()]
    assert graph == [normalize_text(s, lower_case) for s in sentences]


def test_tokenize_normalized_equals_tokenize(fr_tokenizer, val_fr):
    lower = SubwordTokenizer(fr_tokenizer.vocab, lower_case=True)
    host = [normalize_text(s, lower_case=True) for s in val_fr]
    assert _rows(lower.tokenize_normalized(host, add_start_end=True)) == _rows(
        lower.tokenize(val_fr, add_start_end=True)
    )


def test_save_load_gives_identical_ids(fr_tokenizer, val_fr, tmp_path):
    lower = SubwordTokenizer(fr_tokenizer.vocab, lower_case=True)
    lower.save(tmp_path)
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[:-1] == list(lower.vocab) and lines[-1] == ""
    config = json.loads((tmp_path / "tokenizer.json").read_text())
    assert config["lower_case"] is True and config["vocab_size"] == lower.vocab_size
    restored = SubwordTokenizer.load(tmp_path)
    assert restored.vocab == lower.vocab and restored.lower_case is True
    assert _rows(restored.tokenize(val_fr)) == _rows(lower.tokenize(val_fr))


def test_load_rejects_truncated_vocabulary(fr_tokenizer, tmp_path):
    fr_tokenizer.save(tmp_path)
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(fr_tokenizer.vocab[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="tokens"):
        SubwordTokenizer.load(tmp_path)


def test_runs_inside_tf_function(fr_tokenizer, val_fr):
    @tf.function
    def round_trip(strings):
        ids = fr_tokenizer.tokenize(strings, add_start_end=True)
        return ids.to_tensor(), fr_tokenizer.detokenize(ids.to_tensor())

    ids, text = round_trip(tf.constant(val_fr[:50]))
    eager_ids = fr_tokenizer.tokenize(val_fr[:50], add_start_end=True).to_tensor()
    np.testing.assert_array_equal(ids.numpy(), eager_ids.numpy())
    np.testing.assert_array_equal(text.numpy(), fr_tokenizer.detokenize(eager_ids).numpy())


def test_saved_model_round_trip(fr_tokenizer, val_fr, tmp_path):
    tf.saved_model.save(fr_tokenizer, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    strings = tf.constant(val_fr[:50])
    for flag in (False, True):
        assert _rows(loaded.tokenize(strings, tf.constant(flag))) == _rows(
            fr_tokenizer.tokenize(strings, add_start_end=flag)
        )
    assert _rows(loaded.tokenize(strings)) == _rows(fr_tokenizer.tokenize(strings))
    ids = fr_tokenizer.tokenize(strings, add_start_end=True).to_tensor()
    np.testing.assert_array_equal(
        loaded.detokenize(ids).numpy(), fr_tokenizer.detokenize(ids).numpy()
    )
    np.testing.assert_array_equal(loaded.lookup(ids).numpy(), fr_tokenizer.lookup(ids).numpy())
    assert _rows(loaded.tokenize_normalized(strings)) == _rows(fr_tokenizer.tokenize(strings))


@pytest.mark.parametrize(
    "vocab",
    [
        ("[UNK]", "[PAD]", "[START]", "[END]", "a"),
        ("[PAD]", "[UNK]", "[START]", "[END]", "a", "a"),
        ("[PAD]", "[UNK]", "[START]", "[END]", "a b"),
        ("[PAD]", "[UNK]", "[START]", "[END]"),
    ],
)
def test_invalid_vocabulary_raises(vocab):
    with pytest.raises(ValueError, match="vocab"):
        SubwordTokenizer(vocab)


@pytest.mark.parametrize("vocab_size", [4, 2.5, True])
def test_build_rejects_invalid_vocab_size(vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        SubwordTokenizer.build(["un chien"], vocab_size=vocab_size)


@pytest.mark.parametrize(
    "text, lang, expected",
    [
        ("l ' homme porte un t - shirt .", "fr", "l'homme porte un t-shirt."),
        ("aujourd ' hui , il pleut !", "fr", "aujourd'hui, il pleut !"),
        ("un homme : il a 12 , 5 ans ?", "fr", "un homme : il a 12,5 ans ?"),
        (
            'a woman \' s dog , in a " red " hat ( big ) .',
            "en",
            'a woman\'s dog, in a "red" hat (big).',
        ),
        ("they don ' t see the dogs ' toys .", "en", "they don't see the dogs' toys."),
        ("  un   chien  ", "fr", "un chien"),
    ],
)
def test_postprocess_restores_punctuation(text, lang, expected):
    assert postprocess(text, lang) == expected


def test_postprocess_accepts_bytes_and_capitalizes():
    assert postprocess("« été » .".encode(), "fr", capitalize=True) == "« Été »."


def test_postprocess_without_sacremoses_names_the_extra(monkeypatch):
    postprocess_module = sys.modules[postprocess.__module__]
    postprocess_module._moses_detokenizer.cache_clear()
    monkeypatch.setitem(sys.modules, "sacremoses", None)
    try:
        with pytest.raises(ImportError, match=r"sacremoses.*\[tensorflow\]"):
            postprocess("un chien .", "fr")
    finally:
        postprocess_module._moses_detokenizer.cache_clear()
