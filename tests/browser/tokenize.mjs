// Runs web/src/tokenizer.js in Node for tests/test_web_tokenizer.py.
//
//   node tests/browser/tokenize.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"vocab_file", "lower_case", "sentences": [...], "id_rows": [[...], ...]}
// ANSWER:  {"ids": [[...] or {"error": message} per sentence],
//           "texts": [detokenized text per id row]}
import { readFileSync } from "node:fs";

import { WordpieceTokenizer, parseVocabulary } from "../../web/src/tokenizer.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const vocab = parseVocabulary(readFileSync(request.vocab_file, "utf-8"));
const tokenizer = new WordpieceTokenizer(vocab, { lowerCase: request.lower_case });
const answer = {
  ids: request.sentences.map((sentence) => {
    try {
      return tokenizer.tokenize(sentence);
    } catch (error) {
      return { error: error.message };
    }
  }),
  texts: request.id_rows.map((row) => tokenizer.detokenize(row)),
};
process.stdout.write(JSON.stringify(answer));
