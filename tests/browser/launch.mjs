// What every browser driver starts with: its request (the JSON file named on
// the command line) and headless Chromium with a fresh profile, offline.
// Used by tests/browser/drive.mjs and the benchmarks' drivers.
import { readFileSync } from "node:fs";

import puppeteer from "puppeteer-core";

/** Returns {request, browser}: request.chromium and request.user_data_dir are read. */
export async function launchFromRequest() {
  const request = JSON.parse(readFileSync(process.argv[2], "utf-8"));
  const browser = await puppeteer.launch({
    executablePath: request.chromium,
    headless: true,
    userDataDir: request.user_data_dir,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return { request, browser };
}
