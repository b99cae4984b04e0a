// Times one TFLite model per request in headless Chromium with LiteRT.js (the
// `wasm` accelerator, one thread), for benchmarks/browser_kernel_benchmark.py.
//
//   node benchmarks/browser/kernel.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {"url": ".../kernel.html", "chromium": "...", "user_data_dir": "...",
//           "models": ["a.tflite", ...], "input": [numbers], "shape": [1, n],
//           "repeats": N, and optionally "signatures": ["serving_default", ...]
//           (each model is timed on each), "input_name": "x", "dtype": "float32"
//           or "int32", "warm_up_ms": calls before timing, default 3000}
// ANSWER: {"ms": {model: [N milliseconds]}, "page_errors": [...]}; with
//         "signatures", {"ms": {"model signature": [...]}, ...}
import { launchFromRequest } from "../../tests/browser/launch.mjs";

const { request, browser } = await launchFromRequest();
const answer = { ms: {}, page_errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => answer.page_errors.push(String(error)));
  await page.goto(request.url, { waitUntil: "load" });
  const signatures = request.signatures ?? ["serving_default"];
  for (const model of request.models) {
    for (const signature of signatures) {
      const key = request.signatures ? `${model} ${signature}` : model;
      answer.ms[key] = await page.evaluate(
        async ({ model, input, shape, repeats, signature, inputName, dtype, warmUpMs }) => {
          const { Tensor, loadLiteRt, loadAndCompile } = await import("@litertjs/core");
          window.liteRt ??= loadLiteRt(new URL("./vendor/wasm/", location.href).href);
          await window.liteRt;
          const compiled = await loadAndCompile(new URL(model, location.href).href, {
            accelerator: "wasm",
          });
          const times = [];
          const Typed = dtype === "int32" ? Int32Array : Float32Array;
          // WebAssembly starts on a baseline compiler and recompiles hot
          // functions in the background: call for warmUpMs before timing.
          const warmUntil = performance.now() + warmUpMs;
          while (performance.now() < warmUntil) {
            const tensor = new Tensor(new Typed(input), shape);
            const outputs = await compiled.run(signature, { [inputName]: tensor });
            tensor.delete();
            for (const out of Object.values(outputs)) out.delete();
          }
          for (let i = 0; i <= repeats; i++) {
            const tensor = new Tensor(new Typed(input), shape);
            const started = performance.now();
            const outputs = await compiled.run(signature, { [inputName]: tensor });
            const elapsed = performance.now() - started;
            tensor.delete();
            for (const out of Object.values(outputs)) out.delete();
            if (i > 0) times.push(elapsed); // the first call warms up
          }
          compiled.delete();
          return times;
        },
        {
          model,
          input: request.input,
          shape: request.shape,
          repeats: request.repeats,
          signature,
          inputName: request.input_name ?? "x",
          dtype: request.dtype ?? "float32",
          warmUpMs: request.warm_up_ms ?? 3000,
        },
      );
    }
  }
} catch (error) {
  answer.page_errors.push(String(error));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(answer));
