import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { writeModule } from "./compile-from-text.ts";

/** A module whose Moss has two untyped data fields, `memo` and `other`, both null at first. */
const MEMO_MODULE = `import { Moss as Parent } from "moss-ts";

export class Moss extends Parent {
  memo: unknown = null;
  other: unknown = null;
}
`;

export type MemoSandbox = "in-process" | "process";

/**
 * Registers the hooks of a test file whose sessions run the memo module (check off), closing each test's runtimes
 * after it and the shared sandboxes after the file; returns how to open a session and run code in it.
 */
export function useMemoSessions(name: string): {
  compile(sandbox: MemoSandbox, context?: unknown): Promise<MossRuntime>;
  run(runtime: MossRuntime, body: string): ReturnType<MossRuntime["execute"]>;
} {
  let modulePath: string;
  const open: MossRuntime[] = [];
  beforeAll(async () => {
    modulePath = await writeModule(MEMO_MODULE, name);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  });
  afterAll(async () => {
    await closeSharedSandboxes();
  });
  return {
    async compile(sandbox, context) {
      const compiler = new MossCompiler({ sandbox, typeCheck: "off" });
      if (context !== undefined) compiler.joinContext(context as never);
      const runtime = await compiler.compile(modulePath);
      open.push(runtime);
      return runtime;
    },
    async run(runtime, body) {
      const execution = await runtime.execute({ code: `function main(moss: any) { ${body} }` });
      expect(execution.error).toBeUndefined();
      return execution;
    },
  };
}
