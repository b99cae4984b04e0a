"""The G2P page in Chromium against Python LiteRT: parity and speed per word.

Exports a G2P run with a static source length (`examples/g2p_cmudict.py
export --source-length`), writes the G2P page beside it (`node
web/build.mjs`), serves it on 127.0.0.1 and, in headless Chromium
(`tests/browser/drive.mjs`), types the first `--words` test words into the
page in one text, for each variant and search. Then Python LiteRT
(`ai_edge_litert`, one thread) runs the same .tflite file on the same padded
ids. Reports, per variant and search:

- parity: the words whose phone ids on the page equal Python LiteRT's, and
  whose grapheme ids equal the example's `Vocabulary`;
- speed: milliseconds per word on the page (the page's own timing of the
  whole text: checks, the signature calls, phones; one WebAssembly thread)
  and in Python (the signature call alone), and their ratio.

`--screenshot PATH` saves the page with the first word's heatmap. Prints the
table; `--write` puts it in docs/benchmarks.md ("The G2P page in the
browser").

    python benchmarks/g2p_browser_benchmark.py --run-dir runs/g2p --words 2000 \\
        --screenshot docs/img/browser_g2p.png --write

About 5 minutes for 2,000 words and three variants on a 2-core CPU.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(ROOT / "tests"))

import _browser  # noqa: E402
import _report  # noqa: E402
from _scripts import load_script  # noqa: E402

SECTION = "The G2P page in the browser"
SIGNATURES = {"greedy": "generate", "beam": "generate_beam"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--run-dir", required=True, help="a trained G2P run")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "cmudict"))
    parser.add_argument("--words", type=int, default=2000, help="the first N test words")
    parser.add_argument("--variants", default="float32,float16,int8")
    parser.add_argument("--source-length", type=int, default=32, help="the static length")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshot", help="save the page with its heatmap as this PNG")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    g2p = load_script("examples/g2p_cmudict.py")
    variants = [v for v in args.variants.split(",") if v]
    load = os.getloadavg()[0]
    _, vocab, _ = g2p.load_run(args.run_dir)
    test = g2p.read_split(args.data_dir, "cmudict-0.7b.test")
    words = [w for w in test if len(w) <= args.source_length][: args.words]
    sources = [vocab.encode_word(w) for w in words]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "export"
        g2p.main(
            ["export", "--run-dir", args.run_dir, str(out), "--variants", ",".join(variants)]
            + ["--source-length", str(args.source_length)]
        )
        folder = out / "tflite"
        _browser.build_page(folder)
        manifest = json.loads((folder / "g2p.json").read_text())
        with _browser.static_server(folder) as (url, _):
            for variant in variants:
                cases = [
                    {"text": "\n".join(words), "variant": variant, "search": s, "type": False}
                    for s in SIGNATURES
                ]
                answer = _browser.drive(
                    args.chromium, url, cases, tmp, button="#pronounce", timeout_ms=1_800_000
                )
                for (search, signature), result in zip(
                    SIGNATURES.items(), answer["results"], strict=True
                ):
                    path = folder / manifest["models"][variant]
                    lite, lite_ms = _browser.python_litert(
                        path, signature, "source", sources, args.source_length, g2p.END
                    )
                    rows.append(
                        {
                            "variant": variant,
                            "search": search,
                            "n": len(words),
                            "source_equal": sum(
                                a == b for a, b in zip(result["source_ids"], sources, strict=True)
                            ),
                            "equal": sum(a == b for a, b in zip(result["ids"], lite, strict=True)),
                            "page_ms": result["ms"] / len(words),
                            "python_ms": sum(lite_ms) / len(words),
                            "size": path.stat().st_size,
                        }
                    )
                    print(rows[-1], flush=True)
            if args.screenshot:
                _browser.drive(
                    args.chromium,
                    url,
                    [{"text": "thoughtful phoneme xylophone", "search": "beam"}],
                    tmp,
                    screenshot={"path": str(Path(args.screenshot).resolve()), "case": 0},
                    button="#pronounce",
                )
    lines = [
        f"The G2P page (`web/g2p.html`, LiteRT.js on WebAssembly, headless Chromium) "
        f"against Python LiteRT (`ai_edge_litert`, one thread) on the same .tflite files "
        f"(static length {args.source_length}): the first {len(words)} words of "
        f"`cmudict-0.7b.test`, typed into the page as one text. Run: `{args.run_dir}`. "
        "Page ms: the page's time for the whole text over the words (checks, signature "
        "calls, phones); Python ms: the signature calls alone, mean per word.",
        "",
        "| variant | model file | search | grapheme ids equal | phone ids equal | "
        "page ms / word | Python ms / word | page / Python |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['size'] / 1e6:.2f} MB | {r['search']} | "
            f"{r['source_equal']}/{r['n']} | {r['equal']}/{r['n']} | {r['page_ms']:.2f} | "
            f"{r['python_ms']:.2f} | {r['page_ms'] / r['python_ms']:.2f}× |"
        )
    lines += [
        "",
        f"Load average {load:.1f} at the start ({os.cpu_count()} cores): other jobs "
        "slow both sides, compare the ratio.  ",
        *_report.footer_lines(),
    ]
    body = "\n".join(lines)
    print(body)
    if args.write:
        print(f"\nWrote {_report.write_section(SECTION, body)}")


if __name__ == "__main__":
    main()
