import type { LanguageModel } from "../../engine/model/language-model.ts";
import type { ApiModel } from "./api-model.ts";
import type { FlowDefinition, FlowStep } from "./flows.ts";
import type { CallOperation } from "./open-api-service.ts";

/** What a flow runs with. */
export interface FlowRunContext {
  model: ApiModel;
  call: CallOperation;
  languageModel: LanguageModel | undefined;
}

/** Most steps one flow run takes (a `choice` can loop back). */
const MAX_STEPS = 50;
/** Longest text of a previous result put into a prompt. */
const MAX_PROMPT_DATA_CHARS = 8_000;

/**
 * Runs a flow on the host from `start` until `end` (or a step without `next`); resolves to the last step's
 * result. A failing step runs `on_error` with the error message as `{data}` when the flow has one.
 */
export async function runFlow(
  flow: FlowDefinition,
  rawArgs: unknown,
  context: FlowRunContext,
): Promise<unknown> {
  const args = (
    typeof rawArgs === "object" && rawArgs !== null && !Array.isArray(rawArgs) ? rawArgs : {}
  ) as Record<string, unknown>;
  const steps = new Map(flow.steps.map((step) => [step.name, step]));
  const history: string[] = [];
  let data: unknown;
  let current: FlowStep | undefined = steps.get("start");
  try {
    for (let count = 0; current && current.name !== "end"; count++) {
      if (count >= MAX_STEPS) throw new Error(`flow ${flow.name} took more than ${MAX_STEPS} steps`);
      const outcome = await runStep(flow, current, { data, args, history }, context);
      data = outcome.data;
      if (current.callType !== "none") history.push(`${current.name}: ${promptText(data)}`);
      const next = outcome.next ?? current.next;
      current = next === undefined ? undefined : next === "end" ? undefined : steps.get(next);
    }
    return data;
  } catch (error) {
    if (!flow.onError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    const outcome = await runStep(flow, flow.onError, { data: message, args, history }, context);
    return outcome.data;
  }
}

interface StepState {
  data: unknown;
  args: Record<string, unknown>;
  history: string[];
}

async function runStep(
  flow: FlowDefinition,
  step: FlowStep,
  state: StepState,
  context: FlowRunContext,
): Promise<{ data: unknown; next?: string }> {
  const where = `flow ${flow.name}, step ${step.name}`;
  switch (step.callType) {
    case "none":
      return { data: state.data };
    case "api": {
      const [method, route] = String(step.params.endpoint).split(" ") as [string, string];
      const operation = context.model.operations.find(
        (candidate) => candidate.method === method.toUpperCase() && candidate.path === route,
      );
      if (!operation) throw new Error(`${where}: the document has no operation ${method} ${route}`);
      const keys = new Set([...operation.parameters.map((parameter) => parameter.key), operation.body?.key]);
      const picked = Object.fromEntries(Object.entries(state.args).filter(([key]) => keys.has(key)));
      return { data: await context.call(operation.name, picked) };
    }
    case "llm": {
      const content = await ask(context, where, [
        { role: "system", content: fill(String(step.params.system_prompt ?? ""), state) },
        { role: "user", content: fill(String(step.params.user_prompt ?? "{data}"), state) },
      ]);
      return { data: content };
    }
    case "choice": {
      const choices = (step.params.choices as Array<{ step?: unknown; description?: unknown }>).map(
        (choice) => ({
          step: String(choice.step),
          description: String(choice.description ?? ""),
        }),
      );
      const prompt = [
        `Decide: ${String(step.params.instruction ?? "")}`,
        "",
        `Data:\n${promptText(state.data)}`,
        "",
        "Options:",
        ...choices.map((choice, index) => `${index + 1}. ${choice.description}`),
        "",
        "Answer with the number of the option only.",
      ].join("\n");
      const answer = await ask(context, where, [{ role: "user", content: prompt }]);
      const index = Number(/\d+/.exec(answer)?.[0]) - 1;
      const chosen = choices[index];
      if (!chosen)
        throw new Error(
          `${where}: the model's answer ${JSON.stringify(answer.slice(0, 80))} names no option`,
        );
      return { data: state.data, next: chosen.step };
    }
    case "extract": {
      const keys = (step.params.keys as unknown[]).map(String);
      const picked = Object.fromEntries(keys.map((key) => [key, pick(state.data, key)]));
      return { data: keys.length === 1 ? picked[keys[0]!] : picked };
    }
    case "sql":
    case "render":
      throw new Error(
        `${where}: call_type "${step.callType}" is not supported by moss-ts (write the step as code instead)`,
      );
  }
}

async function ask(
  context: FlowRunContext,
  where: string,
  messages: Parameters<LanguageModel["generate"]>[0]["messages"],
): Promise<string> {
  if (!context.languageModel)
    throw new Error(`${where}: this flow needs a language model, and the host gave none`);
  const response = await context.languageModel.generate({ messages, temperature: 0 });
  return response.content.trim();
}

function fill(template: string, state: StepState): string {
  const values: Record<string, string> = {
    data: promptText(state.data),
    context: state.history.join("\n"),
    question: typeof state.args.question === "string" ? state.args.question : "",
    time: new Date().toISOString(),
  };
  return template.replace(/\{(data|context|question|time)\}/g, (_, key: string) => values[key] ?? "");
}

function pick(data: unknown, key: string): unknown {
  let current = data;
  for (const part of key.split(".")) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function promptText(value: unknown): string {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? "");
  return text.length > MAX_PROMPT_DATA_CHARS ? `${text.slice(0, MAX_PROMPT_DATA_CHARS)}…` : text;
}
