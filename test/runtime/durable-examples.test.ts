import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ApprovalRequest, ClarificationRequest } from "../../engine/types.ts";
import { JsonFileTodoList } from "../../examples/todo/json-file-todo-list.ts";

/* Issue 10: the examples show both ways a run waits for a person (README, "Durable runs"). */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const folder = mkdtempSync(path.join(tmpdir(), "moss-durable-examples-"));
const runtimes: MossRuntime[] = [];
afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.close()));
  rmSync(folder, { recursive: true, force: true });
});

describe("durable runs in the examples", () => {
  test("sphero: a sprint (declared @approval) waits for a person, then rolls at full speed once", async () => {
    const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(
      path.join(ROOT, "examples/sphero/context.ts"),
    );
    runtimes.push(runtime);
    const code = `async function main(moss: Moss) {
  await moss.body.roll(0, 100, 1);
  await moss.body.sprint(90, 2);
  return moss.body.history().map((move) => move.speed);
}`;
    const paused = await runtime.execute({ code });
    expect(paused.error).toBeUndefined();
    const request = paused.pending?.requests[0] as ApprovalRequest;
    expect(request).toMatchObject({
      kind: "approval",
      service: "body",
      member: "sprint",
      args: [90, 2],
      line: 3,
    });
    expect(await runtime.prompter().dumpModulePrompt()).toContain("@approval");
    const resumed = await runtime.resume(paused.pending!.continuation, { [request.id]: { approved: true } });
    expect(resumed.error).toBeUndefined();
    expect(resumed.returns).toEqual([100, 255]);
  });

  test("todo: an ambiguous request asks the user which item, and goes on with the answer", async () => {
    const list = new JsonFileTodoList(path.join(folder, "todo.json"));
    await list.add("send report to Ana");
    await list.add("send report to Bo");
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const { TodoList } = await import("../../examples/todo/todo-list.ts");
    compiler.bind(TodoList, list);
    const runtime = await compiler.compile(path.join(ROOT, "examples/todo/context.ts"));
    runtimes.push(runtime);
    const code = `async function main(moss: Moss) {
  const matches = (await moss.todos.list({ done: false })).filter((item) => item.title.includes("report"));
  const title = matches.length === 1 ? matches[0]!.title : await moss.ask("Which report is done?", { choices: matches.map((item) => item.title) });
  const item = matches.find((candidate) => candidate.title === title)!;
  return (await moss.todos.complete(item.id)).title;
}`;
    const paused = await runtime.execute({ code });
    expect(paused.error).toBeUndefined();
    const request = paused.pending?.requests[0] as ClarificationRequest;
    expect(request).toMatchObject({
      kind: "clarification",
      choices: ["send report to Ana", "send report to Bo"],
    });
    const resumed = await runtime.resume(paused.pending!.continuation, {
      [request.id]: { answer: "send report to Bo" },
    });
    expect(resumed.error).toBeUndefined();
    expect(resumed.returns).toBe("send report to Bo");
    expect((await list.list({ done: true })).map((item) => item.title)).toEqual(["send report to Bo"]);
  });
});
