import { type ChildProcess, spawn } from "node:child_process";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import { MossError } from "../errors.ts";
import { runnableEntry } from "../runnable-entry.ts";
import type { ExecutionLimits } from "../types.ts";
import { crashResult } from "./crash-result.ts";
import {
  type CallReply,
  type ChildMessage,
  type HostCall,
  LineChannel,
  type ParentMessage,
} from "./line-channel.ts";
import { callMembrane, errorWire } from "./membrane-call.ts";
import type {
  HostMembrane,
  SandboxDriver,
  SandboxRunRequest,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "./sandbox.ts";

/** Options of the process driver. */
export interface ProcessDriverOptions {
  /** Sandbox processes kept running; sessions are spread over them. Default 2. */
  poolSize?: number;
  /** Extra time past a run's wall-time limit before a silent sandbox process is killed. Default 2000 ms. */
  unresponsiveGraceMs?: number;
  /** Time a sandbox process may take to start and report ready. Default 30000 ms. */
  startTimeoutMs?: number;
}

const entryFile = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./sandbox-process.ts" : "./sandbox-process.js", import.meta.url),
);
let childEntry: string | undefined;

/**
 * The sandbox process's entry as plain JavaScript. From TypeScript sources, the entry and its few imports are
 * bundled once per process with esbuild (isolated-vm kept external, pinned to the host's copy) into a
 * content-addressed file in the temp folder: starting a child then costs no TypeScript loader (≈ 0.5 s saved per
 * start or replacement) and no loader helpers leak into the function sources evaluated in the isolate.
 */
function sandboxEntry(): string {
  childEntry ??= runnableEntry(entryFile, { external: ["isolated-vm"] });
  return childEntry;
}

function childArguments(): string[] {
  return ["--no-node-snapshot", "--no-harmony-rab-gsab", sandboxEntry()];
}

interface PendingRun {
  resolve(result: SandboxRunResult): void;
  timer: NodeJS.Timeout;
}

interface ChildSession {
  membrane: HostMembrane;
  alive: boolean;
  run?: PendingRun;
  opening?: { resolve(): void; reject(error: Error): void };
}

/** One supervised sandbox process: its pipe, its sessions, and what happens when it dies. */
class SandboxChild {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly sessions = new Map<number, ChildSession>();
  readonly #channel: LineChannel<ChildMessage, ParentMessage>;
  readonly #calls: LineChannel<HostCall, CallReply>;
  #exited = false;
  #stderrTail = "";
  #nextPromiseId = 1;
  #onReady!: () => void;
  #onStartFailed!: (error: Error) => void;
  readonly #onExit: (child: SandboxChild) => void;
  readonly #graceMs: number;

  constructor(options: { graceMs: number; startTimeoutMs: number; onExit: (child: SandboxChild) => void }) {
    this.#graceMs = options.graceMs;
    this.#onExit = options.onExit;
    this.process = spawn(process.execPath, childArguments(), {
      stdio: ["ignore", "inherit", "pipe", "pipe", "pipe"],
    });
    this.ready = new Promise<void>((resolve, reject) => {
      this.#onReady = resolve;
      this.#onStartFailed = reject;
    });
    this.ready.catch(() => {});
    const startTimer = setTimeout(() => {
      this.#onStartFailed(
        new MossError(
          "sandbox-failed",
          `the sandbox process did not start within ${options.startTimeoutMs} ms`,
        ),
      );
      this.kill();
    }, options.startTimeoutMs);
    startTimer.unref();
    this.ready.then(
      () => clearTimeout(startTimer),
      () => clearTimeout(startTimer),
    );
    this.process.stderr!.setEncoding("utf8");
    this.process.stderr!.on("data", (chunk: string) => {
      this.#stderrTail = (this.#stderrTail + chunk).slice(-2000);
    });
    this.#channel = new LineChannel<ChildMessage, ParentMessage>(this.process.stdio[3] as Duplex, (message) =>
      this.#handle(message),
    );
    this.#calls = new LineChannel<HostCall, CallReply>(this.process.stdio[4] as Duplex, (call) =>
      this.#answer(call),
    );
    (this.process.stdio[3] as Duplex).on("error", () => {});
    (this.process.stdio[4] as Duplex).on("error", () => {});
    this.process.on("exit", (code, signal) => this.#exit(code, signal));
    this.process.on("error", (error) => {
      this.#onStartFailed(
        new MossError(
          "sandbox-failed",
          `could not start the sandbox process: ${error.message}`,
          {},
          { cause: error },
        ),
      );
      this.#exit(null, null);
    });
  }

  get exited(): boolean {
    return this.#exited;
  }

  send(message: ParentMessage): void {
    if (!this.#exited) this.#channel.send(message);
  }

  /** Kills the process; its sessions end with kind `crash` through the exit handler. */
  kill(): void {
    if (!this.#exited) this.process.kill("SIGKILL");
  }

  /** Asks the process to exit (its pipe closes) and waits; kills it if it lingers. */
  async stop(): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise<void>((resolve) => this.process.once("exit", () => resolve()));
    this.#channel.end();
    const timer = setTimeout(() => this.kill(), 2_000);
    await exited;
    clearTimeout(timer);
  }

  watch(session: ChildSession, limits: ExecutionLimits, resolve: (result: SandboxRunResult) => void): void {
    const timer = setTimeout(() => {
      this.#stderrTail += `\n(no answer ${limits.wallTimeMs + this.#graceMs} ms into a run)`;
      this.kill();
    }, limits.wallTimeMs + this.#graceMs);
    timer.unref();
    session.run = { resolve, timer };
  }

  #handle(message: ChildMessage): void {
    switch (message.type) {
      case "result": {
        const session = this.sessions.get(message.session);
        const run = session?.run;
        if (session === undefined || run === undefined) return;
        clearTimeout(run.timer);
        session.run = undefined;
        session.alive = session.alive && message.alive;
        if (!session.alive) this.sessions.delete(message.session);
        run.resolve(message.result);
        return;
      }
      case "opened":
        this.sessions.get(message.session)?.opening?.resolve();
        return;
      case "open-failed": {
        const session = this.sessions.get(message.session);
        this.sessions.delete(message.session);
        session?.opening?.reject(
          new MossError("sandbox-failed", `could not open a sandbox session: ${message.message}`),
        );
        return;
      }
      case "ready":
        this.#onReady();
        return;
    }
  }

  #answer(call: HostCall): void {
    const session = this.sessions.get(call.session);
    const outcome =
      session === undefined
        ? { kind: "error" as const, wire: errorWire(new Error("the session is closed")) }
        : callMembrane(session.membrane, call.operation, call.handle, call.member, call.args);
    if (outcome.kind !== "promise") {
      this.#reply(outcome);
      return;
    }
    const promiseId = this.#nextPromiseId++;
    this.#reply({ kind: "promise", promiseId });
    outcome.settled.then(
      (settled) => this.send({ type: "settle", promiseId, kind: settled.kind, wire: settled.wire }),
      (error: unknown) => this.send({ type: "settle", promiseId, kind: "error", wire: errorWire(error) }),
    );
  }

  #reply(reply: CallReply): void {
    if (!this.#exited) this.#calls.send(reply);
  }

  #exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#exited) return;
    this.#exited = true;
    const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
    const detail = this.#stderrTail.trim().split("\n").slice(-3).join(" | ");
    const message = `the sandbox process ${how}${detail === "" ? "" : ` (${detail})`}; it is being replaced`;
    this.#onStartFailed(new MossError("sandbox-failed", message));
    for (const session of this.sessions.values()) {
      session.alive = false;
      session.opening?.reject(new MossError("sandbox-failed", message));
      const run = session.run;
      if (run !== undefined) {
        clearTimeout(run.timer);
        session.run = undefined;
        run.resolve(crashResult(message, "SandboxCrash"));
      }
    }
    this.sessions.clear();
    this.#onExit(this);
  }
}

/**
 * The default driver: isolates live in a supervised warm pool of sandbox processes, so model code that aborts
 * V8 kills only a sandbox process (the run reports kind `crash`) and never the host. Host calls cross the
 * process boundary to the membrane in this process.
 */
export class ProcessDriver implements SandboxDriver {
  readonly name = "process" as const;
  readonly #poolSize: number;
  readonly #graceMs: number;
  readonly #startTimeoutMs: number;
  readonly #children: SandboxChild[] = [];
  #nextSession = 1;
  #closed = false;

  constructor(options: ProcessDriverOptions = {}) {
    this.#poolSize = Math.max(1, options.poolSize ?? 2);
    this.#graceMs = options.unresponsiveGraceMs ?? 2_000;
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
  }

  /** Process ids of the running sandbox processes (for supervision and tests). */
  get pids(): number[] {
    return this.#children.filter((child) => !child.exited).map((child) => child.process.pid!);
  }

  /** Starts the pool (done lazily by `open`); resolves when every sandbox process is ready. */
  async start(): Promise<void> {
    this.#fill();
    await Promise.all(this.#children.map((child) => child.ready));
  }

  async open(setup: SessionSetup, membrane: HostMembrane, limits: ExecutionLimits): Promise<SandboxSession> {
    if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
    this.#fill();
    const child = this.#leastBusy();
    await child.ready;
    const id = this.#nextSession++;
    const session: ChildSession = { membrane, alive: true };
    const opened = new Promise<void>((resolve, reject) => {
      session.opening = { resolve, reject };
    });
    child.sessions.set(id, session);
    child.send({ type: "open", session: id, setup, memoryLimitBytes: limits.memoryLimitBytes });
    try {
      await opened;
    } finally {
      session.opening = undefined;
    }
    return new ProcessSession(child, id, session);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#children.map((child) => child.stop()));
    this.#children.length = 0;
  }

  #fill(): void {
    while (!this.#closed && this.#children.length < this.#poolSize) {
      this.#children.push(
        new SandboxChild({
          graceMs: this.#graceMs,
          startTimeoutMs: this.#startTimeoutMs,
          onExit: (child) => {
            const index = this.#children.indexOf(child);
            if (index !== -1) this.#children.splice(index, 1);
            if (!this.#closed) this.#fill();
          },
        }),
      );
    }
  }

  #leastBusy(): SandboxChild {
    let best = this.#children[0]!;
    for (const child of this.#children) if (child.sessions.size < best.sessions.size) best = child;
    return best;
  }
}

class ProcessSession implements SandboxSession {
  readonly #child: SandboxChild;
  readonly #id: number;
  readonly #session: ChildSession;
  #disposed = false;

  constructor(child: SandboxChild, id: number, session: ChildSession) {
    this.#child = child;
    this.#id = id;
    this.#session = session;
  }

  get alive(): boolean {
    return !this.#disposed && this.#session.alive && !this.#child.exited;
  }

  run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#session.run !== undefined) {
      return Promise.reject(
        new MossError("concurrent-execute", "a run is already in progress in this sandbox session"),
      );
    }
    if (!this.alive) {
      return Promise.resolve(crashResult("the sandbox session is no longer alive"));
    }
    return new Promise<SandboxRunResult>((resolve) => {
      this.#child.watch(this.#session, request.limits, resolve);
      this.#child.send({ type: "run", session: this.#id, request });
    });
  }

  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#session.alive = false;
    if (this.#session.run === undefined) this.#child.sessions.delete(this.#id);
    this.#child.send({ type: "dispose", session: this.#id });
  }
}
