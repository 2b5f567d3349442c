import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { Hono } from "hono";
import { withEsbuild } from "../../../esbuild-service.ts";

const PAGE = new URL("./index.html", import.meta.url);
const SCRIPT = new URL("./playground.js", import.meta.url);
const HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/** Serves the playground page at `/` and its script (bundled once by esbuild, with no network) at `/playground.js`. */
export function registerPlayground(app: Hono<any>): void {
  let script: Promise<string> | undefined;
  app.get("/", async (c) => {
    const html = await readFile(PAGE, "utf8");
    return c.body(html, 200, { ...HEADERS, "content-type": "text/html; charset=utf-8" });
  });
  app.get("/playground.js", async (c) => {
    script ??= bundle().catch((error) => {
      script = undefined;
      throw error;
    });
    return c.body(await script, 200, { ...HEADERS, "content-type": "text/javascript; charset=utf-8" });
  });
}

async function bundle(): Promise<string> {
  const result = await withEsbuild((esbuild) =>
    esbuild.build({
      entryPoints: [fileURLToPath(SCRIPT)],
      bundle: true,
      platform: "browser",
      format: "esm",
      target: "es2022",
      write: false,
      logLevel: "silent",
      plugins: [
        {
          // The page parses no HTML: it builds highlighted code from highlight.js's token tree. The library's own
          // `highlightElement` (never called here) would write its HTML with innerHTML: in the bundle it writes text, so
          // the page holds no HTML sink at all.
          name: "no-html-sink",
          setup(plugin) {
            plugin.onLoad({ filter: /highlight\.js[\\/]lib[\\/]core\.js$/ }, async ({ path }) => ({
              contents: (await readFile(path, "utf8")).replaceAll(".innerHTML", ".textContent"),
              loader: "js",
            }));
          },
        },
      ],
    }),
  );
  return result.outputFiles[0]!.text;
}
