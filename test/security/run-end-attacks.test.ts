import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { PolicyVerdict } from "../../engine/types.ts";
import { bindMcp } from "../../moss-modules/mcp/index.ts";
import { bindOpenApi, type OpenApiDocument } from "../../moss-modules/openapi/index.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";
import { compileServices, HOSTILE_MCP_SERVER, scratchFolder } from "./upstream-rig.ts";

/*
 * Issue 24 §7: work a run started ends with the run. Whatever ends it (completion, error, timeout, a crash of its
 * sandbox process), host work it started and nobody awaits any more is aborted at once, and a host call that had not
 * started yet never starts. The tests wait on events (the server sees every connection close, a marker file appears);
 * the requests' own time limits are ten minutes, so only the end of the run can close them in a test's time.
 */

let scratch: Awaited<ReturnType<typeof scratchFolder>>;
beforeAll(async () => {
  scratch = await scratchFolder("run-end-attacks");
});
afterAll(async () => {
  await scratch?.remove();
});
const runtimes = runtimesClosedAfterAll();

/**
 * A real HTTP API whose `/hang` never answers; it counts the connections of those requests still open (a pooled
 * keep-alive connection of `/ready` is not one) and says when none is left.
 */
async function startHangingServer(expected: number) {
  let open = 0;
  let seen = 0;
  let onIdle: (() => void) | undefined;
  const waiting: Array<() => void> = [];
  const server: Server = createServer((request: IncomingMessage, response) => {
    if (request.url?.startsWith("/ready")) {
      const answer = () => response.writeHead(200, { "content-type": "application/json" }).end("{}");
      if (seen >= expected) answer();
      else waiting.push(answer);
      return;
    }
    seen++;
    open++;
    request.socket.once("close", () => {
      open--;
      if (open === 0) onIdle?.();
    });
    if (seen >= expected) for (const answer of waiting.splice(0)) answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    open: () => open,
    seen: () => seen,
    /** Resolves once no connection is open (at once when none is). */
    idle: () =>
      new Promise<void>((resolve) => {
        if (open === 0) resolve();
        else onIdle = resolve;
      }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const HANGING_DOCUMENT = {
  openapi: "3.0.3",
  info: { title: "Echo", version: "1" },
  paths: {
    "/ready": {
      get: {
        operationId: "ready",
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
    "/hang": {
      get: {
        operationId: "hang",
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
  },
} as unknown as OpenApiDocument;

const JOURNAL_MODULE = `import { Moss as Base } from "moss-ts";

/** A journal. */
export abstract class Journal {
  /** Writes a line. */
  abstract write(line: string): Promise<number>;
}

export class Moss extends Base {
  journal!: Journal;
}

// <moss-hide>
export class HostJournal extends Journal {
  written: string[] = [];
  async write(line: string) {
    this.written.push(line);
    return this.written.length;
  }
}
export function __moss_compile__(compiler: any) {
  compiler.bind(Journal, new HostJournal());
}
// </moss-hide>
`;

/** Resolves when `file` exists (a watch on its folder, not a poll). */
async function appears(file: string, timeoutMs = 30_000): Promise<void> {
  // Polled, not watched: fs/promises' watch is an async generator that starts watching only at the first next(), so
  // a file made between a first existsSync and that moment was never reported (the test then hung to its timeout).
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`${file} did not appear within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(["in-process", "process"] as const)(
  "work a run started ends with the run (%s driver)",
  (driver) => {
    test("300 OpenAPI requests nobody awaits are closed as soon as the run times out", async () => {
      const server = await startHangingServer(300);
      const typesFile = path.join(scratch.folder, `echo-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["echo", "Echo", typesFile]],
        (compiler) =>
          bindOpenApi(compiler, "Echo", HANGING_DOCUMENT, {
            serverUrl: server.url,
            typesFile,
            timeoutMs: 10 * 60_000,
          }),
      );
      runtimes.push(runtime);
      try {
        const execution = await runtime.execute({
          code: `async function main(moss: Moss) {
  for (let index = 0; index < 300; index++) moss.echo.hang().catch(() => {});
  await moss.echo.ready();
  await new Promise(() => {});
}`,
          limits: { wallTimeMs: 1_500 },
        });
        expect(execution.error?.kind).toBe("timeout");
        expect(server.seen()).toBeGreaterThan(0);
        await server.idle();
        expect(server.open()).toBe(0);
      } finally {
        await server.close();
      }
    });

    test("300 OpenAPI requests left behind by a run that spins until its wall time are closed when it ends", async () => {
      const server = await startHangingServer(300);
      const typesFile = path.join(scratch.folder, `echo-spin-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["echo", "Echo", typesFile]],
        (compiler) =>
          bindOpenApi(compiler, "Echo", HANGING_DOCUMENT, {
            serverUrl: server.url,
            typesFile,
            timeoutMs: 10 * 60_000,
          }),
      );
      runtimes.push(runtime);
      try {
        const execution = await runtime.execute({
          code: `async function main(moss: Moss) {
  for (let index = 0; index < 300; index++) moss.echo.hang().catch(() => {});
  for (;;) {}
}`,
          limits: { wallTimeMs: 1_500, cpuTimeMs: 10_000 },
        });
        expect(execution.error?.kind).toBe("timeout");
        await server.idle();
        expect(server.open()).toBe(0);
      } finally {
        await server.close();
      }
    });

    // `new Array(1e9).fill(0)` is a V8 fatal error: it ends the whole process, so only a sandbox process may run it.
    test.runIf(driver === "process")(
      "OpenAPI requests nobody awaits are closed when the run's sandbox process crashes",
      async () => {
        const server = await startHangingServer(50);
        const typesFile = path.join(scratch.folder, `echo-crash-${driver}.api.ts`);
        const runtime = await compileServices(
          scratch.folder,
          driver,
          [["echo", "Echo", typesFile]],
          (compiler) =>
            bindOpenApi(compiler, "Echo", HANGING_DOCUMENT, {
              serverUrl: server.url,
              typesFile,
              timeoutMs: 10 * 60_000,
            }),
        );
        runtimes.push(runtime);
        try {
          const execution = await runtime.execute({
            code: `async function main(moss: Moss) {
  for (let index = 0; index < 50; index++) moss.echo.hang().catch(() => {});
  await moss.echo.ready();
  return new Array(1e9).fill(0).length;
}`,
            limits: { wallTimeMs: 20_000 },
          });
          expect(["crash", "memory"]).toContain(execution.error?.kind);
          expect(server.seen()).toBe(50);
          await server.idle();
          expect(server.open()).toBe(0);
        } finally {
          await server.close();
        }
      },
    );

    test("OpenAPI requests nobody awaits are closed when the run returns", async () => {
      const server = await startHangingServer(50);
      const typesFile = path.join(scratch.folder, `echo-done-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["echo", "Echo", typesFile]],
        (compiler) =>
          bindOpenApi(compiler, "Echo", HANGING_DOCUMENT, {
            serverUrl: server.url,
            typesFile,
            timeoutMs: 10 * 60_000,
          }),
      );
      runtimes.push(runtime);
      try {
        const execution = await runtime.execute({
          code: `async function main(moss: Moss) {
  for (let index = 0; index < 50; index++) moss.echo.hang().catch(() => {});
  await moss.echo.ready();
  return "left them";
}`,
        });
        expect(execution.returns).toBe("left them");
        await server.idle();
        expect(server.open()).toBe(0);
      } finally {
        await server.close();
      }
    });

    test("a host call still waiting for its policy when the run times out never reaches the service", async () => {
      let release: (verdict: PolicyVerdict) => void = () => {};
      const decided = new Promise<PolicyVerdict>((resolve) => {
        release = resolve;
      });
      let asked!: () => void;
      const policyAsked = new Promise<void>((resolve) => {
        asked = resolve;
      });
      const runtime = await compileFromText(
        JOURNAL_MODULE,
        (compiler: MossCompiler) => {
          compiler.policy((call) => {
            if (call.member !== "write") return "allow";
            asked();
            return decided;
          });
        },
        { sandbox: driver, typeCheck: "off" },
      );
      runtimes.push(runtime);
      const journal = runtime.mossInjections().journal as { written: string[] };
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  await moss.journal.write("after the end");
  return "written";
}`,
        limits: { wallTimeMs: 1_000 },
      });
      await policyAsked;
      expect(execution.error?.kind).toBe("timeout");
      release("allow");
      // The verdict's reactions run in the microtasks after it settles; a macrotask later they are all done.
      await decided;
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(journal.written).toEqual([]);
    });

    test("a host call still waiting for its journal's 'started' checkpoint when the run times out never reaches the service", async () => {
      let release: () => void = () => {};
      const stored = new Promise<void>((resolve) => {
        release = resolve;
      });
      const runtime = await compileFromText(JOURNAL_MODULE, () => {}, {
        sandbox: driver,
        typeCheck: "off",
        continuationKey: "run-end attacks continuation key, long enough",
      });
      runtimes.push(runtime);
      // A journal that stores "started" slowly: the call may start only once it has.
      let checkpoints = 0;
      runtime.onCheckpoint(() => {
        checkpoints++;
        return stored;
      });
      const journal = runtime.mossInjections().journal as { written: string[] };
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  await moss.journal.write("after the end");
  return "written";
}`,
        limits: { wallTimeMs: 1_000 },
      });
      expect(execution.error?.kind).toBe("timeout");
      expect(checkpoints).toBeGreaterThan(1);
      release();
      await stored;
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(journal.written).toEqual([]);
    });

    test("an MCP call nobody awaits is cancelled on the server when the run returns", async () => {
      const marker = path.join(scratch.folder, `cancelled-done-${driver}`);
      const typesFile = path.join(scratch.folder, `hang-done-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["hostile", "Hostile", typesFile]],
        (compiler) =>
          bindMcp(
            compiler,
            "Hostile",
            {
              command: process.execPath,
              args: [HOSTILE_MCP_SERVER, "tools"],
              publicEnv: { CANCEL_MARKER: marker },
            },
            { typesFile, timeoutMs: 10 * 60_000 },
          ),
      );
      runtimes.push(runtime);
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  moss.hostile.hang().catch(() => {});
  return await moss.hostile.ping();
}`,
      });
      expect(execution.error).toBeUndefined();
      await appears(marker);
      expect(existsSync(marker)).toBe(true);
    });
  },
);
