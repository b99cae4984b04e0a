// The grapheme-to-phoneme page: words in, one line of phones per word out,
// the time taken and the first word's attention. Everything it fetches lies
// in its own folder (written there by web/build.mjs beside a G2P export).
// `src/page.js` runs the page; this file says what is G2P's own.
//
// Data attributes for scripts and tests, besides page.js's:
// #output[data-ids] and [data-source-ids] (JSON: one list per word).

import { drawHeatmap } from "./src/heatmap.js";
import { startPage } from "./src/page.js";
import { CONFIG_FILE, Pronouncer } from "./src/pronouncer.js";

const WASM_URL = new URL("./vendor/wasm/", import.meta.url).href;
const BASE_URL = new URL("./", import.meta.url).href;

const $ = (id) => document.getElementById(id);

async function show(pronouncer, text, search) {
  const result = await pronouncer.pronounce(text, { search });
  const width = Math.max(...result.words.map((w) => w.word.length));
  const output = $("output");
  output.textContent = result.words
    .map((w) => `${w.word.padEnd(width)}  ${w.phones.join(" ")}`)
    .join("\n");
  output.dataset.ids = JSON.stringify(result.words.map((w) => w.outputIds));
  output.dataset.sourceIds = JSON.stringify(result.words.map((w) => w.ids));
  const time = $("time");
  const count = `${result.words.length} word${result.words.length === 1 ? "" : "s"}`;
  time.textContent = `${result.milliseconds.toFixed(1)} ms · ${result.variant}, ${result.search} · ${count}`;
  time.dataset.ms = result.milliseconds.toFixed(3);
  const [first] = result.words;
  if (first.outputIds.length) {
    const labels = first.outputIds.map((id) => pronouncer.config.phones[id]);
    drawHeatmap($("heatmap"), first.attention, first.letters, labels);
  }
}

startPage({
  configFile: CONFIG_FILE,
  // float16: half the size of float32, and its phones equalled float32's on
  // every test word (int8 differed on 60 of 11,994); see docs/g2p.md.
  preferredVariants: ["float16", "int8", "float32"],
  buttonId: "pronounce",
  busyText: "Pronouncing…",
  failText: "Pronouncing failed",
  load: (variant, config) => Pronouncer.load(BASE_URL, { variant, wasmUrl: WASM_URL, config }),
  show,
});
