// The process of a server's start-up proof (module-proof.ts): it reads the context module, loads it and its host
// setup as a thread's first run would (its type check off), closes what that made, reports, and exits. Its input
// comes as the first IPC message; its one answer goes back the same way.
import { compileModuleRuntime } from "../agent/index.ts";
import { ModuleCache } from "../compiler/index.ts";
import type { ModuleProofInput, ModuleProofReport } from "./module-proof.ts";

const report = (message: ModuleProofReport): void => {
  // Exits once the answer is sent: a host setup may leave handles open (a server, a timer) that would keep it alive.
  process.send!(message, () => process.exit(0));
};

process.once("message", async (input: ModuleProofInput) => {
  try {
    const runtime = await compileModuleRuntime(
      {
        modulePath: input.modulePath,
        compiler: { ...input.compiler, moduleCache: new ModuleCache(), typeCheck: "off" },
        ...(input.hostSetup === undefined ? {} : { hostSetup: input.hostSetup }),
        inject: [["moss.config", input.moduleConfig]],
      },
      undefined,
    );
    await runtime.close();
    report({ ok: true });
  } catch (error) {
    const failure = error as {
      name?: unknown;
      code?: unknown;
      message?: unknown;
      details?: unknown;
      stack?: unknown;
    };
    report({
      ok: false,
      error: {
        name: typeof failure?.name === "string" ? failure.name : "Error",
        message: typeof failure?.message === "string" ? failure.message : String(error),
        ...(typeof failure?.code === "string" ? { code: failure.code } : {}),
        ...(failure?.details !== null && typeof failure?.details === "object"
          ? { details: JSON.parse(JSON.stringify(failure.details)) as Record<string, unknown> }
          : {}),
        ...(typeof failure?.stack === "string" ? { stack: failure.stack } : {}),
      },
    });
  }
});
