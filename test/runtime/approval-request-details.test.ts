import { rm } from "node:fs/promises";
import { describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MAX_REQUEST_DOC_BYTES } from "../../engine/runtime/declared-members.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ApprovalRequest, Execution } from "../../engine/types.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 26, "approvals people can judge": an approval request carries the member's parameter names as the module
 * declares them (`todos.remove(id: 3)`), its doc comment (bounded), and what each host-object argument is.
 */

const KEY = "approval request details continuation key";
const LONG = "Archives todos under a label. ".repeat(120);

const SOURCE = `import { Moss as Base } from "moss-ts";

/** A todo (a host object the model holds as a handle). */
export interface Todo {
  readonly id: number;
  /** Marks it done. */
  finish(): Promise<void>;
}

/** The todo list. */
export abstract class Todos {
  /** A todo by id. */
  abstract get(id: number): Todo;
  /**
   * Removes the todo \`id\` for good.
   * @param id the todo's id
   * @approval
   */
  abstract remove(id: number): Promise<boolean>;
  /**
   * ${LONG}
   * @approval
   */
  abstract archive(label: string, ...ids: number[]): Promise<number>;
  /** @approval */
  abstract share(todo: Todo, person: string): Promise<string>;
  /** @approval */
  abstract undocumented(): Promise<number>;
}

/**
 * Clears every todo.
 * @approval
 */
export function clearAll(confirm: boolean): string {
  return confirm ? "cleared" : "kept";
}

export class Moss extends Base {
  todos!: Todos;
}

// <moss-hide>
class HostTodo implements Todo {
  constructor(readonly id: number) {}
  async finish() {}
}

class HostTodos extends Todos {
  removed: number[] = [];
  get(id: number): Todo {
    return new HostTodo(id);
  }
  async remove(id: number) {
    this.removed.push(id);
    return true;
  }
  async archive(_label: string, ...ids: number[]) {
    return ids.length;
  }
  async share(todo: Todo, person: string) {
    return \`\${todo.id} to \${person}\`;
  }
  async undocumented() {
    return 1;
  }
}

export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind(Todos, new HostTodos());
}
// </moss-hide>
`;

const runtimes = runtimesClosedAfterAll();

const compiled = new Map<string, Promise<MossRuntime>>();

/** One runtime per driver, shared by the tests (each leaves it idle). */
function compile(sandbox: "process" | "in-process"): Promise<MossRuntime> {
  let runtime = compiled.get(sandbox);
  if (runtime === undefined) {
    runtime = compileNew(sandbox);
    compiled.set(sandbox, runtime);
  }
  return runtime;
}

async function compileNew(sandbox: "process" | "in-process"): Promise<MossRuntime> {
  const file = await writeModule(SOURCE);
  try {
    const runtime = await new MossCompiler({ sandbox, continuationKey: KEY }).compile(file);
    runtimes.push(runtime);
    return runtime;
  } finally {
    await rm(file, { force: true });
  }
}

function approvalOf(execution: Execution): ApprovalRequest {
  const [request] = pendingOf(execution).requests;
  expect(request?.kind).toBe("approval");
  return request as ApprovalRequest;
}

describe.each(["in-process", "process"] as const)("approval request details (%s driver)", (sandbox) => {
  test("a request names the member's parameters and carries its doc comment as declared", async () => {
    const runtime = await compile(sandbox);
    const paused = await runtime.execute({
      code: "async function main(moss: Moss) { return moss.todos.remove(3); }",
    });
    const request = approvalOf(paused);
    expect(request).toMatchObject({ service: "todos", member: "remove", args: [3], parameters: ["id"] });
    expect(request.doc).toBe("Removes the todo `id` for good.\n@param id the todo's id\n@approval");
    expect(request.handles).toBeUndefined();
    // The fields travel with the continuation and change nothing of the resume.
    const resumed = await runtime.resume(pendingOf(paused).continuation, {
      [request.id]: { approved: true },
    });
    expect(okOf(resumed)).toBe(true);
    expect((runtime.mossInjections().todos as { removed: number[] }).removed).toContain(3);
  });

  test("a rest parameter is named with its dots; a long doc is cut at 2 KiB with a marker", async () => {
    const runtime = await compile(sandbox);
    const request = approvalOf(
      await runtime.execute({
        code: 'async function main(moss: Moss) { return moss.todos.archive("old", 1, 2); }',
      }),
    );
    expect(request.parameters).toEqual(["label", "...ids"]);
    expect(Buffer.byteLength(request.doc!)).toBeLessThanOrEqual(MAX_REQUEST_DOC_BYTES);
    expect(request.doc).toMatch(/^Archives todos under a label\. /);
    expect(request.doc).toContain(`(cut at ${MAX_REQUEST_DOC_BYTES} bytes)`);
  });

  test("a host-object argument is described by its index; a member without parameters has an empty list", async () => {
    const runtime = await compile(sandbox);
    const request = approvalOf(
      await runtime.execute({
        code: 'async function main(moss: Moss) { const todo = moss.todos.get(7); return moss.todos.share(todo, "ada"); }',
      }),
    );
    expect(request.parameters).toEqual(["todo", "person"]);
    expect(request.args[1]).toBe("ada");
    expect(Object.keys(request.handles ?? {})).toEqual(["0"]);
    expect(request.handles?.[0]).toBe("Todo returned by call 1 (todos.get)");
    expect(request.args[0]).toBe(`[${request.handles?.[0]}]`);
    expect(request.doc).toBe("@approval");

    const bare = approvalOf(
      await runtime.execute({
        code: "async function main(moss: Moss) { return moss.todos.undocumented(); }",
      }),
    );
    expect(bare.parameters).toEqual([]);
  });

  test("a visible module function: its own parameters and doc; approved, the run goes on", async () => {
    const runtime = await compile(sandbox);
    const paused = await runtime.execute({ code: "function main() { return clearAll(true); }" });
    const request = approvalOf(paused);
    expect(request).toMatchObject({ member: "clearAll", args: [true], parameters: ["confirm"] });
    expect(request.doc).toBe("Clears every todo.\n@approval");
    const resumed = await runtime.resume(pendingOf(paused).continuation, {
      [request.id]: { approved: true },
    });
    expect(okOf(resumed)).toBe("cleared");
  });
});
