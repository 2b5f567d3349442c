// A warm process of the CLI's daemon (daemon-server.ts forks it; daemon-client.ts says what the warm path is). It
// loads what every command loads and no module does — moss-ts, TypeScript and ts-morph (from V8's code cache), the
// lib parsed and bound in a module project, a spare type-check worker with its own lib, the thread Node 20 runs
// module hooks on, isolated-vm — then waits for ONE connection. With it, it becomes the client's process: the
// client's arguments, working directory, environment and umask, its streams (frames on the socket; daemon-frames.ts)
// and its signals; it runs the command exactly as bin/moss.js would and exits, its exit code sent last.
//
// What it must not hold is anything a command's inputs decide: no module is loaded, no tsx registered (tsx reads the
// working directory's tsconfig when it registers), no settings read, no file of the user's read, before the request.
import { mkdirSync, rmSync, writeFileSync, writeSync } from "node:fs";
import nodeModule from "node:module";
import type { Socket } from "node:net";
import path from "node:path";
import { clearLine, clearScreenDown, cursorTo, moveCursor } from "node:readline";
import { Readable } from "node:stream";
import { inspect } from "node:util";
import { enableCodeCache, flushCodeCache } from "../enable-code-cache.ts";
import { privateTempFolder } from "../private-temp-folder.ts";
import {
  type DaemonRequest,
  FrameReader,
  frame,
  type TerminalFacts,
  TO_CHILD,
  TO_CLIENT,
} from "./daemon-frames.ts";

/** The connection of this process's one command, once the daemon handed it over (possibly while it warms). */
let handed: Socket | undefined;
let wake: (() => void) | undefined;

/**
 * Loads and warms everything a command shares with every other; nothing a request's inputs decide. Each step is
 * work the command would do anyway; a command handed over while it warms stops the warming between steps (it then
 * runs about as a fresh process would: what it loaded already is its head start).
 */
async function warmUp(): Promise<void> {
  enableCodeCache();
  await Promise.all([
    import("./main.ts"),
    import("./prompt-command.ts"),
    import("./check-command.ts"),
    import("./run-command.ts"),
    import("./test-command.ts"),
    import("../compiler/index.ts"),
  ]);
  // The identity of this moss-ts, which a command's kept-result key needs: the same as its client's (it names the
  // daemon's socket), so it is not walked again per command.
  const { mossCodeIdentity } = await import("./moss-package.ts");
  mossCodeIdentity();
  const { warmCheckerPool } = await import("../check/index.ts");
  // The spare waits as long as this process may wait for its command (the daemon ends it when idle).
  const spare = warmCheckerPool({ idleTimeoutMs: 24 * 60 * 60 * 1000 });
  if (handed !== undefined) return;
  await warmModuleLoaders();
  if (handed !== undefined) return;
  await warmModuleProject();
  if (handed !== undefined) return;
  try {
    const { loadIsolatedVm } = await import("../sandbox/index.ts");
    loadIsolatedVm();
    if (handed !== undefined) return;
    // The sandbox pools a command's runs use, started: a sandbox process with its warm isolate (`moss run`) and
    // the in-process pool's warm isolate (`moss test`). Nothing of a request is in them: a sandbox process reads
    // no variable beyond those Node reads at start, which name this daemon (daemon-client.ts), and its isolates
    // see nothing of the host. A command that needs neither closes them when it ends.
    const { prestartSharedSandbox } = await import("../runtime/shared-sandbox.ts");
    await Promise.all([prestartSharedSandbox("process"), prestartSharedSandbox("in-process")]);
  } catch {
    // A command that needs isolated-vm reports why it cannot load, as it would without the daemon.
  }
  await spare;
}

/**
 * The lib parsed and bound in the module project (the one without Node's types, which most modules use), from a
 * module of our own in the private temp folder; its file leaves the project again, so no command's inputs name it.
 */
async function warmModuleProject(): Promise<void> {
  const { readCheckedModule } = await import("../module/index.ts");
  const folder = path.join(privateTempFolder(), `daemon-warm-up-${process.pid}`);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  try {
    const file = path.join(folder, "context.ts");
    const source =
      'import { Moss as Parent } from "moss-ts";\nexport class Moss extends Parent {\n  turns = 0;\n}\n';
    writeFileSync(file, source);
    const { project, analysis } = readCheckedModule(file, source, "context.ts");
    project.removeSourceFile(analysis.sourceFile);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * Loads the code of tsx's loader and esbuild's service where module hooks run, without registering a hook: tsx reads
 * the working directory's tsconfig when it registers, so the command registers it (engine/compiler/load-module.ts)
 * after it entered the client's working directory, as a process of its own would. Node 20 runs hooks on a thread of
 * its own (started here by a registration whose module only imports them); newer Node runs them in this thread.
 */
async function warmModuleLoaders(): Promise<void> {
  await import("tsx/esm/api");
  const esbuild = await import("esbuild");
  // The service `moss run`'s snippets compile on (esbuild's asynchronous API, in this thread).
  await esbuild.transform("let warm: number = 1;", { loader: "ts" });
  if (typeof (nodeModule as { registerHooks?: unknown }).registerHooks === "function") {
    // In-thread hooks (tsx's and moss-ts's) compile with esbuild's synchronous API: its worker and service.
    esbuild.transformSync("let warm: number = 1;", { loader: "ts" });
    return;
  }
  // Off-thread hooks compile with esbuild's asynchronous API on that thread's service.
  const imports = [import.meta.resolve("tsx/esm"), import.meta.resolve("esbuild")];
  const source = [
    ...imports.map((url, index) => `import * as loaded${index} from ${JSON.stringify(url)};`),
    'loaded1.transform("let warm: number = 1;", { loader: "ts" }).catch(() => {});',
    "export {};",
  ].join("\n");
  nodeModule.register(`data:text/javascript,${encodeURIComponent(source)}`);
}

/** The frames of this request go out synchronously, like a pipe's writes on Linux: nothing is lost at exit. */
function writer(socket: Socket): (kind: number, payload?: Uint8Array | string) => void {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  let gone = false;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  return (kind, payload) => {
    if (gone || fd === undefined || fd < 0) return;
    let bytes = frame(kind, payload);
    while (bytes.length > 0) {
      try {
        bytes = bytes.subarray(writeSync(fd, bytes));
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") {
          Atomics.wait(pause, 0, 0, 1);
          continue;
        }
        gone = true;
        return;
      }
    }
  };
}

/** Makes `stream` write to the client as its `kind` frames, with the client's terminal facts. */
function redirect(
  stream: NodeJS.WriteStream,
  kind: number,
  facts: TerminalFacts,
  send: ReturnType<typeof writer>,
): void {
  const target = stream as unknown as Record<string, unknown>;
  target.write = (chunk: string | Uint8Array, encoding?: unknown, callback?: unknown): boolean => {
    const done = typeof encoding === "function" ? encoding : callback;
    const bytes =
      typeof chunk === "string"
        ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
        : chunk;
    send(kind, bytes);
    if (typeof done === "function") process.nextTick(done as () => void);
    return true;
  };
  const define = (name: string, value: unknown): void => {
    Object.defineProperty(stream, name, { value, configurable: true, writable: true });
  };
  define("isTTY", facts.isTTY);
  define("columns", facts.columns);
  define("rows", facts.rows);
  define("getColorDepth", () => facts.colorDepth ?? 1);
  define("hasColors", (count = 16) => count <= 2 ** (facts.colorDepth ?? 1));
  if (!facts.isTTY) return;
  define("cursorTo", (x: number, y?: number | (() => void), done?: () => void) =>
    typeof y === "function" ? cursorTo(stream, x, undefined, y) : cursorTo(stream, x, y, done),
  );
  define("moveCursor", (dx: number, dy: number, done?: () => void) => moveCursor(stream, dx, dy, done));
  define("clearLine", (direction: -1 | 0 | 1, done?: () => void) => clearLine(stream, direction, done));
  define("clearScreenDown", (done?: () => void) => clearScreenDown(stream, done));
}

/**
 * What keeps this process alive through the client's socket: the command, until `main` returns (a process of its
 * own waits for it too), and stdin while it is being read (as a real stdin does). Past both, the process ends when
 * nothing else of its own holds it, as bin/moss.js's would.
 */
class SocketHold {
  #reasons = new Set<string>();
  constructor(private readonly socket: Socket) {
    socket.unref();
  }
  set(reason: string, held: boolean): void {
    if (held) this.#reasons.add(reason);
    else this.#reasons.delete(reason);
    if (this.#reasons.size > 0) this.socket.ref();
    else this.socket.unref();
  }
}

/** The client's stdin: read only when the command reads it (the client forwards it once asked). */
class ClientStdin extends Readable {
  #asked = false;
  isRaw = false;
  constructor(
    readonly isTTY: boolean,
    private readonly hold: SocketHold,
    private readonly send: ReturnType<typeof writer>,
  ) {
    super();
  }
  override _read(): void {
    if (!this.#asked) {
      this.#asked = true;
      this.send(TO_CLIENT.wantStdin);
    }
    this.hold.set("stdin", true);
  }
  deliver(data: Buffer | null): void {
    this.push(data);
    this.hold.set("stdin", false);
  }
  setRawMode(on: boolean): this {
    this.isRaw = on;
    this.send(TO_CLIENT.rawMode, on ? "1" : "0");
    return this;
  }
}

/** Becomes the client's process for its one command. */
function serve(socket: Socket): void {
  process.disconnect?.();
  const send = writer(socket);
  const reader = new FrameReader();
  const hold = new SocketHold(socket);
  hold.set("command", true);
  let stdin: ClientStdin | undefined;
  let exited = false;
  process.on("exit", (code) => {
    exited = true;
    flushCodeCache();
    send(TO_CLIENT.exit, String(code));
  });
  // Node prints an uncaught error straight to fd 2 (not the client's): it is sent as Node would print it, unless
  // the command handles it itself.
  process.on("uncaughtExceptionMonitor", (error) => {
    if (process.listenerCount("uncaughtException") > 0) return;
    send(TO_CLIENT.stderr, `${inspect(error)}\n\nNode.js ${process.version}\n`);
  });
  socket.on("data", (chunk: Buffer) => {
    for (const { kind, payload } of reader.push(chunk)) {
      if (kind === TO_CHILD.header && stdin === undefined) {
        const request = JSON.parse(payload.toString("utf8")) as DaemonRequest;
        stdin = new ClientStdin(request.stdin.isTTY, hold, send);
        void run(request, stdin, send).finally(() => hold.set("command", false));
      } else if (kind === TO_CHILD.stdin) stdin?.deliver(Buffer.from(payload));
      else if (kind === TO_CHILD.stdinEnd) stdin?.deliver(null);
      else if (kind === TO_CHILD.signal) {
        try {
          process.kill(process.pid, payload.toString("utf8") as NodeJS.Signals);
        } catch {
          // Not a signal this platform knows: nothing to pass on.
        }
      }
    }
  });
  socket.on("error", () => {});
  socket.resume();
  // The client is gone (its terminal closed, it was killed): so is its command, as a hung-up process would be.
  socket.on("close", () => {
    if (!exited) process.kill(process.pid, "SIGHUP");
  });
}

async function run(
  request: DaemonRequest,
  stdin: ClientStdin,
  send: ReturnType<typeof writer>,
): Promise<void> {
  for (const name of Object.keys(process.env)) {
    if (!Object.hasOwn(request.env, name)) delete process.env[name];
  }
  Object.assign(process.env, request.env);
  process.umask(request.umask);
  process.argv = [process.execPath, request.script, ...request.argv];
  redirect(process.stdout, TO_CLIENT.stdout, request.stdout, send);
  redirect(process.stderr, TO_CLIENT.stderr, request.stderr, send);
  Object.defineProperty(process, "stdin", { configurable: true, enumerable: true, get: () => stdin });
  try {
    process.chdir(request.cwd);
  } catch (error) {
    process.stderr.write(`moss: cannot enter the working directory ${request.cwd}: ${String(error)}\n`);
    process.exitCode = 1;
    return;
  }
  const { main } = await import("./main.ts");
  process.exitCode = await main(request.argv);
}

process.on("message", (message: { type?: string }, handle: unknown) => {
  if (message.type !== "request" || handed !== undefined || handle === undefined) return;
  handed = handle as Socket;
  // Paused until the warming step under way ends: the command's frames wait in the socket.
  handed.pause();
  wake?.();
});
// The daemon ended (or dropped this process) before a command came: nothing to do.
process.on("disconnect", () => {
  if (handed === undefined) process.exit(0);
});
const warmUpStarted = performance.now();
await warmUp();
if (handed === undefined) {
  process.send?.({ type: "ready", warmUpMs: Math.round(performance.now() - warmUpStarted) });
  await new Promise<void>((resolve) => (wake = resolve));
}
serve(handed!);
