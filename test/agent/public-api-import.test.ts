import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { refusedBaseUrl } from "./fake-openai-server.ts";

const ENGINE = new URL("../../engine/index.ts", import.meta.url).href;

// A child process that records every module URL Node resolves (a resolve hook reporting over a port), imports
// moss-ts's public API as a context module does, then makes one request with OpenAILanguageModel.
const CHILD = `
import { register } from "node:module";
import { MessageChannel } from "node:worker_threads";
const { port1, port2 } = new MessageChannel();
const resolved = [];
port1.on("message", (url) => resolved.push(url));
const hooks = "export async function initialize({ port }) { globalThis.port = port; }" +
  "export async function resolve(specifier, context, next) { const result = await next(specifier, context);" +
  " globalThis.port.postMessage(result.url); return result; }";
register("data:text/javascript," + encodeURIComponent(hooks), { data: { port: port2 }, transferList: [port2] });
// Every resolution before a marker has arrived once the marker has (one hooks thread, one port, in order).
const settle = async (marker) => {
  const url = "data:text/javascript,export default " + marker;
  await import(url);
  while (!resolved.includes(url)) await new Promise((resolve) => setTimeout(resolve, 10));
};
const loadsOpenAI = () => resolved.some((url) => url.includes("/node_modules/openai/"));
const { OpenAILanguageModel } = await import(process.env.ENGINE);
await settle(1);
const afterImport = loadsOpenAI();
const esbuild = resolved.filter((url) => url.includes("/node_modules/esbuild/"));
const tokenizerRanks = resolved.filter((url) => url.includes("/js-tiktoken/dist/index") || url.includes("/js-tiktoken/dist/ranks/"));
const model = new OpenAILanguageModel({ baseUrl: process.env.BASE_URL, maxRetries: 0, env: {} });
const error = await model.generate({ messages: [{ role: "user", content: "hi" }] }).catch((caught) => caught);
await settle(2);
port1.close();
console.log(JSON.stringify({ afterImport, esbuild, tokenizerRanks, afterRequest: loadsOpenAI(), code: error?.code, engineSeen: resolved.length }));
`;

// Every context module imports moss-ts, on every `moss check` and `moss run`: packages only the agent uses load when
// it uses them.
describe("importing moss-ts's public API", () => {
  it("loads neither the openai package, the tokenizer's ranks nor esbuild; a model request loads openai and maps its errors", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", CHILD],
      { env: { ...process.env, VITEST: "", ENGINE, BASE_URL: await refusedBaseUrl() } },
    );
    const report = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as {
      afterImport: boolean;
      tokenizerRanks: string[];
      esbuild: string[];
      afterRequest: boolean;
      code: string;
      engineSeen: number;
    };
    // The hook saw the engine's own imports: an empty record would prove nothing.
    expect(report.engineSeen).toBeGreaterThan(50);
    expect(report.afterImport).toBe(false);
    expect(report.tokenizerRanks).toEqual([]);
    expect(report.esbuild).toEqual([]);
    expect(report.afterRequest).toBe(true);
    expect(report.code).toBe("model-connection");
  });
});
