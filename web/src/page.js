// What both pages (translation, G2P) do around their model: the manifest and
// the variant to load, the search choices, one request at a time, the answer
// to a bad input, and the state that scripts and tests read.
//
// A page calls `startPage` with what is its own: the manifest's name, its
// preferred variants, how to load its model and how to show one result. The
// model object (a Translator or a Pronouncer) has `config`, `variant`,
// `searches`, `signatures` and `delete()`.
//
// Data attributes for scripts and tests: body[data-state] ("loading",
// "ready", "busy", "error"), body[data-answers] (requests answered, refusals
// included), #message[data-kind]; the page's `show` adds its own.

import { clearHeatmap } from "./heatmap.js";
import { InputError } from "./litert_model.js";

const $ = (id) => document.getElementById(id);

/**
 * @param {object} page
 * @param {string} page.configFile the manifest beside the page.
 * @param {string[]} page.preferredVariants the default is the first one present.
 * @param {string} page.buttonId the button that runs a request.
 * @param {string} page.busyText the status while a request runs.
 * @param {string} page.failText the start of the message of an unexpected error.
 * @param {(variant: string, config: object) => Promise<object>} page.load
 * @param {(model: object, text: string, search: string) => Promise<void>} page.show
 *     runs one request and shows its result; throws InputError for a refusal.
 * @param {() => void} [page.clear] clears what `show` added.
 */
export function startPage(page) {
  const ui = {
    source: $("source"),
    variant: $("variant"),
    search: $("search"),
    button: $(page.buttonId),
    status: $("status"),
    message: $("message"),
    output: $("output"),
    time: $("time"),
    heatmap: $("heatmap"),
  };
  let model = null;
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
    delete ui.time.dataset.modelMs;
    clearHeatmap(ui.heatmap);
    page.clear?.();
  }

  function showError(kind, text) {
    ui.message.dataset.kind = kind;
    ui.message.textContent = text;
  }

  async function loadVariant(variant) {
    setState("loading", `Loading the ${variant} model…`);
    model?.delete();
    model = null;
    const started = performance.now();
    model = await page.load(variant, config);
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    const current = ui.search.value;
    ui.search.replaceChildren(
      ...model.searches.map((kind) => {
        const detail = model.config.signatures[model.signatures[kind]];
        const label = kind === "beam" ? `beam (width ${detail.beam_width})` : "greedy";
        return new Option(label, kind, false, kind === current);
      }),
    );
    setState("ready", `${variant} model ready (loaded in ${seconds} s).`);
  }

  async function onRequest() {
    if (!model) return;
    clearResult();
    setState("busy", page.busyText);
    try {
      await page.show(model, ui.source.value, ui.search.value);
    } catch (error) {
      if (error instanceof InputError) {
        showError(error.kind, error.message);
      } else {
        console.error(error);
        showError("error", `${page.failText}: ${error.message}`);
      }
    } finally {
      setState("ready", `${model.variant} model ready.`);
      answers += 1;
      document.body.dataset.answers = String(answers);
    }
  }

  async function main() {
    try {
      const response = await fetch(new URL(page.configFile, document.baseURI));
      if (!response.ok) throw new Error(`${page.configFile}: HTTP ${response.status}`);
      config = await response.json();
      const variants = page.preferredVariants.filter((v) => config.models?.[v]);
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
    ui.button.addEventListener("click", onRequest);
    ui.source.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) onRequest();
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
}
