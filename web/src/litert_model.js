// What every exported keras_attention model needs in the browser, whatever
// its task: the LiteRT.js runtime loaded once, the manifest's signatures, and
// one call of a search signature (greedy or beam, the loop inside the model)
// on a source padded to the model's static length.
//
// Used by translator.js (English → French) and pronouncer.js (words → phones).

import { Tensor, loadLiteRt } from "@litertjs/core";

/**
 * Text the page refuses before the model runs, with what to do about it.
 * `kind`: "blank", "too_long" or "character".
 */
export class InputError extends Error {
  constructor(kind, message, details = {}) {
    super(message);
    this.name = "InputError";
    this.kind = kind;
    this.details = details;
  }
}

let liteRtLoading = null;

/** Loads the LiteRT.js runtime once per page from the folder of its .wasm files. */
export function loadRuntime(wasmUrl) {
  liteRtLoading ??= loadLiteRt(wasmUrl);
  return liteRtLoading;
}

/** `fetch` that throws, naming the URL, unless the answer is 2xx. */
export async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${response.statusText}`);
  return response;
}

/** The signature whose manifest entry has `search` equal to `kind`, or null. */
export function signatureFor(config, kind) {
  const entry = Object.entries(config.signatures ?? {}).find(([, s]) => s.search === kind);
  return entry ? entry[0] : null;
}

/**
 * Throws unless the manifest `config` (named `file`) can serve `variant` in
 * LiteRT.js: a static source length, that variant's model, a greedy signature.
 */
export function checkManifest(config, variant, file) {
  if (!Number.isInteger(config.source_length)) {
    throw new Error(
      `${file} has no static source_length: LiteRT.js refuses a dynamic input ` +
        "dimension. Export with --source-length N.",
    );
  }
  if (!config.models?.[variant]) {
    const known = Object.keys(config.models ?? {}).join(", ");
    throw new Error(`${file} has no "${variant}" model; it has: ${known}.`);
  }
  if (!signatureFor(config, "greedy")) throw new Error(`${file} lists no greedy signature.`);
}

/**
 * Throws a RangeError unless `ids` fit the model: at most `limit` of them,
 * each an integer in [0, vocabSize). The raw signatures check nothing.
 */
export function checkSourceIds(ids, limit, vocabSize) {
  if (ids.length > limit) {
    throw new RangeError(`The source has ${ids.length} ids, more than the model's ${limit}.`);
  }
  ids.forEach((id, position) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new RangeError(
        `Invalid source id ${id} at position ${position}: ids must be integers in [0, ${vocabSize}).`,
      );
    }
  });
}

/**
 * Runs one search signature of a compiled model on checked source ids, padded
 * with `padId` to `sourceLength`. Returns the output ids before `endId`, the
 * attention rows (one Float32Array over the real source positions per output
 * id), the log-probability, for beam the score, and `milliseconds`: the time
 * of the signature call alone (what Python LiteRT's runner measures).
 */
export async function runSearch(model, { signature, inputName, ids, sourceLength, padId, endId }) {
  const padded = new Int32Array(sourceLength).fill(padId);
  padded.set(ids);
  const input = new Tensor(padded, [1, sourceLength]);
  let outputs;
  let milliseconds;
  try {
    const started = performance.now();
    outputs = await model.run(signature, { [inputName]: input });
    milliseconds = performance.now() - started;
  } finally {
    input.delete();
  }
  try {
    const tokens = Array.from(outputs.tokens.toTypedArray());
    let n = outputs.lengths.toTypedArray()[0];
    if (n > 0 && tokens[n - 1] === endId) n -= 1;
    const [, , columns] = outputs.attention.type.layout.dimensions; // (1, L, S)
    const weights = outputs.attention.toTypedArray();
    const attention = [];
    for (let row = 0; row < n; row++) {
      attention.push(weights.slice(row * columns, row * columns + ids.length));
    }
    return {
      ids: tokens.slice(0, n),
      attention,
      logProb: outputs.log_probs.toTypedArray()[0],
      score: outputs.scores ? outputs.scores.toTypedArray()[0] : null,
      milliseconds,
    };
  } finally {
    for (const tensor of Object.values(outputs)) tensor.delete();
  }
}
