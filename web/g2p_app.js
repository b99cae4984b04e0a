// The grapheme-to-phoneme page: words in, one line of phones per word out,
// the time taken and the first word's attention. Everything it fetches lies
// in its own folder (written there by web/build.mjs beside a G2P export).
//
// For scripts and tests, the page writes what it showed into data attributes,
// as the translation page does: body[data-state], body[data-answers],
// #output[data-ids] and [data-source-ids] (JSON: one list per word),
// #message[data-kind].

import { clearHeatmap, drawHeatmap } from "./src/heatmap.js";
import { CONFIG_FILE, InputError, Pronouncer } from "./src/pronouncer.js";

// float16: half the size of float32, and its phones differed from float32 on 1 of
// 11,994 test words (int8: 53); see docs/g2p.md.
const PREFERRED_VARIANTS = ["float16", "int8", "float32"];
const WASM_URL = new URL("./vendor/wasm/", import.meta.url).href;
const BASE_URL = new URL("./", import.meta.url).href;

const $ = (id) => document.getElementById(id);
const ui = {
  source: $("source"),
  variant: $("variant"),
  search: $("search"),
  button: $("pronounce"),
  status: $("status"),
  message: $("message"),
  output: $("output"),
  time: $("time"),
  heatmap: $("heatmap"),
};
let pronouncer = null;
let config = null;
let answers = 0;

function setState(state, status) {
  document.body.dataset.state = state;
  ui.status.textContent = status;
  ui.button.disabled = state !== "ready";
}

function clearResult() {
  ui.message.textContent = "";
  delete ui.message.dataset.kind;
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

async function loadVariant(variant) {
  setState("loading", `Loading the ${variant} model…`);
  pronouncer?.delete();
  pronouncer = null;
  const started = performance.now();
  pronouncer = await Pronouncer.load(BASE_URL, { variant, wasmUrl: WASM_URL, config });
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const current = ui.search.value;
  ui.search.replaceChildren(
    ...pronouncer.searches.map((kind) => {
      const detail = pronouncer.config.signatures[pronouncer.signatures[kind]];
      const label = kind === "beam" ? `beam (width ${detail.beam_width})` : "greedy";
      return new Option(label, kind, false, kind === current);
    }),
  );
  setState("ready", `${variant} model ready (loaded in ${seconds} s).`);
}

async function onPronounce() {
  if (!pronouncer) return;
  clearResult();
  setState("busy", "Pronouncing…");
  try {
    const result = await pronouncer.pronounce(ui.source.value, { search: ui.search.value });
    const width = Math.max(...result.words.map((w) => w.word.length));
    ui.output.textContent = result.words
      .map((w) => `${w.word.padEnd(width)}  ${w.phones.join(" ")}`)
      .join("\n");
    ui.output.dataset.ids = JSON.stringify(result.words.map((w) => w.outputIds));
    ui.output.dataset.sourceIds = JSON.stringify(result.words.map((w) => w.ids));
    ui.time.textContent =
      `${result.milliseconds.toFixed(1)} ms · ${result.variant}, ${result.search} · ` +
      `${result.words.length} word${result.words.length === 1 ? "" : "s"}`;
    ui.time.dataset.ms = result.milliseconds.toFixed(3);
    const [first] = result.words;
    if (first.outputIds.length) {
      const labels = first.outputIds.map((id) => pronouncer.config.phones[id]);
      drawHeatmap(ui.heatmap, first.attention, first.letters, labels);
    }
  } catch (error) {
    if (error instanceof InputError) {
      showError(error.kind, error.message);
    } else {
      console.error(error);
      showError("error", `Pronouncing failed: ${error.message}`);
    }
  } finally {
    setState("ready", `${pronouncer.variant} model ready.`);
    answers += 1;
    document.body.dataset.answers = String(answers);
  }
}

async function main() {
  try {
    const response = await fetch(new URL(CONFIG_FILE, BASE_URL));
    if (!response.ok) throw new Error(`${CONFIG_FILE}: HTTP ${response.status}`);
    config = await response.json();
    const variants = PREFERRED_VARIANTS.filter((v) => config.models?.[v]);
    const params = new URLSearchParams(location.search);
    const chosen = variants.includes(params.get("variant")) ? params.get("variant") : variants[0];
    ui.variant.replaceChildren(...variants.map((v) => new Option(v, v, false, v === chosen)));
    const search = params.get("search");
    if (search) ui.search.replaceChildren(new Option(search, search, true, true));
    await loadVariant(chosen);
  } catch (error) {
    console.error(error);
    showError("load", `The model could not be loaded: ${error.message}`);
    setState("error", "Not loaded.");
    return;
  }
  ui.button.addEventListener("click", onPronounce);
  ui.source.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) onPronounce();
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
