import type { AgentRuntime } from "../../engine/agent/moss-agent.ts";
import type { ExecuteRequest, Execution, MossContext } from "../../engine/types.ts";

/** Replays scripted outcomes in order; each execution increments the `runs` property of its context. */
export class ScriptedRuntime implements AgentRuntime {
  readonly requests: ExecuteRequest[] = [];
  closed = 0;
  context: MossContext;
  constructor(
    readonly outcomes: Array<Partial<Execution>>,
    context?: MossContext,
  ) {
    this.context = context ?? { version: 1, module: "m.ts", properties: { runs: 0 }, executed: false };
  }
  async execute(request: ExecuteRequest): Promise<Execution> {
    this.requests.push(request);
    const outcome = this.outcomes.shift() ?? { ok: true };
    this.context = {
      ...this.context,
      properties: { runs: (this.context.properties.runs as number) + 1 },
    };
    return {
      ok: true,
      returns: undefined,
      stdout: "",
      warnings: [],
      durationMs: 1,
      calls: [],
      ...outcome,
      context: structuredClone(this.context),
    };
  }
  prompter() {
    return { dumpModulePrompt: async () => "export class Moss {}" };
  }
  dumpContext(): MossContext {
    return structuredClone(this.context);
  }
  async close(): Promise<void> {
    this.closed += 1;
  }
}
