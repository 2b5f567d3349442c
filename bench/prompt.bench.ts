// Prompt benchmark (issue 2): cold compile + prompt in a fresh process, warm re-render, peak memory, and prompt
// tokens against the same API as OpenAI function-calling JSON tool schemas.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getEncoding } from "js-tiktoken";
import { countTokens } from "../engine/agent/index.ts";
import { MossCompiler } from "../engine/compiler/moss-compiler.ts";
import { reportToParent, runChild } from "./child-process.ts";
import { promptFixture } from "./prompt-fixture.ts";
import {
  formatBytes,
  formatMs,
  formatRatio,
  printTable,
  type Summary,
  sample,
  summarize,
  verdict,
} from "./stats.ts";

const SIZES = [50, 200, 1000];
const COLD_CHILDREN = 1;
const WARM_RUNS = 200;
const TEMPORARY_ROOT = fileURLToPath(new URL("./.tmp/", import.meta.url));
const WARM_TARGET_MS = 5;
const TOKEN_RATIO_TARGET = 0.5;

/** What one child process measures for one generated module. */
interface ChildMeasurement {
  compileMs: number;
  firstPromptMs: number;
  warm: Summary;
  rssBeforeBytes: number;
  maxRssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  promptTokens: number;
  promptCharacters: number;
  deterministic: boolean;
  tokensByPart: Record<string, number>;
}

interface SizeResult {
  declarations: number;
  cold: Summary;
  compile: Summary;
  measurement: ChildMeasurement;
  jsonTokens: number;
  jsonPrettyTokens: number;
  tools: number;
}

function entryKind(prompt: string): string {
  const body = prompt.replace(/^\s*\/\*\*[\s\S]*?\*\/\s*/, "");
  if (/^(export\s+)?interface\s/.test(body)) return "interfaces";
  if (/^(export\s+)?type\s/.test(body)) return "type aliases";
  if (/^(export\s+)?(async\s+)?function\s/.test(body)) return "functions";
  if (/^(export\s+)?(abstract\s+)?class\s/.test(body)) return "classes";
  if (/^declare\s+const\s/.test(body)) return "consts";
  return "other";
}

/** Child side: compile the module, render, re-render, and report figures. */
export async function measurePromptInChild(modulePath: string): Promise<void> {
  const rssBeforeBytes = process.memoryUsage().rss;
  const started = performance.now();
  const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(modulePath);
  const compiled = performance.now();
  const prompter = runtime.prompter();
  const prompt = await prompter.dumpModulePrompt();
  const rendered = performance.now();
  const memory = process.memoryUsage();
  const maxRssBytes = process.resourceUsage().maxRSS * 1024;
  let deterministic = true;
  const warm = await sample(
    WARM_RUNS,
    async () => {
      if ((await prompter.dumpModulePrompt()) !== prompt) deterministic = false;
    },
    10,
  );
  const encoding = getEncoding("o200k_base");
  const tokensByPart: Record<string, number> = {
    "module source": encoding.encode(await prompter.sourceCode()).length,
  };
  for (const entry of await prompter.attributeEntries()) {
    const part = entry.name === "Parent" ? "Moss base" : entryKind(entry.prompt);
    tokensByPart[part] = (tokensByPart[part] ?? 0) + encoding.encode(entry.prompt).length;
  }
  await runtime.close();
  reportToParent({
    compileMs: compiled - started,
    firstPromptMs: rendered - compiled,
    warm,
    rssBeforeBytes,
    maxRssBytes,
    heapUsedBytes: memory.heapUsed,
    heapTotalBytes: memory.heapTotal,
    promptTokens: countTokens(prompt),
    promptCharacters: prompt.length,
    deterministic,
    tokensByPart,
  } satisfies ChildMeasurement);
}

function writeFixture(declarations: number): {
  modulePath: string;
  fixture: ReturnType<typeof promptFixture>;
} {
  const fixture = promptFixture(declarations);
  const directory = path.join(TEMPORARY_ROOT, `prompt-${declarations}`);
  mkdirSync(directory, { recursive: true });
  writeFileSync(path.join(directory, "api.ts"), fixture.apiSource);
  writeFileSync(path.join(directory, "context.ts"), fixture.contextSource);
  return { modulePath: path.relative(process.cwd(), path.join(directory, "context.ts")), fixture };
}

async function measureSize(declarations: number): Promise<SizeResult> {
  const { modulePath, fixture } = writeFixture(declarations);
  const measurements: ChildMeasurement[] = [];
  for (let child = 0; child < COLD_CHILDREN; child++) {
    measurements.push(await runChild<ChildMeasurement>("prompt", [modulePath]));
  }
  const byCold = [...measurements].sort(
    (a, b) => a.compileMs + a.firstPromptMs - (b.compileMs + b.firstPromptMs),
  );
  return {
    declarations: fixture.declarations,
    cold: summarize(measurements.map((measurement) => measurement.compileMs + measurement.firstPromptMs)),
    compile: summarize(measurements.map((measurement) => measurement.compileMs)),
    measurement: byCold[Math.floor(byCold.length / 2)]!,
    jsonTokens: countTokens(JSON.stringify(fixture.tools)),
    jsonPrettyTokens: countTokens(JSON.stringify(fixture.tools, null, 2)),
    tools: fixture.tools.length,
  };
}

/** Runs the prompt benchmark and prints its tables. */
export async function run(): Promise<void> {
  const results: SizeResult[] = [];
  try {
    for (const size of SIZES) results.push(await measureSize(size));
  } finally {
    for (const size of SIZES)
      rmSync(path.join(TEMPORARY_ROOT, `prompt-${size}`), { recursive: true, force: true });
  }

  for (const result of results) {
    const { measurement: m } = result;
    printTable(
      `prompt: ${result.declarations} declarations (MossCompiler in-process + dumpModulePrompt)`,
      ["figure", "median", "p90", "samples", "ratio / note"],
      [
        [
          "cold compile + first prompt (fresh process)",
          formatMs(result.cold.median),
          formatMs(result.cold.p90),
          String(result.cold.samples),
          `compile ${formatMs(result.compile.median)}, first render ${formatMs(m.firstPromptMs)}`,
        ],
        [
          "warm re-render dumpModulePrompt()",
          formatMs(m.warm.median),
          formatMs(m.warm.p90),
          String(m.warm.samples),
          `target < ${WARM_TARGET_MS} ms at 200: ${result.declarations === 200 ? verdict(m.warm.median, WARM_TARGET_MS) : "-"}; byte-identical: ${m.deterministic}`,
        ],
        [
          "peak RSS of the child (maxRSS)",
          formatBytes(m.maxRssBytes),
          "",
          "1",
          `+${formatBytes(m.maxRssBytes - m.rssBeforeBytes)} over ${formatBytes(m.rssBeforeBytes)} after imports`,
        ],
        [
          "V8 heap after compile + prompt",
          formatBytes(m.heapUsedBytes),
          "",
          "1",
          `heap committed ${formatBytes(m.heapTotalBytes)}`,
        ],
        ["prompt tokens (o200k_base)", String(m.promptTokens), "", "1", `${m.promptCharacters} characters`],
        [
          `JSON tool schemas, ${result.tools} tools (baseline)`,
          String(result.jsonTokens),
          "",
          "1",
          `compact JSON; pretty-printed: ${result.jsonPrettyTokens}`,
        ],
        [
          "prompt / JSON tokens",
          formatRatio(m.promptTokens, result.jsonTokens),
          "",
          "",
          `target <= ${TOKEN_RATIO_TARGET}: ${verdict(m.promptTokens / result.jsonTokens, TOKEN_RATIO_TARGET)}; vs pretty JSON ${formatRatio(m.promptTokens, result.jsonPrettyTokens)}`,
        ],
      ],
    );
  }

  const base = results[0]!;
  printTable(
    `prompt: growth against ${base.declarations} declarations (per-declaration ratio <= ~1 means linear or better)`,
    [
      "declarations",
      "cold",
      "cold/decl ratio",
      "warm",
      "warm/decl ratio",
      "RSS peak",
      "prompt tok",
      "tok/decl",
      "JSON tok/decl",
    ],
    results.map((result) => {
      const scale = result.declarations / base.declarations;
      return [
        String(result.declarations),
        formatMs(result.cold.median),
        formatRatio(result.cold.median / scale, base.cold.median),
        formatMs(result.measurement.warm.median),
        formatRatio(result.measurement.warm.median / scale, base.measurement.warm.median),
        formatBytes(result.measurement.maxRssBytes),
        String(result.measurement.promptTokens),
        (result.measurement.promptTokens / result.declarations).toFixed(1),
        (result.jsonTokens / result.declarations).toFixed(1),
      ];
    }),
  );

  const largest = results.at(-1)!;
  const parts = Object.entries(largest.measurement.tokensByPart).sort((a, b) => b[1] - a[1]);
  printTable(
    `prompt: where the tokens go at ${largest.declarations} declarations (entries without delimiters/headings)`,
    ["part", "tokens", "share of prompt", "per declaration of the kind"],
    parts.map(([part, tokens]) => [
      part,
      String(tokens),
      `${((100 * tokens) / largest.measurement.promptTokens).toFixed(1)}%`,
      ["interfaces", "type aliases", "functions", "classes", "consts"].includes(part)
        ? (tokens / (largest.declarations / 5)).toFixed(1)
        : "",
    ]),
    [
      `JSON side per unit of 5 declarations: ${(largest.jsonTokens / (largest.declarations / 5)).toFixed(1)} tokens (1 function + 5 public methods as tools; consts and return types have no JSON form)`,
    ],
  );
}
