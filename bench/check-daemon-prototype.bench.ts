// What a per-user background checker (issue 17, step 3: eslint_d / Gradle daemon style) would answer `moss check`
// in: a PROTOTYPE, not shipped. This process plays the warm checker: it compiles the sphero example and type-checks
// each request's code as `moss check --no-cache` does (MossCompiler in-process, compile, typecheck), keeping the
// first runtime open so the module's checker worker stays warm; a fresh `node` process per request plays the thin
// client (connect to a Unix socket in the private temp folder, send the code, print the answer). Each snippet is new
// (a different number), so no kept result or remembered check answers it. Figures: wall time of the client process,
// interleaved with a bare `node -e 0`.
// Run: node --no-node-snapshot --import tsx bench/check-daemon-prototype.bench.ts
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler } from "../engine/compiler/index.ts";
import { privateTempFolder } from "../engine/private-temp-folder.ts";
import type { MossRuntime } from "../engine/runtime/index.ts";
import { formatMs, formatRatio, percentile, printTable } from "./stats.ts";

const MODULE = fileURLToPath(new URL("../examples/sphero/context.ts", import.meta.url));
const ROUNDS = 9;
const SOCKET = path.join(privateTempFolder(), `check-daemon-prototype-${process.pid}.sock`);
const CLIENT = `
const { connect } = await import("node:net");
const connection = connect(process.argv[1]);
let text = "";
connection.setEncoding("utf8").on("data", (chunk) => (text += chunk));
connection.on("end", () => {
  const { errors } = JSON.parse(text);
  process.stdout.write(errors === 0 ? "No errors.\\n" : "Found " + errors + " errors.\\n");
  process.exitCode = errors === 0 ? 0 : 1;
});
connection.end(JSON.stringify({ module: process.argv[2], code: process.argv[3] }));
`;

let kept: MossRuntime | undefined;
let queue: Promise<unknown> = Promise.resolve();

async function check(module: string, code: string): Promise<number> {
  const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(module);
  try {
    const diagnostics = await runtime.typecheck(code);
    const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error");
    // The snippets are clean: an error here is the prototype's fault, shown before the client fails the bench.
    if (errors.length > 0) console.error(errors);
    return errors.length;
  } finally {
    if (kept === undefined) kept = runtime;
    else await runtime.close();
  }
}

function timeProcess(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(performance.now() - started) : reject(new Error(`exit ${code}`)),
    );
  });
}

rmSync(SOCKET, { force: true });
const server = createServer({ allowHalfOpen: true }, (connection) => {
  let text = "";
  connection.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
  connection.on("end", () => {
    const request = JSON.parse(text) as { module: string; code: string };
    const answer = check(request.module, request.code);
    queue = answer.catch(() => {});
    answer.then(
      (errors) => connection.end(JSON.stringify({ errors })),
      (error: unknown) => connection.destroy(error instanceof Error ? error : new Error(String(error))),
    );
  });
});
await new Promise<void>((resolve) => server.listen(SOCKET, resolve));
const snippet = (seconds: number) =>
  `async function main(moss: Moss) {\n  await moss.body.spin(90, ${seconds});\n  return moss.body.history().length;\n}\n`;
const client = (round: number) => ["--input-type=module", "-e", CLIENT, SOCKET, MODULE, snippet(round + 1)];
const first = await timeProcess(client(-1));
const figures = { node: [] as number[], client: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  figures.node.push(await timeProcess(["-e", "0"]));
  figures.client.push(await timeProcess(client(round)));
}
await queue;
server.close();
await kept?.close();
rmSync(SOCKET, { force: true });
const node = percentile(figures.node, 0.5);
const warm = percentile(figures.client, 0.5);
printTable(
  "check daemon prototype: a fresh client process asking a warm checker (sphero, a new snippet each time)",
  ["figure", "median", "p90", "samples", "ratio to node -e 0"],
  [
    ["baseline: node -e 0", formatMs(node), formatMs(percentile(figures.node, 0.9)), String(ROUNDS), "1.00×"],
    ["first request (the checker starts cold)", formatMs(first), "", "1", formatRatio(first, node)],
    [
      "warm checker, new snippet",
      formatMs(warm),
      formatMs(percentile(figures.client, 0.9)),
      String(ROUNDS),
      formatRatio(warm, node),
    ],
  ],
  [
    "A real client would also load the CLI's option parsing and the kept-result key (about moss --help's cost).",
  ],
);
