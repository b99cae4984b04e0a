// The exported grapheme-to-phoneme model in the browser: words in, ARPAbet
// phones and the attention over the letters out, on LiteRT.js.
//
// Reads an export's tflite/ folder (python examples/g2p_cmudict.py export
// --run-dir RUN OUT --source-length N): g2p.json (the two vocabularies, the
// ids, the signatures) and one .tflite variant. A word is upper-cased, each
// character mapped to its index in `graphemes`; a character that is not there
// is refused, naming the word, as the Python `pronounce` command does.
//
//   import { Pronouncer } from "./src/pronouncer.js";
//   const g2p = await Pronouncer.load(new URL("./", location.href), {
//     variant: "float32", wasmUrl: new URL("./vendor/wasm/", location.href).href,
//   });
//   const [keras] = (await g2p.pronounce("Keras")).words;
//   keras.phones;     // ["K", "EH", "R", "AH", "S"]
//   keras.attention;  // phones × letters, rows of Float32Array

import { loadAndCompile } from "@litertjs/core";

import {
  InputError,
  checkManifest,
  checkSourceIds,
  fetchOk,
  loadRuntime,
  runSearch,
  signatureFor,
} from "./litert_model.js";

export { InputError };

export const CONFIG_FILE = "g2p.json";

export class Pronouncer {
  /**
   * @param {object} config the parsed g2p.json.
   * @param {object} model a LiteRT.js CompiledModel.
   * @param {string} variant "float32", "float16" or "int8".
   */
  constructor(config, model, variant) {
    this.config = config;
    this.model = model;
    this.variant = variant;
    this.graphemeIds = new Map(config.graphemes.map((g, id) => [g, id]).filter(([, id]) => id > 0));
    this.limit = Math.min(config.source_length, config.max_source_length ?? Infinity);
    this.signatures = { greedy: signatureFor(config, "greedy"), beam: signatureFor(config, "beam") };
    this.inputName = config.signatures[this.signatures.greedy].inputs[0];
  }

  /** Reads g2p.json (unless `config` holds it), loads the runtime, compiles the variant. */
  static async load(baseUrl, { variant, wasmUrl, config = null }) {
    const base = new URL(baseUrl);
    config ??= await (await fetchOk(new URL(CONFIG_FILE, base))).json();
    checkManifest(config, variant, CONFIG_FILE);
    await loadRuntime(wasmUrl);
    const modelUrl = new URL(config.models[variant], base).href;
    const model = await loadAndCompile(modelUrl, { accelerator: "wasm" });
    return new Pronouncer(config, model, variant);
  }

  /** The search kinds this export has: "greedy" and "beam". */
  get searches() {
    return Object.keys(this.signatures).filter((kind) => this.signatures[kind]);
  }

  /**
   * Text → the words it holds (split at white space), each `{word, ids}`.
   * Throws InputError for a blank text, a word with a character outside the
   * vocabulary (named, with its position) or longer than the static length.
   */
  prepare(text) {
    const words = text.split(/\s+/u).filter((w) => w.length > 0);
    if (words.length === 0) throw new InputError("blank", "Nothing to pronounce: type a word.");
    return words.map((word, index) => {
      const letters = [...word.toUpperCase()];
      const unknown = [...new Set(letters.filter((c) => !this.graphemeIds.has(c)))];
      if (unknown.length) {
        const known = this.config.graphemes.slice(1).join("");
        throw new InputError(
          "character",
          `Word ${index + 1}, “${word}”, has characters outside the vocabulary: ` +
            `${unknown.map((c) => `“${c}”`).join(", ")} (known: ${known}, any case).`,
          { word, unknown },
        );
      }
      if (letters.length > this.limit) {
        throw new InputError(
          "too_long",
          `Too long: word ${index + 1} has ${letters.length} letters and the model reads at ` +
            `most ${this.limit} (source_length in ${CONFIG_FILE}).`,
          { word, letters: letters.length, limit: this.limit },
        );
      }
      return { word, ids: letters.map((c) => this.graphemeIds.get(c)) };
    });
  }

  /** Phone ids → phones; the ids below the first phone (pad, start, end) are dropped. */
  phones(ids) {
    const first = Math.max(this.config.pad_id, this.config.start_id, this.config.end_id) + 1;
    return ids.filter((id) => id >= first).map((id) => this.config.phones[id]);
  }

  /** Runs one search on checked grapheme ids: `runSearch`'s result. */
  async runIds(ids, search = "greedy") {
    checkSourceIds(ids, this.limit, this.config.source_vocab_size);
    const signature = this.signatures[search];
    if (!signature) throw new Error(`This export has no ${search} signature.`);
    return runSearch(this.model, {
      signature,
      inputName: this.inputName,
      ids,
      sourceLength: this.config.source_length,
      padId: this.config.pad_id,
      endId: this.config.end_id,
    });
  }

  /**
   * Text → {words: [{word, letters, ids (graphemes), outputIds, phones,
   * attention}], search, variant, milliseconds}. Every word is checked before
   * any is pronounced.
   */
  async pronounce(text, { search = "greedy" } = {}) {
    const started = performance.now();
    const prepared = this.prepare(text);
    const words = [];
    for (const { word, ids } of prepared) {
      const result = await this.runIds(ids, search);
      words.push({
        word,
        letters: [...word.toUpperCase()],
        ids,
        outputIds: result.ids,
        phones: this.phones(result.ids),
        attention: result.attention,
      });
    }
    return { words, search, variant: this.variant, milliseconds: performance.now() - started };
  }

  delete() {
    this.model.delete();
  }
}
