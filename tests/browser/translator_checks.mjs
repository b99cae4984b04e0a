// Runs the checks of web/src/translator.js that need no model, in Node, for
// tests/test_browser.py: `checkIds` and `prepare`.
//
//   node tests/browser/translator_checks.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"config": translator.json's dict, "source_vocab": [...],
//           "target_vocab": [...], "ids": [[...], ...], "texts": [...]}
// ANSWER:  {"ids": [null or the error message], "texts": [{"ids", "unknown"}
//           or {"kind", "message"}]}
import { readFileSync } from "node:fs";

import { WordpieceTokenizer } from "../../web/src/tokenizer.js";
import { Translator } from "../../web/src/translator.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const { config } = request;
const source = WordpieceTokenizer.fromConfig(config, "source", request.source_vocab.join("\n"));
const target = WordpieceTokenizer.fromConfig(config, "target", request.target_vocab.join("\n"));
const translator = new Translator(config, source, target, null, "float32");
const answer = {
  ids: request.ids.map((ids) => {
    try {
      translator.checkIds(ids);
      return null;
    } catch (error) {
      return `${error.name}: ${error.message}`;
    }
  }),
  texts: request.texts.map((text) => {
    try {
      const { ids, unknown } = translator.prepare(text);
      return { ids, unknown: unknown.map((w) => [w.word, w.unknownCharacters, w.tooLong ?? null]) };
    } catch (error) {
      return { kind: error.kind ?? null, message: `${error.name}: ${error.message}` };
    }
  }),
};
process.stdout.write(JSON.stringify(answer));
