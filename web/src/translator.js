// The exported translator in the browser: text in, text and attention out, on LiteRT.js.
//
// Reads an export's tflite/ folder (python -m keras_attention.translation export
// RUN OUT --source-length N --tflite-beam): translator.json, the two vocabulary
// files and one .tflite variant. Every call checks what the model cannot:
// the ids (the raw signatures do not check them) and the length (a model with
// a static source length N holds at most N subwords). The model's own loop
// (greedy `translate`, beam `translate_beam`) runs on LiteRT.js's `wasm`
// accelerator.
//
//   import { Translator } from "./src/translator.js";
//   const translator = await Translator.load(new URL("./", location.href), {
//     variant: "int8", wasmUrl: new URL("./vendor/wasm/", location.href).href,
//   });
//   const result = await translator.translate("A man rides a bike.", { search: "beam" });
//   result.text;       // "Un homme fait du vélo." (as the command line prints it)
//   result.attention;  // output pieces × source pieces, rows of Float32Array

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
import { postprocess } from "./postprocess.js";
import { WordpieceTokenizer } from "./tokenizer.js";

export { InputError };

export const CONFIG_FILE = "translator.json";

export class Translator {
  /**
   * @param {object} config the parsed translator.json.
   * @param {WordpieceTokenizer} source
   * @param {WordpieceTokenizer} target
   * @param {object} model a LiteRT.js CompiledModel.
   * @param {string} variant "float32", "float16" or "int8".
   */
  constructor(config, source, target, model, variant) {
    this.config = config;
    this.source = source;
    this.target = target;
    this.model = model;
    this.variant = variant;
    this.sourceLength = config.source_length;
    this.maxSourceLength = config.max_source_length;
    this.inputName = config.signatures[signatureFor(config, "greedy")].inputs[0];
    this.signatures = { greedy: signatureFor(config, "greedy"), beam: signatureFor(config, "beam") };
  }

  /**
   * Reads translator.json (unless `config` holds it already) and the
   * vocabularies under `baseUrl`, loads the runtime and compiles the variant's
   * model.
   */
  static async load(baseUrl, { variant, wasmUrl, config = null }) {
    const base = new URL(baseUrl);
    config ??= await (await fetchOk(new URL(CONFIG_FILE, base))).json();
    checkManifest(config, variant, CONFIG_FILE);
    const [sourceText, targetText] = await Promise.all(
      ["source", "target"].map(async (side) => {
        const url = new URL(config[side].vocab_file, base);
        return (await fetchOk(url)).text();
      }),
    );
    const source = WordpieceTokenizer.fromConfig(config, "source", sourceText);
    const target = WordpieceTokenizer.fromConfig(config, "target", targetText);
    await loadRuntime(wasmUrl);
    const modelUrl = new URL(config.models[variant], base).href;
    const model = await loadAndCompile(modelUrl, { accelerator: "wasm" });
    return new Translator(config, source, target, model, variant);
  }

  /** The search kinds this export has: "greedy", and "beam" with --tflite-beam. */
  get searches() {
    return Object.keys(this.signatures).filter((kind) => this.signatures[kind]);
  }

  /**
   * Text → source ids, refusing what the model cannot take: a blank text, more
   * subwords than the static length. Words with characters outside the
   * vocabulary become [UNK] (as in training); they are listed in `unknown`.
   */
  prepare(text) {
    let analysis;
    try {
      analysis = this.source.analyze(text);
    } catch (error) {
      throw new InputError("character", error.message);
    }
    if (analysis.ids.length === 0) {
      throw new InputError("blank", "Nothing to translate: type an English sentence.");
    }
    const limit = Math.min(this.sourceLength, this.maxSourceLength);
    if (analysis.ids.length > limit) {
      throw new InputError(
        "too_long",
        `Too long: this sentence has ${analysis.ids.length} subwords and the model reads ` +
          `at most ${limit} (source_length in ${CONFIG_FILE}). Split it into shorter sentences.`,
        { subwords: analysis.ids.length, limit },
      );
    }
    const unknown = analysis.words.filter((w) => w.ids.length === 1 && w.ids[0] === this.source.unkId);
    return { ids: analysis.ids, unknown };
  }

  /**
   * Throws a RangeError unless `ids` fit the model: at most the static length
   * and `max_source_length`, each an integer in [0, source vocabulary).
   */
  checkIds(ids) {
    checkSourceIds(ids, Math.min(this.sourceLength, this.maxSourceLength), this.source.vocabSize);
  }

  /**
   * Runs one search signature on source ids (checked, then padded with
   * pad_id to the static length). Returns the output ids before [END], the
   * attention rows (one Float32Array of the real source positions per output
   * id), the log-probability and, for beam, the score.
   */
  async runIds(ids, search = "greedy") {
    this.checkIds(ids);
    const signature = this.signatures[search];
    if (!signature) {
      throw new Error(
        `This export has no ${search} signature (export it with --tflite-beam for beam search).`,
      );
    }
    return runSearch(this.model, {
      signature,
      inputName: this.inputName,
      ids,
      sourceLength: this.sourceLength,
      padId: this.config.pad_id,
      endId: this.target.endId,
    });
  }

  /**
   * English text → {text, sourceIds, sourcePieces, outputIds, outputPieces,
   * attention, unknown, milliseconds, modelMilliseconds}: the whole
   * translation's time, and the signature call's alone. Throws InputError for a text the
   * model cannot take (see `prepare`).
   */
  async translate(text, { search = "greedy" } = {}) {
    const started = performance.now();
    const { ids, unknown } = this.prepare(text);
    const result = await this.runIds(ids, search);
    return {
      // The command line's text: Moses' French rules and a capital (postprocess.js).
      text: postprocess(this.target.detokenize(result.ids), { capitalize: true }),
      sourceIds: ids,
      sourcePieces: this.source.pieces(ids),
      outputIds: result.ids,
      outputPieces: this.target.pieces(result.ids),
      attention: result.attention,
      logProb: result.logProb,
      score: result.score,
      unknown,
      search,
      variant: this.variant,
      milliseconds: performance.now() - started,
      modelMilliseconds: result.milliseconds,
    };
  }

  delete() {
    this.model.delete();
  }
}
