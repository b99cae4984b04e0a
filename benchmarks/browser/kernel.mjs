// Times one TFLite model per request in headless Chromium with LiteRT.js (the
// `wasm` accelerator, one thread), for benchmarks/browser_kernel_benchmark.py.
//
//   node benchmarks/browser/kernel.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"url": ".../kernel.html", "chromium": "...", "user_data_dir": "...",
//           "models": ["a.tflite", ...], "input": [numbers], "shape": [1, n],
//           "repeats": N}
// ANSWER: {"ms": {model: [N milliseconds]}, "page_errors": [...]}
import { readFileSync } from "node:fs";

import puppeteer from "puppeteer-core";

const request = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const browser = await puppeteer.launch({
  executablePath: request.chromium,
  headless: true,
  userDataDir: request.user_data_dir,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const answer = { ms: {}, page_errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => answer.page_errors.push(String(error)));
  await page.goto(request.url, { waitUntil: "load" });
  for (const model of request.models) {
    answer.ms[model] = await page.evaluate(
      async ({ model, input, shape, repeats }) => {
        const { Tensor, loadLiteRt, loadAndCompile } = await import("@litertjs/core");
        window.liteRt ??= loadLiteRt(new URL("./vendor/wasm/", location.href).href);
        await window.liteRt;
        const compiled = await loadAndCompile(new URL(model, location.href).href, {
          accelerator: "wasm",
        });
        const times = [];
        for (let i = 0; i <= repeats; i++) {
          const tensor = new Tensor(new Float32Array(input), shape);
          const started = performance.now();
          const outputs = await compiled.run("serving_default", { x: tensor });
          const elapsed = performance.now() - started;
          tensor.delete();
          for (const out of Object.values(outputs)) out.delete();
          if (i > 0) times.push(elapsed); // the first call warms up
        }
        compiled.delete();
        return times;
      },
      { model, input: request.input, shape: request.shape, repeats: request.repeats },
    );
  }
} catch (error) {
  answer.page_errors.push(String(error));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(answer));
