// Counts wrong answers on a fresh model's first call at a longer source in
// headless Chromium with LiteRT.js (the `wasm` accelerator), for
// benchmarks/lite_first_growth_browser.py.
//
//   node benchmarks/browser/growth.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"url": ".../growth.html", "chromium": "...", "user_data_dir": "...",
//           "models": [{"url": "a.tflite", "short": [ids], "long": [ids],
//                       "expected": [tokens of long], "signature": "generate",
//                       "calls": growth calls}], "shape": [1, N]}
// ANSWER: {"wrong": {model url: count}, "calls": {model url: count},
//          "examples": [...], "page_errors": [...]}
import { launchFromRequest } from "../../tests/browser/launch.mjs";

const { request, browser } = await launchFromRequest();
const answer = { wrong: {}, calls: {}, examples: [], page_errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => answer.page_errors.push(String(error)));
  await page.goto(request.url, { waitUntil: "load" });
  for (const model of request.models) {
    const counts = await page.evaluate(
      async ({ model, shape }) => {
        const { Tensor, loadLiteRt, loadAndCompile } = await import("@litertjs/core");
        window.liteRt ??= loadLiteRt(new URL("./vendor/wasm/", location.href).href);
        await window.liteRt;
        const bytes = new Uint8Array(await (await fetch(model.url)).arrayBuffer());
        const run = async (compiled, ids) => {
          const tensor = new Tensor(new Int32Array(ids), shape);
          const outputs = await compiled.run(model.signature, { source: tensor });
          tensor.delete();
          const tokens = Array.from(await outputs.tokens.toTypedArray());
          for (const out of Object.values(outputs)) out.delete();
          return tokens;
        };
        let wrong = 0;
        const examples = [];
        for (let i = 0; i < model.calls; i++) {
          // A fresh model each time, the previous one deleted: its memory
          // is the next one's, as for the Python count.
          const compiled = await loadAndCompile(bytes, { accelerator: "wasm" });
          await run(compiled, model.short);
          const tokens = await run(compiled, model.long);
          compiled.delete();
          if (tokens.join() !== model.expected.join()) {
            wrong += 1;
            if (examples.length < 2) examples.push(`${tokens} for ${model.expected}`);
          }
        }
        return { wrong, examples };
      },
      { model, shape: request.shape },
    );
    answer.wrong[model.url] = counts.wrong;
    answer.calls[model.url] = model.calls;
    answer.examples.push(...counts.examples);
  }
} catch (error) {
  answer.page_errors.push(String(error));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(answer));
