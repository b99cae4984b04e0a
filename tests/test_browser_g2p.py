"""The exported G2P model pronounces words in a real browser, as Python LiteRT does.

The G2P example trains its tiny `--quick` model, exports it as the page wants
it (`--source-length 24`, float32 and int8, greedy and beam) and
`node web/build.mjs` writes the G2P page beside it (the manifest is g2p.json).
Headless Chromium types words into the page. The references are independent
of the page's JavaScript: the grapheme ids from the example's `Vocabulary`,
the phone ids from Python LiteRT's `generate` / `generate_beam` on the same
model file, the phones from `Vocabulary.decode_phones`.
"""

import json

import pytest
from _browser import assert_fetched_only_its_folder
from _browser import build_page
from _browser import chromium_or_skip
from _browser import drive
from _browser import python_litert
from _browser import static_server
from _scripts import ROOT
from _scripts import load_script

pytestmark = pytest.mark.tensorflow

DATA = ROOT.parent / "shared" / "data" / "cmudict"
SOURCE_LENGTH = 24
LONG_WORD = "Supercalifragilisticexpialidocious"  # 34 letters
BLANK_TEXT = " \n\t "
BAD_TEXT = "fine Zoë"
MIXED_CASE = "KeRaS"
VARIANTS = ("float32", "int8")


@pytest.fixture(scope="module")
def chromium():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def g2p():
    return load_script("examples/g2p_cmudict.py")


@pytest.fixture(scope="module")
def site(chromium, g2p, tmp_path_factory):
    """A quick G2P run's export with the page beside it."""
    if not (DATA / "cmudict-0.7b.train").exists():
        pytest.fail(f"CMUdict is not in {DATA}")
    folder = tmp_path_factory.mktemp("g2p_browser")
    run = folder / "run"
    g2p.main(["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run), "--verbose", "0"])
    export = folder / "export"
    g2p.main(
        [
            "export",
            "--run-dir",
            str(run),
            str(export),
            "--variants",
            ",".join(VARIANTS),
            "--source-length",
            str(SOURCE_LENGTH),
        ]
    )
    build_page(export / "tflite")
    return run, export / "tflite"


@pytest.fixture(scope="module")
def words(g2p):
    """Test words of every length up to 15 letters, and one of mixed case."""
    test = sorted(g2p.read_split(str(DATA), "cmudict-0.7b.test"))
    chosen = [w for w in test[::997] if len(w) <= 15][:10]
    assert len({len(w) for w in chosen}) >= 4
    return chosen


@pytest.fixture(scope="module")
def page_answers(chromium, site, words, tmp_path_factory):
    """One browser session: all words in one text, greedy and beam, float32
    then int8; then the mixed-case word and the three bad inputs."""
    _, folder = site
    typed = _typed(words)
    text = " ".join(typed[:5]) + "\n" + " ".join(typed[5:])
    cases = [
        {"text": text, "variant": variant, "search": search}
        for variant in VARIANTS
        for search in ("greedy", "beam")
    ]
    cases += [
        {"text": MIXED_CASE, "variant": "float32", "search": "greedy"},
        {"text": BLANK_TEXT, "search": "greedy"},
        {"text": LONG_WORD, "search": "greedy"},
        {"text": BAD_TEXT, "search": "greedy"},
    ]
    tmp = tmp_path_factory.mktemp("drive")
    shot = tmp / "g2p_page.png"
    with static_server(folder) as (url, served):
        answer = drive(
            chromium,
            url,
            cases,
            tmp,
            screenshot={"path": str(shot), "case": 0},
            button="#pronounce",
        )
    assert len(answer["results"]) == len(cases)
    return cases, answer, url, served, shot


def _typed(words):
    """The words as typed into the page: the first five in lower case."""
    return [w.lower() for w in words[:5]] + words[5:]


def _python_lite(folder, variant, signature, ids, end_id):
    path = folder / f"g2p_{variant}.tflite"
    return python_litert(path, signature, "source", [ids], SOURCE_LENGTH, end_id)[0][0]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("search, signature", [("greedy", "generate"), ("beam", "generate_beam")])
def test_page_phones_equal_python_litert(
    g2p, site, words, page_answers, variant, search, signature
):
    run, folder = site
    cases, answer, _, _, _ = page_answers
    index = next(
        i for i, c in enumerate(cases) if c.get("variant") == variant and c["search"] == search
    )
    result = answer["results"][index]
    assert result["kind"] is None, result["message"]
    _, vocab, _ = g2p.load_run(str(run))
    lines = result["output"].split("\n")
    assert len(lines) == len(words) == len(result["ids"]) == len(result["source_ids"])
    nonempty = 0
    for word, typed, line, source_ids, ids in zip(
        words, _typed(words), lines, result["source_ids"], result["ids"], strict=True
    ):
        assert source_ids == vocab.encode_word(word), word
        expected = _python_lite(folder, variant, signature, source_ids, g2p.END)
        assert ids == expected, word
        phones = vocab.decode_phones(expected + [g2p.END])
        assert line.split() == [typed, *phones]
        nonempty += len(phones) > 0
    assert nonempty > len(words) // 2  # real phones, not END alone
    assert result["ms"] > 0 and result["heatmap"][0] > 0


def test_mixed_case_is_read_as_upper_case(g2p, site, page_answers):
    run, folder = site
    cases, answer, _, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == MIXED_CASE))]
    _, vocab, _ = g2p.load_run(str(run))
    ids = vocab.encode_word(MIXED_CASE.upper())
    assert result["source_ids"] == [ids]
    assert result["ids"] == [_python_lite(folder, "float32", "generate", ids, g2p.END)]


def test_blank_input_gets_the_documented_answer(page_answers):
    cases, answer, _, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == BLANK_TEXT))]
    assert result["kind"] == "blank"
    assert result["message"] == "Nothing to pronounce: type a word."
    assert result["output"] == "" and result["ids"] is None


def test_over_long_word_names_its_length_and_the_bound(page_answers):
    cases, answer, _, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == LONG_WORD))]
    assert result["kind"] == "too_long"
    assert result["message"] == (
        f"Too long: word 1 has {len(LONG_WORD)} letters and the model reads at most "
        f"{SOURCE_LENGTH} (source_length in g2p.json)."
    )
    assert result["ids"] is None


def test_characters_outside_the_vocabulary_are_named(page_answers):
    cases, answer, _, _, _ = page_answers
    result = answer["results"][cases.index(next(c for c in cases if c["text"] == BAD_TEXT))]
    assert result["kind"] == "character"
    assert result["message"] == (
        "Word 2, “Zoë”, has characters outside the vocabulary: “Ë” "
        "(known: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ, any case)."
    )
    assert result["ids"] is None  # nothing pronounced, not even "fine"


def test_page_fetches_only_its_own_folder_and_logs_no_error(site, page_answers):
    _, answer, url, served, _ = page_answers
    assert_fetched_only_its_folder(answer, url, served, site[1])


def test_manifest_and_screenshot(site, page_answers):
    _, folder = site
    manifest = json.loads((folder / "g2p.json").read_text())
    assert manifest["source_length"] == SOURCE_LENGTH
    assert sorted(manifest["models"]) == sorted(VARIANTS)
    assert (folder / "index.html").read_text().count("g2p_app.js") == 1
    _, answer, _, _, shot = page_answers
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = answer["results"][0]["heatmap"]
    assert width > 0 and height > 0
