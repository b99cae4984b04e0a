// Runs web/src/postprocess.js in Node for tests/test_web_postprocess.py.
//
//   node tests/browser/postprocess.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"texts": [...]}; ANSWER: {"texts": [postprocess(text, capitalize) per text]}
import { readFileSync } from "node:fs";

import { postprocess } from "../../web/src/postprocess.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const texts = request.texts.map((text) => postprocess(text, { capitalize: true }));
process.stdout.write(JSON.stringify({ texts }));
