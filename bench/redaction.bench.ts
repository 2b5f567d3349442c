// What the bindings' secret redaction costs per answer: SecretRedactor over typical and large upstream answers.
import { SecretRedactor } from "../engine/membrane/index.ts";
import { TenantView } from "../engine/server/tenant-view.ts";
import { formatMs, printTable, sample } from "./stats.ts";

const SECRETS = ["sk_live_51HxYzAbCdEf0123456789", "robot-user:pa ss/w0rd+<&>", "ghp_0123456789abcdefABCDEF"];

function jsonAnswer(items: number): unknown {
  return {
    items: Array.from({ length: items }, (_, index) => ({
      id: index,
      name: `item number ${index}`,
      description: "some words that describe the thing in a sentence of prose",
      url: `https://api.example.com/v1/items/${index}?expand=owner&page=2`,
    })),
  };
}

export async function run(): Promise<void> {
  const redactor = new SecretRedactor();
  for (const secret of SECRETS) redactor.add(secret);
  const small = jsonAnswer(8);
  const large = jsonAnswer(8_000);
  const largeText = JSON.stringify(large);
  const prose = "The quick brown fox jumps over the lazy dog; internationalization & co. ".repeat(15_000);
  const binary = new Uint8Array(1024 * 1024).map((_, index) => (index * 7919) % 256);
  const cases: Array<[string, number, () => unknown]> = [
    [`JSON answer, ${JSON.stringify(small).length} B, parsed`, 200, () => redactor.redactValue(small)],
    [
      `JSON answer, ${(largeText.length / 1024 / 1024).toFixed(1)} MiB, parsed`,
      10,
      () => redactor.redactValue(large),
    ],
    [
      `same as text, ${(largeText.length / 1024 / 1024).toFixed(1)} MiB`,
      10,
      () => redactor.redactText(largeText),
    ],
    [`prose, ${(prose.length / 1024 / 1024).toFixed(1)} MiB`, 10, () => redactor.redactText(prose)],
    ["binary with NULs, 1.0 MiB", 10, () => redactor.redactBytes(binary)],
  ];
  const rows: string[][] = [];
  for (const [name, runs, action] of cases) {
    const summary = await sample(runs, action, 2);
    rows.push([name, formatMs(summary.median), formatMs(summary.p90)]);
  }
  printTable("SecretRedactor (3 secrets) over one upstream answer", ["answer", "median", "p90"], rows, [
    "every OpenAPI response and MCP result passes through it once before model code sees it",
  ]);

  // moss serve: every event a tenant reads passes TenantView once, when the worker stores it.
  const view = new TenantView([
    ...SECRETS,
    "postgres://moss:db-pass-w0rd@db.internal:5432/moss",
    "alice-secret-1",
  ]);
  const stdout = "line of output with some words 12345 abcdef\n".repeat(2_400);
  const events: Array<[string, number, () => unknown]> = [
    ["text-delta, 7 characters", 2_000, () => view.event({ type: "text-delta", step: 1, delta: "Hello, " })],
    [
      `execution, ${Math.round(stdout.length / 1024)} KB stdout and observation`,
      20,
      () =>
        view.event({
          type: "execution",
          step: 1,
          observation: stdout,
          execution: { ok: true, stdout, returns: null, warnings: [], context: {}, durationMs: 1, calls: [] },
        }),
    ],
  ];
  const eventRows: string[][] = [];
  for (const [name, runs, action] of events) {
    const summary = await sample(runs, action, 2);
    eventRows.push([name, formatMs(summary.median), formatMs(summary.p90)]);
  }
  printTable("TenantView (5 secrets) over one stored event", ["event", "median", "p90"], eventRows, [
    "moss serve stores every event through it (the worker's thread)",
  ]);
}
