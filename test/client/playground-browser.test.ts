// The playground page at `/` of a real `moss serve` core (PGlite), driven in a real headless Chromium (Debian's
// `chromium`) by playwright-core. Runs where /usr/bin/chromium exists; in CI on the machine's own Node line only
// (.ci/run installs chromium and sets MOSS_TEST_BROWSER=1 there).
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRequest } from "../../engine/agent/observation.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { call, startTestServer, TOKENS } from "../server/server-harness.ts";

const CHROMIUM = "/usr/bin/chromium";
const BROWSER_TESTS =
  existsSync(CHROMIUM) && (process.env.CI === undefined || process.env.MOSS_TEST_BROWSER === "1");
/** The flags a headless Chromium needs as root on a machine with a closed network (TOOLCHAIN-NOTES.md). */
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
export const SCREENSHOT = join(tmpdir(), "moss-playground.png");

const code = (body: string, prose = ""): FakeReply => ({
  content: prose,
  toolCalls: [
    { name: "moss", arguments: JSON.stringify({ code: `async function main(moss: Moss) {\n${body}\n}` }) },
  ],
});
const TRANSFER = '  const receipt = await moss.vault.transfer("bob", 5);\n  console.log("sent", receipt);';
const HOSTILE = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>";

describe.runIf(BROWSER_TESTS)("the playground in headless Chromium", () => {
  const replies: FakeReply[] = [];
  let model: FakeOpenAIServer;
  let server: MossServer;
  let directory: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-playground-"));
    process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
    model = await startFakeOpenAIServer(replies);
    server = await startTestServer({ dataDirectory: join(directory, "data") }, model.baseUrl);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
    page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close(1_000);
    await model?.close();
    await closeSharedSandboxes();
    await rm(directory, { recursive: true, force: true });
    delete process.env.MOSS_VAULT_LOG;
  });

  const transfers = async () =>
    (await readFile(process.env.MOSS_VAULT_LOG!, "utf8").catch(() => "")).split("\n").filter(Boolean);
  const sendTask = async (text: string) => {
    await page.click("#new-thread");
    await page.fill("#message", text);
    await page.click("#send");
  };

  it("signs in with a token, streams a task's code, shows the approval's call and arguments, survives a reload, and Approve resumes the run", async () => {
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(server.url!);
    expect(await page.getAttribute("#app", "hidden")).not.toBeNull();
    await page.fill("#token", "not-a-token");
    await page.click("#signin button");
    await page.waitForSelector("#signin-error:has-text('not one this server knows')");
    await page.fill("#token", TOKENS.alice);
    await page.click("#signin button");
    await page.waitForSelector("#app:not([hidden])");

    replies.push(code(TRANSFER, `Sending it now. ${HOSTILE}`), { content: "Sent 5 euros to bob." });
    const before = (await transfers()).length;
    await sendTask("Send bob 5 euros.");
    const card = page.locator(".clarification");
    await card.waitFor();
    const shown = await card.locator(".call").textContent();
    expect(shown).toContain('vault.transfer("bob", 5)');
    // The engine's one describer wrote it (the stored event's `description`), not the page's own formatting.
    const pendingThread = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("thread");
    const state = await call(server, "GET", `/v1/threads/${pendingThread}`);
    expect(shown).toBe(describeRequest(state.body.pending[0]));
    expect(JSON.parse((await card.locator(".args").textContent())!)).toEqual(["bob", 5]);
    expect(await card.locator("button").allTextContents()).toEqual(["Approve", "Deny"]);
    expect(await page.locator(".code pre").textContent()).toContain('moss.vault.transfer("bob", 5)');
    // The model's text is shown as text: its markup is neither parsed nor run.
    await page.locator(".text", { hasText: "Sending it now." }).waitFor();
    expect(await page.locator(".text").first().textContent()).toContain(HOSTILE);
    expect(await page.locator("#log img, #log b").count()).toBe(0);
    expect(await page.title()).toBe("moss playground");
    expect(await page.locator(".user").textContent()).toBe("Send bob 5 euros.");
    const threadId = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("thread");
    await page.locator(`#threads button[data-thread-id="${threadId}"]`).waitFor();

    // A reload reconnects: the thread's history is replayed and the pending approval is still answerable.
    await page.reload();
    await page.locator(".clarification button:has-text('Approve'):not([disabled])").waitFor();
    expect(await page.locator(".user").count()).toBe(1);
    expect((await transfers()).length).toBe(before);
    await page.click(".clarification button:has-text('Approve')");
    await page.locator(".answer", { hasText: "Sent 5 euros to bob." }).waitFor();
    expect(await page.locator(".text", { hasText: "Sent 5 euros to bob." }).count()).toBe(0);
    expect(await page.locator(".execution .stdout").last().textContent()).toMatch(/^sent /);
    expect(await page.locator(".clarification button:not([disabled])").count()).toBe(0);
    expect((await transfers()).length - before).toBe(1);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(errors).toEqual([]);
  });

  it("shows a question's choices as buttons and answers with the one clicked", async () => {
    replies.push(
      code(
        '  const color = await moss.ask("Which color?", { choices: ["red", "blue"] });\n  console.log("color", color);',
      ),
      { content: "Blue it is." },
    );
    await sendTask("Pick a color.");
    await page.locator(".clarification .question", { hasText: "Which color?" }).waitFor();
    expect(await page.locator(".clarification button").allTextContents()).toEqual(["red", "blue"]);
    await page.click(".clarification button:has-text('blue')");
    await page.locator(".answer", { hasText: "Blue it is." }).waitFor();
    expect(await page.locator(".execution .stdout").last().textContent()).toBe("color blue\n");
  });

  it("cancels a paused run with the Cancel button; nothing is sent", async () => {
    replies.push(code(TRANSFER));
    const before = (await transfers()).length;
    await sendTask(`Send bob 5 euros, ${randomUUID()}.`);
    await page.locator(".clarification").waitFor();
    await page.locator("#cancel:not([disabled])").waitFor();
    await page.click("#cancel");
    await page.locator(".status", { hasText: "run cancelled" }).waitFor();
    expect(await page.locator(".clarification button:not([disabled])").count()).toBe(0);
    expect(await page.isDisabled("#cancel")).toBe(true);
    expect((await transfers()).length).toBe(before);
  });

  it("Cancel of a run whose thread was deleted says the thread is gone (nothing to cancel), once, and turns Cancel off", async () => {
    replies.push(code(TRANSFER));
    const before = (await transfers()).length;
    await sendTask(`Send bob 5 euros, ${randomUUID()}.`);
    await page.locator(".clarification").waitFor();
    await page.locator("#cancel:not([disabled])").waitFor();
    const threadId = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("thread")!;
    const errorsBefore = await page.locator("#log .error").count();
    // The page's event stream reconnects once the deletion ends it: hold that reconnection until Cancel is clicked,
    // so the click (not the stream) is what meets the gone thread first.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const events = `**/v1/threads/${encodeURIComponent(threadId)}/events`;
    const routed: Array<Promise<void>> = [];
    await page.route(events, (route) => {
      const continued = held.then(() => route.continue());
      routed.push(continued);
      return continued;
    });
    try {
      // A paused run goes with its thread (the server refuses to delete one with a running run).
      expect((await call(server, "DELETE", `/v1/threads/${threadId}`)).status).toBe(204);
      await page.click("#cancel");
      const gone = page.locator(".status", { hasText: "this thread was deleted" });
      await gone.waitFor();
      expect(await gone.textContent()).toContain("nothing to cancel");
      expect(await page.isDisabled("#cancel")).toBe(true);
      expect(await page.locator("#log .error").count()).toBe(errorsBefore);
      await page.locator(`#threads button[data-thread-id="${threadId}"]`).waitFor({ state: "detached" });
      await page.locator("#connection", { hasText: "reconnecting" }).waitFor();
      // The stream then meets the same 404, stops, and says nothing more.
      release();
      await page.locator("#connection", { hasText: "disconnected" }).waitFor();
      expect(await page.locator(".status", { hasText: "this thread was deleted" }).count()).toBe(1);
      expect(await page.locator("#log .error").count()).toBe(errorsBefore);
    } finally {
      release();
      await Promise.all(routed);
      await page.unroute(events);
    }
    expect((await transfers()).length).toBe(before);
  });
});
