import { afterEach, expect, test } from "vitest";
import { bootstrapCacheBytes, bootstrapScriptSource } from "../../engine/sandbox/bootstrap-entry.ts";
import { IsolateSession } from "../../engine/sandbox/isolate-session.ts";
import ivm from "../../engine/sandbox/isolated-vm.ts";

/*
 * A process's isolates compile the bootstrap from V8's code cache. The first cache holds only what V8 compiles
 * eagerly; before the process's first session an exercise of trusted code runs in an isolate no session gets, and
 * the cache is made again from it, holding the functions a session runs (each new isolate then skips compiling them).
 */

const MEBIBYTE = 1024 * 1024;
const sessions: IsolateSession[] = [];
afterEach(() => {
  for (const session of sessions.splice(0)) session.dispose();
});

/** The size of the cache V8 makes of the bootstrap's source alone (what it compiles eagerly). */
function eagerCacheBytes(): number {
  const isolate = new ivm.Isolate({ memoryLimit: 32 });
  try {
    const script = isolate.compileScriptSync(bootstrapScriptSource(), {
      produceCachedData: true,
    }) as ivm.Script & {
      cachedData?: ivm.ExternalCopy<ArrayBuffer>;
    };
    return script.cachedData!.copy().byteLength;
  } finally {
    isolate.dispose();
  }
}

test("a process's sessions come after the exercise: its isolate is gone and the cache holds more than the eager one", async () => {
  // Test files share their worker process (isolate: false): another file's session may have made the cache.
  const live = IsolateSession.liveCount;
  const session = await IsolateSession.create({ memoryLimitBytes: 64 * MEBIBYTE, thread: "caller-thread" });
  sessions.push(session);
  expect(IsolateSession.liveCount).toBe(live + 1);
  // Measured: ~24 kB eager, ~67 kB after the exercise on Node 20; the exact sizes depend on V8.
  expect(bootstrapCacheBytes()).toBeGreaterThan(1.5 * eagerCacheBytes());
  // A session opened from the cache works as one compiled afresh: its setup installs and its code runs.
  await session.install(
    { globals: '[["O"]]', mossData: '[["O","n",1],41]', mossServices: '[["O"]]', dataFields: ["n"] },
    { call: () => ({ kind: "error", wire: '["E","Error","no host here"]' }) },
  );
  const result = await session.run({
    script: "function main(moss) { moss.n++; return moss.n; }",
    filename: "snippet.js",
    target: "main",
    args: [{ local: "moss" }],
    limits: {
      wallTimeMs: 5_000,
      cpuTimeMs: 5_000,
      memoryLimitBytes: 64 * MEBIBYTE,
      maxStdoutBytes: 1_000,
      maxHostCalls: 10,
      maxResultBytes: 1_000,
      typeCheckTimeoutMs: 5_000,
      typeCheckMemoryBytes: 64 * MEBIBYTE,
    },
  });
  expect(result).toMatchObject({ ok: true, returns: "[42]" });
});
