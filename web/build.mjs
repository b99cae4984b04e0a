// Writes a page beside an export, so that one folder holds everything the
// page fetches:
//
//   npm ci                                  # once: LiteRT.js into node_modules/
//   node web/build.mjs OUT/tflite           # the page, the app code, LiteRT.js
//   python3 -m http.server 8000 --bind 127.0.0.1 --directory OUT/tflite
//
// OUT/tflite is the folder an export with a static source length wrote. The
// manifest in it says which page: translator.json (`python -m
// keras_attention.translation export RUN OUT --source-length N`) gets the
// translation page, g2p.json (`python examples/g2p_cmudict.py export --run-dir
// RUN OUT --source-length N`) the grapheme-to-phoneme page. Added:
//
//   index.html, page.css, app.js, src/*.js  the page and its reusable modules
//   vendor/litertjs-core.js                 @litertjs/core's ES module
//   vendor/litertjs-wasm-utils.js           its @litertjs/wasm-utils (import map)
//   vendor/wasm/litert_wasm_internal.*      the WebAssembly runtime (relaxed SIMD)
//   vendor/wasm/litert_wasm_compat_internal.*  the same without relaxed SIMD
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const WEB = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(WEB, "..");
const MODULES = join(ROOT, "node_modules", "@litertjs");
// The runtimes LiteRT.js picks without the threads or JSPI options.
const WASM_FILES = [
  "litert_wasm_internal.js",
  "litert_wasm_internal.wasm",
  "litert_wasm_compat_internal.js",
  "litert_wasm_compat_internal.wasm",
];
// Each page: its manifest, and the files copied (source in web/ → name in the export).
const PAGES = {
  "translator.json": {
    "index.html": "index.html",
    "page.css": "page.css",
    "app.js": "app.js",
    "src/litert_model.js": "src/litert_model.js",
    "src/page.js": "src/page.js",
    "src/tokenizer.js": "src/tokenizer.js",
    "src/postprocess.js": "src/postprocess.js",
    "src/translator.js": "src/translator.js",
    "src/heatmap.js": "src/heatmap.js",
  },
  "g2p.json": {
    "g2p.html": "index.html",
    "page.css": "page.css",
    "g2p_app.js": "g2p_app.js",
    "src/litert_model.js": "src/litert_model.js",
    "src/page.js": "src/page.js",
    "src/pronouncer.js": "src/pronouncer.js",
    "src/heatmap.js": "src/heatmap.js",
  },
};

function fail(message) {
  console.error(`web/build.mjs: ${message}`);
  process.exit(2);
}

// A copied module without its `//# sourceMappingURL=` line: the map is not
// copied, and the page fetches nothing that is not in its folder.
function copyModule(from, to) {
  const text = readFileSync(from, "utf-8").replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");
  writeFileSync(to, text);
}

function main(argv) {
  if (argv.length !== 1 || argv[0].startsWith("-")) {
    fail("usage: node web/build.mjs EXPORT_TFLITE_DIR (the folder holding translator.json or g2p.json)");
  }
  const out = resolve(argv[0]);
  const manifest = Object.keys(PAGES).find((name) => existsSync(join(out, name)));
  if (!manifest) {
    fail(`${out} holds neither ${Object.keys(PAGES).join(" nor ")}: pass an export's tflite/ folder`);
  }
  const configPath = join(out, manifest);
  const config = JSON.parse(readFileSync(configPath, "utf-8"));
  if (!Number.isInteger(config.source_length)) {
    fail(
      `${configPath} has no static source_length; LiteRT.js refuses a dynamic input ` +
        "dimension. Export again with --source-length N.",
    );
  }
  for (const [variant, file] of Object.entries(config.models ?? {})) {
    if (!existsSync(join(out, file))) fail(`${join(out, file)} (the ${variant} model) is missing`);
  }
  const core = join(MODULES, "core");
  if (!existsSync(join(core, "dist", "index.js"))) {
    fail(`${core} is missing: run \`npm ci\` in ${ROOT} first`);
  }
  mkdirSync(join(out, "src"), { recursive: true });
  mkdirSync(join(out, "vendor", "wasm"), { recursive: true });
  for (const [from, to] of Object.entries(PAGES[manifest])) copyFileSync(join(WEB, from), join(out, to));
  copyModule(join(core, "dist", "index.js"), join(out, "vendor", "litertjs-core.js"));
  copyModule(
    join(MODULES, "wasm-utils", "dist", "index.js"),
    join(out, "vendor", "litertjs-wasm-utils.js"),
  );
  for (const file of WASM_FILES) copyFileSync(join(core, "wasm", file), join(out, "vendor", "wasm", file));
  const version = JSON.parse(readFileSync(join(core, "package.json"), "utf-8")).version;
  console.log(`${join(out, "index.html")}: the page, with LiteRT.js ${version}`);
}

main(process.argv.slice(2));
