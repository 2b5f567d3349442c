import { fencedBlocks } from "../fenced-code.ts";
import type { ToolSpec } from "../model/index.ts";

/** The agent's role, first line of every system prompt. */
export const AGENT_ROLE = [
  "You are an agent that acts by writing TypeScript. The context module below is your environment: its `Moss` class",
  "lists what you may use. Service fields of `moss` reach real systems; data fields of `moss` are your memory and",
  "persist between runs (assign to them to remember things).",
].join("\n");

/** How to act when the `moss` tool is offered. */
export const TOOL_MODE_INSTRUCTIONS = [
  'To act, call the `moss` tool with `{"code": "<TypeScript>"}`. The code must define',
  "`async function main(moss: Moss) { ... }`; it is type-checked against the module, then `main(moss)` is run.",
  "Call the tool once per step, look at the result, then decide the next step.",
].join("\n");

/** How to act when tools are off: one fenced block per answer. */
export const FENCE_MODE_INSTRUCTIONS = [
  "To act, answer with exactly one fenced ```typescript block that defines",
  "`async function main(moss: Moss) { ... }`; it is type-checked against the module, then `main(moss)` is run.",
  "Write one block per answer, look at the result, then decide the next step.",
].join("\n");

/** What the code may and may not do. */
export const CODE_RULES = [
  "Rules for the code:",
  "- Do not write `import`: every name of the module is already in scope, and `moss` is passed to `main`.",
  "- Use `console.log` or `moss.pprint` to see values; `return` a value to get it back.",
  "- To look at an image (one a service returned), pass it to `moss.show(image)`: you see it after the run.",
  "- To ask the user something, `await moss.ask(question, { choices })`: the run waits for a person's answer and",
  "  the promise resolves to it. Ask only what you cannot find out yourself.",
  "- Methods and functions marked `@approval` wait for a person's yes on every call. A denied call throws an error",
  "  named `ApprovalDenied` whose message gives the reason: do not retry it; do something else or say why you stop.",
  "- Functions and constants you defined in earlier steps are still defined.",
  "- There is no file system, network, `process` or `require`; only what `moss` and the module offer.",
].join("\n");

/** What comes back after each run. */
export const OBSERVATION_INSTRUCTIONS = [
  'After each run you get an `<execution ok="true|false">` observation with, when present: `<error>` (a runtime',
  "error with the failing line of your code), `<diagnostics>` (type errors: the code did not run at all), `<stdout>`,",
  "`<returns>` (what `main` returned) and `<warnings>`. Long sections are cut with a `[truncated N characters]` marker.",
].join("\n");

/** When and how the run ends. */
export const STOP_INSTRUCTIONS = [
  "When the task is done, or cannot be done, answer in plain text without any code: that answer ends the run and is",
  "shown to the user. Keep it short and say what was done.",
].join("\n");

/** Told to the model when its answer was cut off at the output limit and held no code that could run. */
export function cutOffNotice(maxTokens: number): string {
  return [
    `Your last answer was cut off at the output limit of ${maxTokens} tokens, so nothing ran.`,
    "Do not continue it: if you were writing code, send the whole code again, shorter; if it was your final answer,",
    "give it again in a few sentences.",
  ].join("\n");
}

/** Told to the model (once per run) when an answer held no code and no clear final answer; `why` completes "Your answer …". */
export function unclearAnswerNotice(why: string, tools: boolean): string {
  return [
    `Your answer ${why}, so nothing ran and the task is not finished.`,
    tools
      ? 'To act, call the `moss` tool with {"code": "<TypeScript defining async function main(moss: Moss)>"}.'
      : "To act, answer with one fenced ```typescript block defining `async function main(moss: Moss) { ... }`.",
    "If the task is done or cannot be done, answer in plain text, without code, saying what was done.",
  ].join("\n");
}

/** Heading of the module section. */
export const MODULE_HEADING = "# The context module";

/** The `moss` tool offered to the model in tool mode. */
export const MOSS_TOOL: ToolSpec = Object.freeze({
  name: "moss",
  description:
    "Type-check and run TypeScript against the context module. The code must define `async function main(moss: Moss)`; its stdout, return value and errors come back.",
  parameters: {
    type: "object",
    properties: {
      code: {
        type: "string",
        description:
          "TypeScript source defining `async function main(moss: Moss) { ... }`, without markdown fences.",
      },
    },
    required: ["code"],
    additionalProperties: false,
  },
});

/** Builds the system prompt: fixed instructions, optional extra instructions, then the module prompt. */
export function buildSystemPrompt(
  modulePrompt: string,
  options: { tools: boolean; instructions?: string },
): string {
  const sections = [
    AGENT_ROLE,
    options.tools ? TOOL_MODE_INSTRUCTIONS : FENCE_MODE_INSTRUCTIONS,
    CODE_RULES,
    OBSERVATION_INSTRUCTIONS,
    STOP_INSTRUCTIONS,
  ];
  if (options.instructions !== undefined && options.instructions.trim() !== "")
    sections.push(options.instructions.trim());
  sections.push(`${MODULE_HEADING}\n\n${fenceModulePrompt(modulePrompt.trim())}`);
  return sections.join("\n\n");
}

/**
 * The module prompt as markdown that never nests fences: a prompt that already holds fenced blocks (the default
 * one) is placed as it is; plain code is fenced with more backticks than any run of them inside it.
 */
export function fenceModulePrompt(modulePrompt: string): string {
  if (fencedBlocks(modulePrompt).length > 0) return modulePrompt;
  const longest = Math.max(0, ...[...modulePrompt.matchAll(/`+/g)].map((run) => run[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}typescript\n${modulePrompt}\n${fence}`;
}
