import type { ExecuteRequest, ImageContent, PendingRun } from "../types.ts";
import type { AgentEvent, AgentRuntime } from "./agent-types.ts";
import { noCodeObservation, type ObservationLimits, renderObservation } from "./observation.ts";
import type { StepAction } from "./step-actions.ts";

/** What one action came to: the observation to give the model, or the pause of its code. */
export type ActionResult =
  | {
      ok: boolean;
      paused?: undefined;
      /** The observation text, its message metadata and the images the code showed. */
      observation: string;
      metadata: Record<string, unknown>;
      images?: ImageContent[];
    }
  | { ok: false; paused: PendingRun; code: string };

/** How actions run: defaults of every execute request and the bounds of each observation. */
export interface RunActionOptions {
  execute?: Omit<ExecuteRequest, "code"> | undefined;
  observation?: Partial<ObservationLimits> | undefined;
  /** The answer was cut off at this output limit: an action without code is told so. */
  cutOffAt?: number | undefined;
}

/**
 * Runs one action of a step: its code through the runtime (emitting `code` and `execution`), or, without code, the
 * observation saying why nothing ran. A paused run has no observation yet: the model sees its outcome once, whole,
 * when it resumes.
 */
export async function runAction(
  runtime: AgentRuntime,
  action: StepAction,
  step: number,
  emit: (event: AgentEvent) => void,
  options: RunActionOptions = {},
): Promise<ActionResult> {
  const { extracted, toolCall } = action;
  if (extracted.kind !== "code") {
    const why =
      options.cutOffAt !== undefined
        ? `Your answer was cut off at the output limit of ${options.cutOffAt} tokens before this call was complete.`
        : extracted.kind === "invalid"
          ? extracted.reason
          : "No code was found.";
    return {
      ok: false,
      observation: noCodeObservation(why),
      metadata: { kind: "observation", ok: false, errorKind: "no-code", context: runtime.dumpContext() },
    };
  }
  emit({
    type: "code",
    step,
    code: extracted.code,
    source: extracted.source,
    ...(toolCall === undefined ? {} : { toolCallId: toolCall.id }),
  });
  const execution = await runtime.execute({ ...options.execute, code: extracted.code });
  const observation = renderObservation(execution, options.observation);
  emit({ type: "execution", step, execution, observation });
  if (execution.pending !== undefined) return { ok: false, paused: execution.pending, code: extracted.code };
  return {
    ok: execution.ok,
    observation,
    metadata: {
      kind: "observation",
      ok: execution.ok,
      code: extracted.code,
      ...(execution.error === undefined ? {} : { errorKind: execution.error.kind }),
      context: execution.context,
    },
    ...(execution.images === undefined ? {} : { images: execution.images }),
  };
}
