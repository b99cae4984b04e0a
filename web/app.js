// The page: a text box, a model variant, greedy or beam, the French output,
// the time taken and the attention heatmap. Everything it fetches lies in its
// own folder (written there by web/build.mjs beside an export).
//
// For scripts and tests, the page also writes what it showed into data
// attributes: body[data-state] ("loading", "ready", "busy", "error"),
// body[data-answers] (how many requests were answered, refusals included),
// #output[data-ids] and [data-source-ids] (JSON), #message[data-kind].

import { clearHeatmap, drawHeatmap } from "./src/heatmap.js";
import { CONFIG_FILE, InputError, Translator } from "./src/translator.js";

const PREFERRED_VARIANTS = ["int8", "float16", "float32"];
const WASM_URL = new URL("./vendor/wasm/", import.meta.url).href;
const BASE_URL = new URL("./", import.meta.url).href;

const $ = (id) => document.getElementById(id);
const ui = {
  source: $("source"),
  variant: $("variant"),
  search: $("search"),
  button: $("translate"),
  status: $("status"),
  message: $("message"),
  warning: $("warning"),
  output: $("output"),
  time: $("time"),
  heatmap: $("heatmap"),
};
let translator = null;
let config = null;
let answers = 0;

function setState(state, status) {
  document.body.dataset.state = state;
  ui.status.textContent = status;
  ui.button.disabled = state !== "ready";
}

function answered() {
  answers += 1;
  document.body.dataset.answers = String(answers);
}

function clearResult() {
  ui.message.textContent = "";
  delete ui.message.dataset.kind;
  ui.warning.textContent = "";
  ui.output.textContent = "";
  delete ui.output.dataset.ids;
  delete ui.output.dataset.sourceIds;
  ui.time.textContent = "";
  delete ui.time.dataset.ms;
  clearHeatmap(ui.heatmap);
}

function showError(kind, text) {
  ui.message.dataset.kind = kind;
  ui.message.textContent = text;
}

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

async function loadVariant(variant) {
  setState("loading", `Loading the ${variant} model…`);
  translator?.delete();
  translator = null;
  const started = performance.now();
  translator = await Translator.load(BASE_URL, { variant, wasmUrl: WASM_URL, config });
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const kinds = translator.searches;
  const current = ui.search.value;
  ui.search.replaceChildren(
    ...kinds.map((kind) => {
      const detail = translator.config.signatures[translator.signatures[kind]];
      const label = kind === "beam" ? `beam (width ${detail.beam_width})` : "greedy";
      return new Option(label, kind, false, kind === current);
    }),
  );
  setState("ready", `${variant} model ready (loaded in ${seconds} s).`);
}

async function onTranslate() {
  if (!translator) return;
  clearResult();
  setState("busy", "Translating…");
  try {
    const result = await translator.translate(ui.source.value, { search: ui.search.value });
    ui.output.textContent = result.text;
    ui.output.dataset.ids = JSON.stringify(result.outputIds);
    ui.output.dataset.sourceIds = JSON.stringify(result.sourceIds);
    ui.time.textContent =
      `${result.milliseconds.toFixed(1)} ms · ${result.variant}, ${result.search} · ` +
      `${result.sourceIds.length} source and ${result.outputIds.length} output subwords`;
    ui.time.dataset.ms = result.milliseconds.toFixed(3);
    if (result.unknown.length) ui.warning.textContent = describeUnknown(result.unknown);
    if (result.outputIds.length) {
      drawHeatmap(ui.heatmap, result.attention, result.sourcePieces, result.outputPieces);
    }
  } catch (error) {
    if (error instanceof InputError) {
      showError(error.kind, error.message);
    } else {
      console.error(error);
      showError("error", `The translation failed: ${error.message}`);
    }
  } finally {
    setState("ready", `${translator.variant} model ready.`);
    answered();
  }
}

async function main() {
  try {
    const response = await fetch(new URL(CONFIG_FILE, BASE_URL));
    if (!response.ok) throw new Error(`${CONFIG_FILE}: HTTP ${response.status}`);
    config = await response.json();
    const variants = PREFERRED_VARIANTS.filter((v) => config.models?.[v]);
    const asked = new URLSearchParams(location.search).get("variant");
    const chosen = variants.includes(asked) ? asked : variants[0];
    ui.variant.replaceChildren(...variants.map((v) => new Option(v, v, false, v === chosen)));
    const search = new URLSearchParams(location.search).get("search");
    if (search) ui.search.replaceChildren(new Option(search, search, true, true));
    await loadVariant(chosen);
  } catch (error) {
    console.error(error);
    showError("load", `The model could not be loaded: ${error.message}`);
    setState("error", "Not loaded.");
    return;
  }
  ui.button.addEventListener("click", onTranslate);
  ui.source.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) onTranslate();
  });
  ui.variant.addEventListener("change", async () => {
    clearResult();
    try {
      await loadVariant(ui.variant.value);
    } catch (error) {
      showError("load", `The model could not be loaded: ${error.message}`);
      setState("error", "Not loaded.");
    }
  });
}

main();
