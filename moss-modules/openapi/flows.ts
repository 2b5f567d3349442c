import { OpenApiLoadError } from "./errors.ts";

/** The kinds of step a flow may have (EulerCopilot `call_type`). `sql` and `render` are parsed but not run. */
export const STEP_KINDS = ["api", "llm", "choice", "extract", "sql", "render", "none"] as const;
export type StepKind = (typeof STEP_KINDS)[number];

/** One step of a flow. */
export interface FlowStep {
  name: string;
  callType: StepKind;
  params: Record<string, unknown>;
  /** The step to run next; the flow ends after `end` or when a step has no `next`. */
  next?: string;
}

/** A `flows/*.yaml` file: named steps run from `start`, `on_error` run when one fails. */
export interface FlowDefinition {
  name: string;
  description: string;
  steps: FlowStep[];
  onError?: FlowStep;
  nextFlows: string[];
  file: string;
}

/** Checks a parsed flow file: names, kinds, `start`, `next` targets, `api` endpoints, `choice` targets. */
export function parseFlow(value: unknown, file: string): FlowDefinition {
  const problem = (where: string, text: string) => new OpenApiLoadError(`${file} - ${where} ${text}`);
  if (!isRecord(value)) throw problem("flow", "must be a mapping with name, description and steps");
  if (typeof value.name !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(value.name))
    throw problem("name", `must be an identifier (letters, digits, _), got ${JSON.stringify(value.name)}`);
  if (!Array.isArray(value.steps) || value.steps.length === 0)
    throw problem("steps", "must be a non-empty list");
  const steps = value.steps.map((step, index) => parseStep(step, `steps[${index}]`, problem));
  const names = new Set<string>();
  for (const step of steps) {
    if (names.has(step.name)) throw problem(`step "${step.name}"`, "is defined twice");
    names.add(step.name);
  }
  if (!names.has("start")) throw problem("steps", 'need a step named "start"');
  for (const step of steps) {
    const targets = [step.next, ...choiceTargets(step)].filter(
      (target): target is string => target !== undefined,
    );
    for (const target of targets) {
      if (target !== "end" && !names.has(target))
        throw problem(`step "${step.name}"`, `goes to "${target}", which is not a step of this flow`);
    }
  }
  const flow: FlowDefinition = {
    name: value.name,
    description: typeof value.description === "string" ? value.description : "",
    steps,
    nextFlows: Array.isArray(value.next_flow) ? value.next_flow.map(String) : [],
    file,
  };
  if (value.on_error !== undefined)
    flow.onError = parseStep({ name: "on_error", ...asRecord(value.on_error) }, "on_error", problem);
  return flow;
}

function parseStep(
  value: unknown,
  where: string,
  problem: (where: string, text: string) => OpenApiLoadError,
): FlowStep {
  if (!isRecord(value)) throw problem(where, "must be a mapping with name, call_type and params");
  if (typeof value.name !== "string" || !value.name)
    throw problem(`${where}.name`, "must be a non-empty string");
  const callType = value.call_type;
  if (!STEP_KINDS.includes(callType as StepKind))
    throw problem(
      `${where}.call_type`,
      `must be one of ${STEP_KINDS.join(", ")} (got ${JSON.stringify(callType)})`,
    );
  const params = value.params === undefined ? {} : value.params;
  if (!isRecord(params)) throw problem(`${where}.params`, "must be a mapping");
  const step: FlowStep = { name: value.name, callType: callType as StepKind, params };
  if (value.next !== undefined) {
    if (typeof value.next !== "string") throw problem(`${where}.next`, "must be a step name");
    step.next = value.next;
  }
  if (
    step.callType === "api" &&
    (typeof params.endpoint !== "string" || !/^[A-Za-z]+ \S+$/.test(params.endpoint))
  )
    throw problem(`${where}.params.endpoint`, 'must be "METHOD /path", e.g. "GET /pets"');
  if (step.callType === "choice" && (!Array.isArray(params.choices) || params.choices.length === 0))
    throw problem(`${where}.params.choices`, "must be a non-empty list of { step, description }");
  if (step.callType === "extract" && (!Array.isArray(params.keys) || params.keys.length === 0))
    throw problem(`${where}.params.keys`, "must be a non-empty list of keys");
  return step;
}

function choiceTargets(step: FlowStep): string[] {
  if (step.callType !== "choice") return [];
  return (step.params.choices as unknown[]).map((choice) => String(asRecord(choice).step));
}

function asRecord(value: unknown): Record<string, unknown> {
  return isRecord(value) ? value : {};
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
