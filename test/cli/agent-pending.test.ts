import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import type { ScriptedResponse } from "../../engine/agent/scripted-language-model.ts";
import type { CliIo } from "../../engine/cli/cli-io.ts";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { main } from "../../engine/cli/main.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { runMoss } from "../helpers/moss-cli.ts";

const VAULT = "test/agent/fixtures/vault/context.ts";
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-cli-pending-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

/** Runs the real `moss` binary in a child process, as a user would (stdin a pipe: no one to ask). */
const moss = (args: string[]) => runMoss(args, { env: { MOSS_VAULT_LOG: log() } });

const log = () => path.join(directory, "vault.log");
const transfers = async () => (await readFile(log(), "utf8").catch(() => "")).split("\n").filter(Boolean);

async function recording(name: string, responses: ScriptedResponse[]): Promise<string> {
  const file = path.join(directory, name);
  await writeFile(file, JSON.stringify({ responses }));
  return file;
}

const step = (body: string): ScriptedResponse => ({
  toolCalls: [{ name: "moss", arguments: { code: `async function main(moss: Moss) {\n${body}\n}` } }],
});
const TRANSFER =
  '  const receipt = await moss.vault.transfer("bob", 5);\n  console.log("sent", receipt);\n  return receipt;';
const ASK =
  '  const colour = await moss.ask("Which colour?", { choices: ["red", "blue"] });\n  return colour;';

describe("moss agent with paused runs", () => {
  test("--approve all approves the call without asking; it runs once", async () => {
    const replay = await recording("all.json", [step(TRANSFER), { content: "Sent." }]);
    const result = await moss(["agent", VAULT, "Send bob 5 euros", "--replay", replay, "--approve", "all"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toMatch(/── approval · #\S+ approval vault\.transfer\("bob", 5\) at line 2 ──/);
    expect(result.stdout).toContain("── result · paused");
    expect(result.stdout).toContain("sent receipt-1");
    expect(result.stdout).toMatch(/── answer: .* ──\n$/);
    expect(await transfers()).toEqual(["bob 5"]);
  });

  test("--approve none denies with a reason the code sees as ApprovalDenied; nothing runs", async () => {
    const replay = await recording("none.json", [step(TRANSFER), { content: "It was refused." }]);
    const result = await moss(["agent", VAULT, "Send bob 5 euros", "--replay", replay, "--approve", "none"]);
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toContain("ApprovalDenied");
    expect(result.stdout).toContain("denied by --approve none");
    expect(await transfers()).toEqual([]);
  });

  test("a question no one can answer exits 7 with the paused run saved; --resume --answers goes on in a new process", async () => {
    const sessions = path.join(directory, "sessions");
    const first = await moss([
      "agent",
      VAULT,
      "Pick a colour",
      "--replay",
      await recording("ask.json", [step(ASK)]),
      "--session",
      "colours",
      "--sessions-dir",
      sessions,
      "--approve",
      "all",
    ]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(EXIT.paused);
    expect(first.stdout).toMatch(
      /── pending: the code waits for a person: 1 request\(s\) to answer · 1 step\(s\)/,
    );
    expect(first.stdout).toContain("── paused: 1 request(s) wait for an answer ──");
    expect(first.stdout).toMatch(/#(\S+) question at line 2: Which colour\? \[red \| blue\]/);
    expect(first.stdout).toContain(`moss agent ${VAULT} --session colours --resume --answers <file.json>`);
    const id = first.stdout.match(/#(\S+) question at line 2/)![1]!;
    const key = await stat(path.join(sessions, "continuation.key"));
    expect(key.mode & 0o777).toBe(0o600);

    const answers = path.join(directory, "answers.json");
    await writeFile(answers, JSON.stringify({ [id]: { answer: "blue" } }));
    const second = await moss([
      "agent",
      VAULT,
      "--session",
      "colours",
      "--sessions-dir",
      sessions,
      "--resume",
      "--answers",
      answers,
      "--replay",
      await recording("after.json", [{ content: "You picked blue." }]),
    ]);
    expect(second.stderr).toBe("");
    expect(second.code).toBe(EXIT.ok);
    expect(second.stdout).toContain('<returns>\n"blue"\n</returns>');
    expect(second.stdout).toContain("You picked blue.");
    const conversation = JSON.parse(await readFile(path.join(sessions, "colours.conversation.json"), "utf8"));
    expect(conversation.messages.map((message: { role: string }) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);

    const again = await moss([
      "agent",
      VAULT,
      "--session",
      "colours",
      "--sessions-dir",
      sessions,
      "--resume",
    ]);
    expect(again.code).toBe(EXIT.input);
    expect(again.stderr).toContain('Session "colours" has no paused run to resume');
  });

  test("an answer that names another call than the one waiting under its id runs nothing (exit 4); the right one runs it once", async () => {
    const sessions = path.join(directory, "sessions");
    const session = ["--session", "rent", "--sessions-dir", sessions];
    const first = await moss([
      "agent",
      VAULT,
      "Send bob 5 euros",
      "--replay",
      await recording("pay.json", [step(TRANSFER)]),
      ...session,
    ]);
    expect(first.code).toBe(EXIT.paused);
    const id = first.stdout.match(/#(\S+) approval vault\.transfer\("bob", 5\)/)![1]!;
    // The exit-7 message offers answers that name the call the person saw.
    expect(first.stdout).toContain(
      JSON.stringify({ [id]: { approved: true, member: "vault.transfer", args: ["bob", 5] } }),
    );
    const answers = path.join(directory, "answers.json");
    await writeFile(
      answers,
      JSON.stringify({ [id]: { approved: true, member: "vault.transfer", args: ["mallory", 5000] } }),
    );
    const refused = await moss(["agent", VAULT, "--resume", "--answers", answers, ...session]);
    expect(refused.code).toBe(EXIT.input);
    expect(refused.stdout).toContain("nothing ran");
    expect(refused.stdout).toContain(
      `the answer was given for vault.transfer("mallory", 5000), but #${id} now asks to approve vault.transfer("bob", 5)`,
    );
    expect(await transfers()).toEqual([]);

    await writeFile(
      answers,
      JSON.stringify({ [id]: { approved: true, member: "vault.transfer", args: ["bob", 5] } }),
    );
    const paid = await moss([
      "agent",
      VAULT,
      "--resume",
      "--answers",
      answers,
      "--replay",
      await recording("paid.json", [{ content: "Sent." }]),
      ...session,
    ]);
    expect(paid.code).toBe(EXIT.ok);
    expect(await transfers()).toEqual(["bob 5"]);
  });

  test("--resume needs --session and takes no task; --approve takes all or none", async () => {
    const usage = async (...args: string[]) => {
      const result = await main(["agent", VAULT, ...args], io(""));
      return result;
    };
    expect(await usage("--resume")).toBe(EXIT.usage);
    expect(await usage("a task", "--session", "s", "--resume")).toBe(EXIT.usage);
    expect(await usage("a task", "--approve", "some")).toBe(EXIT.usage);
  });
});

/** An in-process CLI whose stdin is a terminal that types `input`. */
function io(input: string): CliIo & { out: () => string; err: () => string } {
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
    stdin,
    stdout,
    stderr,
    env: { NO_COLOR: "1" },
    cwd: process.cwd(),
    out: () => out,
    err: () => err,
  };
}

describe("moss agent asks a person at a terminal", () => {
  beforeEach(() => {
    process.env.MOSS_VAULT_LOG = log();
  });
  afterEach(() => {
    delete process.env.MOSS_VAULT_LOG;
  });

  test("an approval denied with a reason, then a question answered by the number of its choice", async () => {
    const replay = await recording("tty.json", [
      step(
        `  try {\n    await moss.vault.transfer("bob", 5);\n  } catch (error) {\n    console.log("refused:", (error as Error).name, (error as Error).message);\n  }\n${ASK}`,
      ),
      { content: "Blue, and nothing was sent." },
    ]);
    const cli = io("maybe\nn\nnot this month\ngreen\n2\n");
    const code = await main(["agent", VAULT, "Pay bob, then pick a colour", "--replay", replay], cli);
    // The person sees the call itself: member, arguments and the line of code that makes it.
    expect(cli.err()).toContain('> 3 |     await moss.vault.transfer("bob", 5);\n');
    expect(cli.err()).toMatch(/Approve vault\.transfer\("bob", 5\) at line 3 \(#\S+\)\? \[y\/n\] /);
    expect(cli.err()).toContain("Reason for the model (optional, Enter to skip): ");
    expect(cli.err()).toContain("Which colour?\n  1) red\n  2) blue\n");
    expect(cli.err()).toContain("Pick one of the 2 choices.");
    expect(code).toBe(EXIT.ok);
    expect(cli.out()).toContain("refused: ApprovalDenied");
    expect(cli.out()).toContain("not this month");
    expect(cli.out()).toContain('<returns>\n"blue"\n</returns>');
    expect(await transfers()).toEqual([]);
  });

  test("input that ends before an answer leaves the run paused: exit 7, and without --session it says so", async () => {
    const replay = await recording("eof.json", [step(ASK)]);
    const cli = io("");
    const code = await main(["agent", VAULT, "Pick a colour", "--replay", replay], cli);
    expect(code).toBe(EXIT.paused);
    expect(cli.out()).toContain("The run cannot be resumed later: it has no --session.");
  });
});
