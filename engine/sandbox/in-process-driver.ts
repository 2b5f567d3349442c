import { MossError } from "../errors.ts";
import type { ExecutionLimits } from "../types.ts";
import { type IsolateSession, memoryLimitMebibytes } from "./isolate-session.ts";
import { callMembrane } from "./membrane-call.ts";
import type {
  HostMembrane,
  SandboxDriver,
  SandboxRunRequest,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "./sandbox.ts";
import { WarmIsolates } from "./warm-isolates.ts";

/**
 * Runs isolates in this process: the fastest driver, but **no crash containment** — model code that aborts V8
 * (e.g. `new Array(1e9).fill(0)`) takes this whole process down. Use the process driver for untrusted code.
 */
export class InProcessDriver implements SandboxDriver {
  readonly name = "in-process" as const;
  readonly #warm = new WarmIsolates("isolate-thread");
  readonly #sessions = new Set<InProcessSession>();
  #closed = false;

  constructor() {
    void this.#warm.prime().catch(() => {});
  }

  async open(setup: SessionSetup, membrane: HostMembrane, limits: ExecutionLimits): Promise<SandboxSession> {
    if (this.#closed) throw new MossError("sandbox-failed", "the in-process sandbox driver is closed");
    const isolate = await this.#warm.take(memoryLimitMebibytes(limits.memoryLimitBytes));
    try {
      await isolate.install(setup, {
        call: (operation, handle, member, args, line) =>
          callMembrane(membrane, operation, handle, member, args, line),
      });
    } catch (error) {
      isolate.dispose();
      throw new MossError(
        "sandbox-failed",
        `could not install the session: ${(error as Error)?.message ?? error}`,
        {},
        { cause: error },
      );
    }
    const session = new InProcessSession(isolate, () => this.#sessions.delete(session));
    this.#sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#sessions].map((session) => session.dispose()));
    await this.#warm.close();
  }
}

class InProcessSession implements SandboxSession {
  readonly #isolate: IsolateSession;
  readonly #onDispose: () => void;

  constructor(isolate: IsolateSession, onDispose: () => void) {
    this.#isolate = isolate;
    this.#onDispose = onDispose;
  }

  get alive(): boolean {
    return this.#isolate.alive;
  }

  run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    return this.#isolate.run(request);
  }

  async dispose(): Promise<void> {
    this.#isolate.dispose();
    this.#onDispose();
  }
}
