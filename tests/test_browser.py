"""The exported translator translates in a real browser, as Python LiteRT does.

A tiny translator is trained for one short epoch (the `tiny` preset on 600
pairs), exported as the page wants it (`--source-length 48 --tflite-beam`,
float32 and int8) and the page is written beside it (`node web/build.mjs`).
A static server on 127.0.0.1 serves that folder; headless Chromium, driven by
puppeteer-core (`tests/browser/drive.mjs`), types sentences into the page.

The references are independent of the page's JavaScript: the source ids come
from tensorflow-text (`SubwordTokenizer`), the output ids from Python LiteRT's
`translate` / `translate_beam` on the same model file, the text from
`SubwordTokenizer.detokenize` and the command line's `postprocess`.

Needs Debian's `chromium` (or the browser named by `KERAS_ATTENTION_CHROMIUM`),
Node.js and `npm ci` (node_modules/). Without them the tests skip with the
reason; under `CI=true` that is a failure.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from _browser import assert_fetched_only_its_folder
from _browser import build_page
from _browser import chromium_or_skip
from _browser import drive
from _browser import python_litert
from _browser import static_server
from _data_paths import multi30k_dir

from keras_attention.translation.postprocess import postprocess

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[1]
SOURCE_LENGTH = 48
N_SENTENCES = 8
OOV_TEXT = "A man ☃ walks his ♞ dog."
BLANK_TEXT = "  \t "


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def site(chromium, tmp_path_factory):
    """A trained tiny translator's export with the page beside it."""
    from keras_attention.translation.export import export_run
    from keras_attention.translation.training import train_run

    folder = tmp_path_factory.mktemp("browser")
    data = multi30k_dir()
    if not (data / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data} (see tests/_data_paths.py)")
    run = train_run(
        folder / "run", data_dir=data, preset="tiny", epochs=1, max_train_examples=600, seed=0
    )
    export_run(
        run,
        folder / "export",
        variants=("float32", "float16", "int8"),
        saved_model=False,
        source_length=SOURCE_LENGTH,
        tflite_beam=True,
    )
    site = folder / "export" / "tflite"
    build_page(site)
    return run, site


@pytest.fixture(scope="module")
def server(site):
    """A static server of the page's folder on 127.0.0.1; records each path."""
    _, folder = site
    with static_server(folder) as url_and_served:
        yield url_and_served


@pytest.fixture(scope="module")
def translator(site):
    from keras_attention.translation.translator import load_run

    run, _ = site
    return load_run(run)[0]


@pytest.fixture(scope="module")
def sentences(translator):
    """The first test_2016_flickr sentences that fit the static length (the
    tiny vocabulary cuts some into more than SOURCE_LENGTH subwords)."""
    from keras_attention.translation import load_multi30k

    lines = load_multi30k("test_2016_flickr", multi30k_dir())["test_2016_flickr"].en
    counts = translator.source_tokenizer.tokenize(tf.constant(lines[:40])).row_lengths()
    fitting = [s for s, n in zip(lines, counts.numpy(), strict=False) if n <= SOURCE_LENGTH]
    assert len(fitting) >= N_SENTENCES
    return fitting[:N_SENTENCES]


def _python_ids(tokenizer, text):
    return tokenizer.tokenize(tf.constant([text])).to_list()[0]


def _python_lite(site, variant, signature, ids, end_id):
    """Python LiteRT on the same file: output ids before END."""
    _, folder = site
    path = folder / f"translator_{variant}.tflite"
    return python_litert(path, signature, "source_ids", [ids], SOURCE_LENGTH, end_id)[0][0]


@pytest.fixture(scope="module")
def page_answers(chromium, server, sentences, tmp_path_factory):
    """One browser session: every sentence greedy and beam in float32, then
    float16, then int8, then the three bad inputs; a screenshot after the first beam."""
    url, _ = server
    cases = [{"text": s, "variant": "float32", "search": "greedy"} for s in sentences]
    cases += [{"text": s, "variant": "float32", "search": "beam"} for s in sentences]
    cases += [{"text": s, "variant": "float16", "search": "greedy"} for s in sentences]
    cases += [{"text": s, "variant": "float16", "search": "beam"} for s in sentences]
    cases += [{"text": s, "variant": "int8", "search": "greedy"} for s in sentences]
    cases += [{"text": s, "variant": "int8", "search": "beam"} for s in sentences]
    long_text = " ".join(["a very long sentence indeed"] * 12)
    cases += [
        {"text": BLANK_TEXT, "variant": "float32", "search": "greedy"},
        {"text": long_text, "search": "greedy"},
        {"text": OOV_TEXT, "search": "greedy"},
    ]
    # Each sentence again, now after another one: an answer must not depend
    # on the calls before it.
    for search in ("greedy", "beam"):
        cases += [
            {"text": s, "variant": "float32", "search": search, "again": True}
            for s in reversed(sentences)
        ]
    tmp = tmp_path_factory.mktemp("drive")
    shot = tmp / "page.png"
    answer = drive(chromium, url, cases, tmp, screenshot={"path": str(shot), "case": N_SENTENCES})
    assert len(answer["results"]) == len(cases)
    return cases, answer, shot, long_text


@pytest.mark.parametrize(
    "variant, search, signature",
    [
        ("float32", "greedy", "translate"),
        ("float32", "beam", "translate_beam"),
        ("float16", "greedy", "translate"),
        ("float16", "beam", "translate_beam"),
        ("int8", "greedy", "translate"),
        ("int8", "beam", "translate_beam"),
    ],
)
def test_page_outputs_equal_python_litert(
    site, translator, page_answers, variant, search, signature
):
    cases, answer, _, long_text = page_answers
    source, target = translator.source_tokenizer, translator.target_tokenizer
    checked = 0
    for case, result in zip(cases, answer["results"], strict=True):
        if case.get("variant", "float32") != variant or case.get("search") != search:
            continue
        if case["text"] in (BLANK_TEXT, OOV_TEXT, long_text) or case.get("again"):
            continue
        assert result["kind"] is None, result["message"]
        ids = _python_ids(source, case["text"])
        assert result["source_ids"] == ids, case["text"]
        expected = _python_lite(site, variant, signature, ids, target.end_id)
        assert result["ids"] == expected, case["text"]
        text = target.detokenize(np.array([expected + [target.end_id]], np.int32))
        # The page shows the command line's text (postprocess.js).
        assert result["output"] == postprocess(text.numpy()[0], "fr", capitalize=True)
        assert result["ms"] > 0 and result["heatmap"][0] > 0
        # The signature call is part of the answer's time, not all of it.
        assert 0 < result["model_ms"] <= result["ms"]
        checked += 1
    assert checked == N_SENTENCES


@pytest.mark.parametrize("search, signature", [("greedy", "translate"), ("beam", "translate_beam")])
def test_an_answer_does_not_depend_on_the_calls_before_it(
    site, translator, page_answers, search, signature
):
    # LiteRT.js 2.5.3 once gave a later call's decoder loop the encoder
    # outputs of an earlier call (a batched product that read the loop's
    # memory as its right-hand side): right after a page load, wrong after.
    cases, answer, _, _ = page_answers
    source, target = translator.source_tokenizer, translator.target_tokenizer
    again = [
        (case, result)
        for case, result in zip(cases, answer["results"], strict=True)
        if case.get("again") and case["search"] == search
    ]
    assert len(again) == N_SENTENCES
    for case, result in again:
        ids = _python_ids(source, case["text"])
        expected = _python_lite(site, "float32", signature, ids, target.end_id)
        assert result["ids"] == expected, case["text"]


def test_the_default_variant_is_float16(chromium, server, sentences, tmp_path):
    # float16 gives Python LiteRT's ids; int8 is a little smaller and faster
    # on the page, but not always the same ids (docs/deploy.md).
    url, _ = server
    answer = drive(chromium, url, [{"text": sentences[0], "search": "greedy"}], tmp_path)
    assert answer["results"][0]["variant"] == "float16"
    assert answer["results"][0]["kind"] is None, answer["results"][0]["message"]


def test_blank_input_gets_the_documented_answer(page_answers):
    cases, answer, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == BLANK_TEXT))]
    assert result["kind"] == "blank"
    assert result["message"] == "Nothing to translate: type an English sentence."
    assert result["output"] == "" and result["ids"] is None


def test_over_long_input_names_its_length_and_the_bound(translator, page_answers):
    cases, answer, _, long_text = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == long_text))]
    n = len(_python_ids(translator.source_tokenizer, long_text))
    assert n > SOURCE_LENGTH
    assert result["kind"] == "too_long"
    assert result["message"] == (
        f"Too long: this sentence has {n} subwords and the model reads at most "
        f"{SOURCE_LENGTH} (source_length in translator.json). Split it into shorter sentences."
    )
    assert result["ids"] is None


def test_characters_outside_the_vocabulary_are_named_and_read_as_unk(
    site, translator, page_answers
):
    cases, answer, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == OOV_TEXT))]
    source, target = translator.source_tokenizer, translator.target_tokenizer
    ids = _python_ids(source, OOV_TEXT)
    assert ids.count(source.unk_id) == 2
    assert result["source_ids"] == ids
    assert result["ids"] == _python_lite(site, "float32", "translate", ids, target.end_id)
    assert result["kind"] is None
    assert result["warning"].startswith("Not in the model's vocabulary, read as [UNK]: “☃”; “♞”.")


def test_page_fetches_only_its_own_folder_and_logs_no_error(site, server, page_answers):
    _, answer, _, _ = page_answers
    url, served = server
    assert_fetched_only_its_folder(answer, url, served, site[1])


def test_screenshot_shows_the_page_with_its_heatmap(page_answers):
    cases, answer, shot, _ = page_answers
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = answer["results"][N_SENTENCES]  # the screenshot's case
    assert cases[N_SENTENCES]["search"] == "beam"
    width, height = result["heatmap"]
    assert width > 0 and height > 0


def test_page_without_static_length_refuses_to_build(tmp_path):
    (tmp_path / "translator.json").write_text(json.dumps({"source_length": None, "models": {}}))
    if shutil.which("node") is None:
        pytest.skip("no `node` on the PATH")
    done = subprocess.run(
        ["node", str(ROOT / "web" / "build.mjs"), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--source-length" in done.stderr


def test_translator_checks_ids_and_text_before_any_model_call(tmp_path):
    # web/src/translator.js in Node, without a model: the checks an app needs
    # because the raw signatures check nothing.
    if shutil.which("node") is None:
        reason = "no `node` on the PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog", "##s", "run", "."]
    entry = {"vocab_file": "v.txt", "vocab_size": len(vocab), "lower_case": True}
    config = {
        "source": entry,
        "target": entry,
        "pad_id": 0,
        "unk_id": 1,
        "start_id": 2,
        "end_id": 3,
        "suffix_indicator": "##",
        "max_bytes_per_word": 100,
        "source_length": 6,
        "max_source_length": 512,
        "signatures": {"translate": {"inputs": ["source_ids"], "search": "greedy"}},
    }
    request = {
        "config": config,
        "source_vocab": vocab,
        "target_vocab": vocab,
        "ids": [[4, 5, 6], [], [4, -1], [4, 2.5], [4, 9], [4] * 7],
        "texts": ["A dogs run.", " \u00a0\t", "a dog " * 4, "A ☃ dog", "a\x00dog"],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    done = subprocess.run(
        ["node", str(ROOT / "tests" / "browser" / "translator_checks.mjs"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    bad_id = "RangeError: Invalid source id {} at position 1: ids must be integers in [0, 9)."
    assert answer["ids"] == [
        None,
        None,
        bad_id.format(-1),
        bad_id.format(2.5),
        bad_id.format(9),
        "RangeError: The source has 7 ids, more than the model's 6.",
    ]
    ok, blank, long, unknown, nul = answer["texts"]
    assert ok == {"ids": [4, 5, 6, 7, 8], "unknown": []}
    assert blank == {
        "kind": "blank",
        "message": "InputError: Nothing to translate: type an English sentence.",
    }
    assert long["kind"] == "too_long"
    assert long["message"] == (
        "InputError: Too long: this sentence has 8 subwords and the model reads at most 6 "
        "(source_length in translator.json). Split it into shorter sentences."
    )
    assert unknown == {"ids": [4, 1, 5], "unknown": [["☃", ["☃"], None]]}
    assert nul["kind"] == "character" and "U+0000 at position 1" in nul["message"]
