// Drives a page of web/ (translation or G2P) in headless Chromium, for
// tests/test_browser*.py and benchmarks/browser_benchmark.py.
//
//   node tests/browser/drive.mjs REQUEST.json > ANSWER.json
//
// REQUEST: {
//   "url": "http://127.0.0.1:PORT/index.html",
//   "chromium": "/usr/bin/chromium", "user_data_dir": "...",
//   "cases": [{"text", "variant", "search"}],   in order; "type": false sets
//                                                the text box without typing
//   "screenshot": {"path", "case"} or null       after that case (its index)
//   "button": "#translate"                       the page's button (default)
// }
// ANSWER: {
//   "load_ms", "first_answer_ms",              from navigation start
//   "results": [{"output", "ids", "source_ids", "message", "kind", "warning",
//                "ms", "model_ms", "state", "variant"}], ms: the whole answer; model_ms:
//                                                the signature call alone (translator)
//   "console_errors": [...], "page_errors": [...], "failed_requests": [...],
//   "requests": [every URL the page asked for]
// }
import { launchFromRequest } from "./launch.mjs";

const { request, browser } = await launchFromRequest();
const TIMEOUT = request.timeout_ms ?? 120_000;

const answer = {
  results: [],
  console_errors: [],
  page_errors: [],
  failed_requests: [],
  requests: [],
};
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 800 });
  page.on("console", (message) => {
    if (message.type() === "error") answer.console_errors.push(message.text());
  });
  page.on("pageerror", (error) => answer.page_errors.push(String(error)));
  page.on("request", (r) => answer.requests.push(r.url()));
  page.on("requestfailed", (r) => answer.failed_requests.push(`${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => {
    if (r.status() >= 400) answer.failed_requests.push(`${r.url()} HTTP ${r.status()}`);
  });

  const first = request.cases[0];
  const url = new URL(request.url);
  if (first?.variant) url.searchParams.set("variant", first.variant);
  if (first?.search) url.searchParams.set("search", first.search);
  const started = Date.now();
  await page.goto(url.href);
  await page.waitForFunction(
    () => ["ready", "error"].includes(document.body.dataset.state),
    { timeout: TIMEOUT },
  );
  answer.load_ms = Date.now() - started;
  answer.state = await page.$eval("body", (b) => b.dataset.state);
  if (answer.state === "error") {
    answer.load_error = await page.$eval("#message", (e) => e.textContent);
  } else {
    for (const [index, item] of request.cases.entries()) {
      const variant = await page.$eval("#variant", (e) => e.value);
      if (item.variant && item.variant !== variant) {
        await page.select("#variant", item.variant);
        await page.waitForFunction(
          (v) =>
            document.body.dataset.state === "ready" &&
            document.getElementById("status").textContent.startsWith(`${v} model ready`),
          { timeout: TIMEOUT },
          item.variant,
        );
      }
      if (item.search) await page.select("#search", item.search);
      await page.$eval("#source", (e) => {
        e.value = "";
      });
      if (item.type === false) {
        await page.$eval("#source", (e, text) => {
          e.value = text;
        }, item.text);
      } else if (item.text) {
        await page.type("#source", item.text);
      }
      const before = await page.$eval("body", (b) => Number(b.dataset.answers ?? 0));
      await page.click(request.button ?? "#translate");
      await page.waitForFunction(
        (n) => Number(document.body.dataset.answers ?? 0) > n,
        { timeout: TIMEOUT },
        before,
      );
      if (index === 0) answer.first_answer_ms = Date.now() - started;
      answer.results.push(
        await page.evaluate(() => {
          const output = document.getElementById("output");
          const message = document.getElementById("message");
          const parse = (value) => (value === undefined ? null : JSON.parse(value));
          return {
            output: output.textContent,
            ids: parse(output.dataset.ids),
            source_ids: parse(output.dataset.sourceIds),
            message: message.textContent,
            kind: message.dataset.kind ?? null,
            warning: document.getElementById("warning")?.textContent ?? "",
            ms: Number(document.getElementById("time").dataset.ms ?? NaN),
            model_ms: Number(document.getElementById("time").dataset.modelMs ?? NaN),
            heatmap: [document.getElementById("heatmap").width, document.getElementById("heatmap").height],
            state: document.body.dataset.state,
            variant: document.getElementById("variant").value,
          };
        }),
      );
      if (request.screenshot && request.screenshot.case === index) {
        await page.screenshot({ path: request.screenshot.path, fullPage: true });
      }
    }
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(answer));
