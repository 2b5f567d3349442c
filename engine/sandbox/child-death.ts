import { closeSync, openSync, readSync } from "node:fs";
import type { ExecutionLimits } from "../types.ts";
import { abortedResult, crashResult } from "./crash-result.ts";
import type { SandboxRunResult } from "./sandbox.ts";

/*
 * How a sandbox process's death is told apart: why its supervisor killed it, what V8 printed when it ran out of
 * memory, and its resident size read from outside; and the result the run in flight gets, named by its cause.
 */

/** Why a run's sandbox process was killed by its supervisor (absent: it died by itself). */
export type KillReason = "timeout" | "memory" | "disposed" | "stopped" | "aborted" | "invalid-message";

export const MEBIBYTE = 1024 * 1024;

/**
 * How much a sandbox process may grow during a run past its size when the run started, beyond twice its isolate's
 * memory limit. isolated-vm stops an isolate at its limit by an interrupt, which code inside one long V8 builtin
 * never services (`new Array(1e9).fill(0)` fills a dictionary in C++): isolated-vm then lends V8 another GiB and the
 * process grows to over 1 GiB before V8 aborts it, which takes longer than the wall-time limit under load on
 * Node 24+. Nothing a live isolate within its limit holds (heap, its young generation, array buffers, compiler
 * memory) comes near this, so a process past it is out of memory and is killed at once.
 */
export const MEMORY_SLACK_BYTES = 256 * MEBIBYTE;

/** How often the supervisor reads a running sandbox process's resident size. */
export const MEMORY_POLL_MS = 100;

/**
 * A process's resident set size in bytes (Linux `/proc/<pid>/status`); undefined where it cannot be read (other
 * systems, a process that ended). The file stays open between reads, each one a single read from its start (the
 * kernel writes the file afresh for every read at offset 0), made synchronously: the kernel reads the process's
 * memory counters without waiting on it, ~8 µs of the host's CPU, where a read through the thread pool cost ~45 µs
 * and a `readFile` per read (open, stat, read, read, close) ~260 µs; the host reads after every session open and
 * every run. The open file is the process's, not its number's: once the process ended (its number possibly
 * another's) a read fails. `close` when the process ended.
 */
export class ResidentReader {
  #file: number | null | undefined;
  #closed = false;
  readonly #buffer = Buffer.alloc(4096);

  constructor(private readonly pid: number | undefined) {}

  /** The resident size now. */
  read(): number | undefined {
    if (this.pid === undefined || this.#closed) return undefined;
    if (this.#file === undefined) {
      try {
        this.#file = openSync(`/proc/${this.pid}/status`, "r");
      } catch {
        this.#file = null;
      }
    }
    if (this.#file === null) return undefined;
    try {
      const bytesRead = readSync(this.#file, this.#buffer, 0, this.#buffer.length, 0);
      const match = /^VmRSS:\s+(\d+) kB$/m.exec(this.#buffer.toString("latin1", 0, bytesRead));
      return match === null ? undefined : Number(match[1]) * 1024;
    } catch {
      return undefined;
    }
  }

  /** Closes the file. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (typeof this.#file === "number") {
      try {
        closeSync(this.#file);
      } catch {}
    }
    this.#file = null;
  }
}

/**
 * What V8 prints when it aborts a process for lack of memory: Node's handler ("JavaScript heap out of memory",
 * "invalid table size Allocation failed") or, for an isolated-vm isolate, V8's own report ("is_heap_oom = 1").
 */
export const OUT_OF_MEMORY =
  /out of memory|heap limit|Allocation failed|is_heap_oom = 1|invalid (table|array) (size|length)/i;

/** What is known of a sandbox process that died during a run. */
export interface ChildDeath {
  /** How it ended, with the last lines of its stderr: "the sandbox process was killed by SIGKILL (…)". */
  message: string;
  /** Why its supervisor killed it, if it did. */
  killReason: KillReason | undefined;
  /** Whether its stderr says V8 aborted it for lack of memory. */
  outOfMemory: boolean;
  /** The resident size that made the memory watch kill it. */
  killedAtBytes: number;
  /** Why a message of the process was refused (kill reason "invalid-message"). */
  invalidMessage: string;
  /** Why the run was stopped from outside (kill reason "aborted": its signal aborted). */
  stopMessage: string;
}

/** The result of the run in flight when its sandbox process died: named by its cause. */
export function deathResult(limits: ExecutionLimits, death: ChildDeath): SandboxRunResult {
  const { message, killReason } = death;
  if (death.outOfMemory) {
    const result = crashResult(
      `the run ran out of memory and V8 aborted its sandbox process (${message})`,
      "RangeError",
    );
    result.error!.kind = "memory";
    return result;
  }
  if (killReason === "memory") {
    const result = crashResult(
      `the run exceeded its memory limit of ${Math.round(limits.memoryLimitBytes / MEBIBYTE)} MiB and did not stop when interrupted; its sandbox process grew to ${Math.round(death.killedAtBytes / MEBIBYTE)} MiB and was killed`,
      "RangeError",
    );
    result.error!.kind = "memory";
    return result;
  }
  if (killReason === "timeout") {
    const result = crashResult(
      `the run exceeded its time limit (wall ${limits.wallTimeMs} ms, CPU ${limits.cpuTimeMs} ms) and did not stop when interrupted; its sandbox process was killed`,
      "TimeoutError",
    );
    result.error!.kind = "timeout";
    return result;
  }
  if (killReason === "aborted") return abortedResult(death.stopMessage);
  if (killReason === "disposed") return crashResult("the sandbox session was disposed during the run");
  if (killReason === "invalid-message") {
    return crashResult(
      `the sandbox process sent a message the host refuses (${death.invalidMessage}); it was killed`,
      "SandboxCrash",
    );
  }
  return crashResult(message, "SandboxCrash");
}
