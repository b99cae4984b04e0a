// Times the page's JavaScript API (web/src/translator.js) in headless
// Chromium, without the page's UI, for benchmarks/browser_benchmark.py: the
// same sentences translated back to back, then each after a pause, as
// Python LiteRT is timed beside it.
//
//   node benchmarks/browser/api_loop.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"url": ".../index.html", "chromium", "user_data_dir",
//           "variant", "search", "texts": [...], "pauses_ms": [0, 20]}
// ANSWER:  {"runs": {"<pause>": [{"ms", "model_ms", "ids"}, ...]},
//           "page_errors": [...]}
//           ms: `Translator.translate` whole (tokenize, signature call,
//           detokenize); model_ms: the signature call alone.
import { launchFromRequest } from "../../tests/browser/launch.mjs";

const { request, browser } = await launchFromRequest();
const WARM_UP_MS = request.warm_up_ms ?? 5000;
const answer = { runs: {}, page_errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => answer.page_errors.push(String(error)));
  await page.goto(request.url, { waitUntil: "load" });
  answer.runs = await page.evaluate(
    async ({ variant, search, texts, pauses, WARM_UP_MS }) => {
      // The page's own module: its import map resolves LiteRT.js.
      const { Translator } = await import("./src/translator.js");
      const translator = await Translator.load(new URL("./", location.href).href, {
        variant,
        wasmUrl: new URL("./vendor/wasm/", location.href).href,
      });
      // Warm up for the runtime's optimizing compiler: WebAssembly starts on
      // a baseline compiler and hot functions are recompiled in the
      // background; calls before that are slower and not what a page in use
      // costs.
      const warmUntil = performance.now() + WARM_UP_MS;
      for (let i = 0; performance.now() < warmUntil; i++) {
        await translator.translate(texts[i % texts.length], { search });
      }
      const runs = {};
      for (const pause of pauses) {
        runs[pause] = [];
        for (const text of texts) {
          if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
          const result = await translator.translate(text, { search });
          runs[pause].push({
            ms: result.milliseconds,
            model_ms: result.modelMilliseconds,
            ids: result.outputIds,
          });
        }
      }
      translator.delete();
      return runs;
    },
    {
      variant: request.variant,
      search: request.search,
      texts: request.texts,
      pauses: request.pauses_ms,
      WARM_UP_MS,
    },
  );
} catch (error) {
  answer.page_errors.push(String(error));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(answer));
