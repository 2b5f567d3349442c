// The playground page at `/` of a real `moss serve` core (PGlite), driven in a real headless Chromium (Debian's
// `chromium`) by playwright-core. Runs where /usr/bin/chromium exists; in CI on the machine's own Node line only
// (.ci/run installs chromium and sets MOSS_TEST_BROWSER=1 there).
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeRequest } from "../../engine/format-value.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
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
/** The studio's screenshots (a paused approval and a finished run, at 1280 px and at 360 px): look at them. */
export const SCREENSHOTS = join(tmpdir(), "moss-studio-screenshots");

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
    server = await startTestServer(
      { dataDirectory: await freshPGliteDirectory(join(directory, "data")) },
      model.baseUrl,
    );
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
  /** A page of its own at `width` px, signed in as alice. */
  const studio = async (width: number, height = 800) => {
    const studioPage = await browser.newPage({ viewport: { width, height } });
    const errors: string[] = [];
    studioPage.on("pageerror", (error) => errors.push(error.message));
    await studioPage.goto(server.url!);
    await studioPage.getByLabel("Bearer token").fill(TOKENS.alice);
    await studioPage.getByRole("button", { name: "Sign in" }).click();
    await studioPage.getByRole("button", { name: "+ New thread" }).waitFor();
    return { page: studioPage, errors };
  };
  /** The run's life as the log told it, in order. */
  const life = (studioPage: Page) =>
    studioPage
      .getByRole("log")
      .getByText(/^run (queued|running|waiting for a person|completed|failed|cancelled)$/)
      .allTextContents();
  const PROGRAM = [
    "async function main(moss: Moss) {",
    '  console.log("checking the balance");',
    '  const receipt = await moss.vault.transfer("bob", 5);',
    '  return { receipt, lines: Array.from({ length: 20 }, (_, index) => "line " + index) };',
    "}",
  ].join("\n");
  const PROSE = [
    "**Plan**: send *5 euros* to [bob's bank](https://example.com/bob), then report.",
    "",
    "<script>document.title='pwned-script'</script> and <img src=x onerror=\"document.title='pwned-img'\">",
    "",
    "```ts",
    PROGRAM,
    "```",
  ].join("\n");

  it("the studio at 1280 px: markdown prose (model HTML inert), the program once with line numbers, the run's life, an approval in words approved by keyboard, the returned value and stdout", async () => {
    const { page: wide, errors } = await studio(1280);
    replies.push(
      { content: PROSE, toolCalls: [{ name: "moss", arguments: JSON.stringify({ code: PROGRAM }) }] },
      { content: "Done: **sent** 5 euros to bob." },
    );
    const before = (await transfers()).length;
    const task = wide.getByRole("textbox", { name: "Task for the agent" });
    await task.fill(`Send bob 5 euros and list 20 lines, ${randomUUID()}.`);
    await task.press("Control+Enter");

    // The prose is markdown: bold, emphasis and a safe link; the model's HTML is text, and nothing of it ran.
    const prose = wide.getByRole("region", { name: "Assistant" }).first();
    await prose.getByText("Plan", { exact: true }).waitFor();
    expect(await prose.locator("strong").first().textContent()).toBe("Plan");
    expect(await prose.locator("em").first().textContent()).toBe("5 euros");
    const link = prose.getByRole("link", { name: "bob's bank" });
    expect(await link.getAttribute("href")).toBe("https://example.com/bob");
    expect(await link.getAttribute("rel")).toBe("noopener noreferrer");
    await prose.getByText("<script>document.title='pwned-script'</script>", { exact: false }).waitFor();
    expect(await prose.textContent()).toContain("<img src=x onerror=\"document.title='pwned-img'\">");
    expect(await wide.locator("#log script, #log img").count()).toBe(0);
    expect(await wide.title()).toBe("moss playground");

    // The program is shown once, as code with line numbers: not again inside the prose.
    const program = wide.getByRole("region", { name: /^Program of step 1$/ });
    await program.waitFor();
    expect(await wide.getByRole("region", { name: /^Program of step/ }).count()).toBe(1);
    expect(await prose.textContent()).not.toContain("moss.vault.transfer");
    // The gutter (hidden from screen readers, visible on screen) numbers the five lines, then the code follows.
    expect(await program.textContent()).toContain("1\n2\n3\n4\n5async function main(moss: Moss) {");
    expect(await program.textContent()).toContain('const receipt = await moss.vault.transfer("bob", 5);');

    // The approval says the call in words with the parameter names the module declares, its doc comment, its line.
    const approval = wide.getByRole("region", {
      name: 'Approval needed: vault.transfer(to: "bob", amount: 5)',
    });
    await approval.waitFor();
    await approval.getByRole("heading", { name: 'vault.transfer(to: "bob", amount: 5)' }).waitFor();
    await approval.getByText("Sends `amount` euros to `to` and returns the receipt number.").waitFor();
    expect(await approval.textContent()).toContain("line 3 of the code");
    const status = wide.getByRole("status", { name: "Run status" });
    await wide.waitForFunction(
      () => (globalThis as any).document.getElementById("life")?.textContent === "run waiting for a person",
    );
    expect(await status.textContent()).toBe("run waiting for a person");
    expect(await life(wide)).toEqual(["run queued", "run running", "run waiting for a person"]);
    await mkdir(SCREENSHOTS, { recursive: true });
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-approval.png"), fullPage: true });
    expect((await transfers()).length).toBe(before);

    // Keyboard only: from the reason field, Tab reaches Approve (with a visible focus ring), Enter approves.
    await approval.getByRole("textbox", { name: "Reason if you deny (optional)" }).focus();
    await wide.keyboard.press("Tab");
    const focused = await wide.evaluate(() => ({
      name: (globalThis as any).document.activeElement?.getAttribute("aria-label"),
      visible: (globalThis as any).document.activeElement?.matches(":focus-visible"),
      outline: (globalThis as any).getComputedStyle((globalThis as any).document.activeElement!).outlineStyle,
    }));
    expect(focused).toEqual({
      name: 'Approve vault.transfer(to: "bob", amount: 5)',
      visible: true,
      outline: "solid",
    });
    await wide.keyboard.press("Tab");
    expect(await wide.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Deny");
    await wide.keyboard.press("Shift+Tab");
    await wide.keyboard.press("Enter");
    // The thread's record of the decision: who and when.
    await approval.getByText(/^Approved by alice at .+/).waitFor();
    expect(
      await approval
        .getByRole("button", { name: /^(Approve|Deny) / })
        .evaluateAll((buttons) => buttons.map((button) => (button as any).disabled)),
    ).toEqual([true, true]);

    // The run's life as it happened, then its outcome: stdout, the returned value (folded: it is long), the answer.
    const answer = wide.getByRole("region", { name: "Answer" });
    await answer.getByText("sent", { exact: true }).waitFor();
    expect(await answer.locator("strong").textContent()).toBe("sent");
    await wide.waitForFunction(
      () => (globalThis as any).document.getElementById("life")?.textContent === "run completed",
    );
    const told = await life(wide);
    expect(told.slice(0, 3)).toEqual(["run queued", "run running", "run waiting for a person"]);
    expect(told.at(-1)).toBe("run completed");
    expect(told.indexOf("run running", 3)).toBeGreaterThan(2);
    const outcome = wide.getByRole("region", { name: "Outcome of step 1: completed" });
    await outcome.getByText("checking the balance").waitFor();
    const folded = outcome.getByText(/^returned \(\d+ lines\)$/);
    expect(await outcome.getByText('"line 19"', { exact: false }).isVisible()).toBe(false);
    await folded.click();
    expect(await outcome.getByText('"line 19"', { exact: false }).isVisible()).toBe(true);
    expect(await outcome.textContent()).toMatch(/"receipt": "/);
    await outcome.getByText(/^host calls \(1\)$/).click();
    await outcome.getByRole("cell", { name: "vault.transfer" }).waitFor();
    expect((await transfers()).length - before).toBe(1);
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-completed.png"), fullPage: true });
    // The start of the conversation (prose and program), and the same page in dark colours.
    await wide.getByRole("log").evaluate((log) => log.scrollTo(0, 0));
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-top.png"), fullPage: true });
    await wide.emulateMedia({ colorScheme: "dark" });
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-dark.png"), fullPage: true });
    // After a reload the card still says who approved, and when (the thread's answer event), and takes no answer.
    await wide.emulateMedia({ colorScheme: "light" });
    await wide.reload();
    await approval.getByText(/^Approved by alice at .+/).waitFor();
    expect(
      await approval
        .getByRole("button", { name: /^(Approve|Deny) / })
        .evaluateAll((buttons) => buttons.map((button) => (button as any).disabled)),
    ).toEqual([true, true]);
    expect(errors).toEqual([]);
    await wide.close();
  });

  it("the studio at 360 px: nothing wider than the screen, Deny with a reason by keyboard reaches the code, a question answered from a text box, a thread deleted after confirming", async () => {
    const { page: narrow, errors } = await studio(360, 740);
    replies.push(
      code(
        '  try {\n    await moss.vault.transfer("bob", 500);\n  } catch (error) {\n    console.log("refused:", (error as Error).message);\n  }\n  const why = await moss.ask("Why so much?");\n  console.log("because", why);',
        "I will try to send **500 euros**.",
      ),
      { content: "Nothing was sent." },
    );
    const before = (await transfers()).length;
    const task = narrow.getByRole("textbox", { name: "Task for the agent" });
    // A 1×1 PNG goes with the message as the API's `images`; the page names it (its CSP draws no data: image).
    await narrow.getByLabel("Attach images").setInputFiles({
      name: "dot.png",
      mimeType: "image/png",
      buffer: Buffer.from(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
        "base64",
      ),
    });
    await task.fill(`Send bob 500 euros, ${randomUUID()}.`);
    await task.press("Control+Enter");
    const approval = narrow.getByRole("region", {
      name: 'Approval needed: vault.transfer(to: "bob", amount: 500)',
    });
    await approval.waitFor();
    await narrow.getByText("1 image attached: dot.png (image/png)").waitFor();
    const overflow = () => narrow.evaluate(() => (globalThis as any).document.documentElement.scrollWidth);
    expect(await overflow()).toBeLessThanOrEqual(360);
    await narrow.screenshot({ path: join(SCREENSHOTS, "studio-360-approval.png"), fullPage: true });

    // The reason is typed, then Tab, Tab reaches Deny; Enter denies with it.
    await approval.getByRole("textbox", { name: "Reason if you deny (optional)" }).fill("too much at once");
    await narrow.keyboard.press("Tab");
    await narrow.keyboard.press("Tab");
    expect(
      await narrow.evaluate(() => (globalThis as any).document.activeElement?.getAttribute("aria-label")),
    ).toBe('Deny vault.transfer(to: "bob", amount: 500)');
    await narrow.keyboard.press("Enter");
    await approval.getByText(/^Denied by alice at .+: too much at once$/).waitFor();

    // The code asked a question with no choices: a text box, answered with Enter.
    const question = narrow.getByRole("region", { name: "Question: Why so much?" });
    await question.waitFor();
    await question.getByRole("textbox", { name: "Your answer" }).fill("rent");
    await question.getByRole("textbox", { name: "Your answer" }).press("Enter");
    await narrow.getByRole("region", { name: "Answer" }).getByText("Nothing was sent.").waitFor();
    const stdout = await narrow.getByRole("region", { name: "Outcome of step 1: completed" }).textContent();
    expect(stdout).toContain("too much at once");
    expect(stdout).toContain("because rent");
    expect((await transfers()).length).toBe(before);
    expect(await overflow()).toBeLessThanOrEqual(360);
    await narrow.screenshot({ path: join(SCREENSHOTS, "studio-360-completed.png"), fullPage: true });

    // After a reload the denial is still there as the thread recorded it: who, when, the reason.
    await narrow.reload();
    await approval.getByText(/^Denied by alice at .+: too much at once$/).waitFor();

    // Rename: the thread's name (its metadata's title) changes on the server and in the list.
    const threadId = new URLSearchParams(new URL(narrow.url()).hash.slice(1)).get("thread")!;
    const first = (await call(server, "GET", `/v1/threads/${threadId}`)).body.thread.metadata.title as string;
    await narrow.getByRole("button", { name: `Rename thread ${first}` }).click();
    const title = `Rent for bob ${randomUUID().slice(0, 8)}`;
    await narrow.getByRole("textbox", { name: "New name" }).fill(title);
    await narrow.getByRole("textbox", { name: "New name" }).press("Enter");
    await narrow.getByRole("button", { name: `Rename thread ${title}` }).waitFor();
    expect((await call(server, "GET", `/v1/threads/${threadId}`)).body.thread.metadata).toEqual({ title });
    expect(await overflow()).toBeLessThanOrEqual(360);

    // Delete asks first; Keep keeps it, "Delete for good" deletes it.
    await narrow.getByRole("button", { name: `Delete thread ${title}` }).click();
    await narrow.getByRole("button", { name: `Keep thread ${title}` }).click();
    expect((await call(server, "GET", `/v1/threads/${threadId}`)).status).toBe(200);
    await narrow.getByRole("button", { name: `Delete thread ${title}` }).click();
    await narrow.getByRole("button", { name: `Delete thread ${title} and everything it stored` }).click();
    await narrow.getByRole("button", { name: `Delete thread ${title}` }).waitFor({ state: "detached" });
    expect((await call(server, "GET", `/v1/threads/${threadId}`)).status).toBe(404);
    expect(errors).toEqual([]);
    await narrow.close();
  });
  it("the Session panel shows a data field's value after a run and what changed, the Prompt view shows a visible declaration and no hidden one, an attached image is drawn after a reload", async () => {
    const { page: wide, errors } = await studio(1280);
    const note = `oat milk ${randomUUID().slice(0, 8)}`;
    const DOT =
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    replies.push(
      code(
        `  moss.notes.push(${JSON.stringify(note)});\n  moss.show({ mediaType: "image/png", data: ${JSON.stringify(DOT)} });`,
      ),
      { content: "Noted." },
    );
    await wide.getByLabel("Attach images").setInputFiles({
      name: "pixel.png",
      mimeType: "image/png",
      buffer: Buffer.from(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
        "base64",
      ),
    });
    const task = wide.getByRole("textbox", { name: "Task for the agent" });
    await task.fill("Remember to buy oat milk.");
    await task.press("Control+Enter");
    await wide.getByRole("region", { name: "Answer" }).getByText("Noted.").waitFor();

    // The data field as JSON text, marked changed; the log says which fields the step changed.
    const session = wide.getByRole("region", { name: "Session" });
    await session.getByText(note, { exact: false }).waitFor();
    expect(await session.getByRole("term").allTextContents()).toEqual(["notes changed"]);
    expect(JSON.parse((await session.getByRole("definition").textContent())!)).toEqual([note]);
    await wide.getByRole("log").getByText("session after step 1: notes changed").waitFor();

    // The prompt the model reads: the module's visible source, none of its hidden region.
    const prompt = wide.getByRole("region", { name: "Prompt" });
    await prompt.getByRole("button", { name: "Show the prompt" }).click();
    const text = prompt.getByLabel("Module prompt");
    await text.waitFor();
    expect(await text.textContent()).toContain("notes: string[] = [];");
    expect(await text.textContent()).toContain("vault!: Vault;");
    for (const hidden of ["__moss_compile__", "__moss_attr_prompts__", "moss-hide"]) {
      expect(await text.textContent()).not.toContain(hidden);
    }
    expect(await prompt.getByRole("button", { name: "Hide the prompt" }).getAttribute("aria-expanded")).toBe(
      "true",
    );
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-session-prompt.png"), fullPage: true });

    // After a reload: the image is drawn from the thread's image route through a blob: URL, the session is back.
    await wide.reload();
    const image = wide
      .getByRole("figure", { name: "Images attached to your task" })
      .getByRole("img", { name: "pixel.png" });
    await image.waitFor();
    await wide.waitForFunction(() =>
      [...(globalThis as any).document.querySelectorAll("figure img")].some(
        (img: any) => img.complete && img.naturalWidth === 1,
      ),
    );
    expect(await image.getAttribute("src")).toMatch(/^blob:/);
    const shown = wide
      .getByRole("figure", { name: "Images the code showed" })
      .getByRole("img", { name: "image 1" });
    await shown.waitFor();
    await wide.waitForFunction(() =>
      [...(globalThis as any).document.querySelectorAll("figure img")].every(
        (img: any) => img.complete && img.naturalWidth === 1,
      ),
    );
    expect(await shown.getAttribute("src")).toMatch(/^blob:/);
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-images-after-reload.png"), fullPage: true });
    await wide.getByRole("region", { name: "Session" }).getByText(note, { exact: false }).waitFor();
    expect(errors).toEqual([]);
    await wide.close();

    // At 360 px the panel and the prompt stay within the screen.
    const { page: narrow, errors: narrowErrors } = await studio(360, 740);
    await narrow.getByRole("button", { name: "Remember to buy oat milk." }).first().click();
    await narrow.getByRole("region", { name: "Session" }).getByText(note, { exact: false }).waitFor();
    await narrow.getByRole("button", { name: "Show the prompt" }).click();
    await narrow.getByLabel("Module prompt").waitFor();
    expect(
      await narrow.evaluate(() => (globalThis as any).document.documentElement.scrollWidth),
    ).toBeLessThanOrEqual(360);
    await narrow.screenshot({ path: join(SCREENSHOTS, "studio-360-session-prompt.png"), fullPage: true });
    expect(narrowErrors).toEqual([]);
    await narrow.close();
  });

  it("a failed execution shows its error with the code frame and the type-check diagnostics, then the run's answer", async () => {
    const { page: wide, errors } = await studio(1280);
    replies.push(code('  const amount: number = "five";\n  console.log(amount);'), {
      content: "The code did not type-check; nothing was sent.",
    });
    const task = wide.getByRole("textbox", { name: "Task for the agent" });
    await task.fill(`Send bob five euros, ${randomUUID()}.`);
    await task.press("Control+Enter");
    const failed = wide.getByRole("region", { name: "Outcome of step 1: failed" });
    await failed.waitFor();
    const diagnostics = failed.getByRole("list", { name: "Type-check diagnostics" });
    await diagnostics.waitFor();
    expect(await diagnostics.textContent()).toMatch(
      /error TS2322 at line 2:\d+: Type 'string' is not assignable to type 'number'/,
    );
    expect(await failed.textContent()).toContain('const amount: number = "five";');
    await wide
      .getByRole("region", { name: "Answer" })
      .getByText("nothing was sent", { exact: false })
      .waitFor();
    await wide.waitForFunction(
      () => (globalThis as any).document.getElementById("life")?.textContent === "run completed",
    );
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-type-error.png"), fullPage: true });
    expect(errors).toEqual([]);
    await wide.close();
  });
  it("a run's trace panel: each host call with its arguments, result, line, time and a person's approval; a huge argument cut with its marker", async () => {
    const { page: wide, errors } = await studio(1280);
    // A transfer to a huge name waits for approval: its trace row shows the arguments cut at 1 KiB.
    const name = "b".repeat(3000);
    replies.push(
      code(
        `  const receipt = await moss.vault.transfer("${name}", 1);\n  return [receipt, await moss.vault.balance()];`,
      ),
      { content: "Paid." },
    );
    const task = wide.getByRole("textbox", { name: "Task for the agent" });
    await task.fill(`Pay a long name, ${randomUUID()}.`);
    await task.press("Control+Enter");
    const pausedTrace = wide.getByRole("group", { name: /^Trace of run / });
    await pausedTrace.waitFor();
    await pausedTrace.getByText("Trace: the run's host calls").click();
    const pausedTable = pausedTrace.getByRole("table", {
      name: "Host calls of step 1 (paused for a person)",
    });
    await pausedTable.waitFor();
    const pendingRow = pausedTable.getByRole("row").filter({ hasText: "vault.transfer" });
    expect(await pendingRow.textContent()).toContain("waits for a person");
    // `["` + 3,000 characters + `",1]`: the cell ends with the marker naming the whole size.
    expect(await pendingRow.textContent()).toContain(`["${"b".repeat(40)}`);
    expect(await pendingRow.textContent()).toContain("… (truncated, 3006 bytes)");

    await wide.getByRole("button", { name: "Approve" }).click();
    await wide.getByRole("region", { name: "Answer" }).getByText("Paid.").waitFor();
    // The panel moved to the run's end and reads the trace again: the resumed step, its approval and results.
    const doneTable = pausedTrace.getByRole("table", { name: "Host calls of step 1 (completed)" });
    await doneTable.waitFor();
    const transfer = doneTable.getByRole("row").filter({ hasText: "vault.transfer" });
    expect(await transfer.textContent()).toMatch(/ran, approved by a person/);
    expect(await transfer.textContent()).toMatch(/"receipt-\d+"/);
    const balance = doneTable.getByRole("row").filter({ hasText: "vault.balance" });
    const cells = await balance.getByRole("cell").allTextContents();
    expect(cells.slice(0, 3)).toEqual(["vault.balance", "3", "ran"]);
    expect(cells[3]).toMatch(/^\d+(\.\d)? ms$/);
    expect(cells[4]).toBe("[]");
    expect(cells[5]).toMatch(/^-?\d+$/);
    await doneTable.scrollIntoViewIfNeeded();
    await wide.screenshot({ path: join(SCREENSHOTS, "studio-1280-trace.png"), fullPage: true });
    expect(errors).toEqual([]);
    await wide.close();
  });
});
