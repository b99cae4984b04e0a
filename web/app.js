// The translation page: a text box, a model variant, greedy or beam, the
// French output, the time taken and the attention heatmap. Everything it
// fetches lies in its own folder (written there by web/build.mjs beside an
// export). `src/page.js` runs the page; this file says what is the
// translator's own.
//
// Data attributes for scripts and tests, besides page.js's:
// #output[data-ids] and [data-source-ids] (JSON).

import { drawHeatmap } from "./src/heatmap.js";
import { startPage } from "./src/page.js";
import { CONFIG_FILE, Translator } from "./src/translator.js";

const WASM_URL = new URL("./vendor/wasm/", import.meta.url).href;
const BASE_URL = new URL("./", import.meta.url).href;

const $ = (id) => document.getElementById(id);

function describeUnknown(unknown) {
  const words = unknown.map((w) => {
    if (w.tooLong) return `“${w.word.slice(0, 20)}…” (${w.tooLong} bytes, longer than a word may be)`;
    const chars = w.unknownCharacters.map((c) => `“${c}”`).join(", ");
    return chars && chars !== `“${w.word}”` ? `“${w.word}” (${chars})` : `“${w.word}”`;
  });
  return (
    `Not in the model's vocabulary, read as [UNK]: ${words.join("; ")}. ` +
    "The translation of those words is unreliable."
  );
}

async function show(translator, text, search) {
  const result = await translator.translate(text, { search });
  const output = $("output");
  output.textContent = result.text;
  output.dataset.ids = JSON.stringify(result.outputIds);
  output.dataset.sourceIds = JSON.stringify(result.sourceIds);
  const time = $("time");
  time.textContent =
    `${result.milliseconds.toFixed(1)} ms · ${result.variant}, ${result.search} · ` +
    `${result.sourceIds.length} source and ${result.outputIds.length} output subwords`;
  time.dataset.ms = result.milliseconds.toFixed(3);
  time.dataset.modelMs = result.modelMilliseconds.toFixed(3);
  if (result.unknown.length) $("warning").textContent = describeUnknown(result.unknown);
  if (result.outputIds.length) {
    drawHeatmap($("heatmap"), result.attention, result.sourcePieces, result.outputPieces);
  }
}

startPage({
  configFile: CONFIG_FILE,
  preferredVariants: ["float16", "int8", "float32"],
  buttonId: "translate",
  busyText: "Translating…",
  failText: "The translation failed",
  load: (variant, config) => Translator.load(BASE_URL, { variant, wasmUrl: WASM_URL, config }),
  show,
  clear: () => {
    $("warning").textContent = "";
  },
});
