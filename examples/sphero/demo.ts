// `npm run demo`: the sphero example end to end with MossAgent. With OPENAI_BASE_URL or OPENAI_API_KEY set it
// asks that model (MOSS_MODEL, MOSS_MAX_TOKENS and MOSS_CONTEXT_TOKENS apply as for `moss agent`); without them it
// replays recorded responses and says so on its first line. The exit code is `moss agent`'s for the same stop reason.
import { fileURLToPath } from "node:url";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { DEFAULT_OBSERVATION_LIMITS } from "../../engine/agent/observation.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { EventPrinter, EXIT_CODES } from "../../engine/cli/agent-command.ts";
import type { LanguageModel } from "../../engine/model/language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

const TASK = "Roll the ball in a square, then show a smile on its face, and remember the square as a shape.";
const MODULE = fileURLToPath(new URL("./context.ts", import.meta.url));
const RECORDING = fileURLToPath(new URL("./recorded/square-and-smile.json", import.meta.url));

const live = Boolean(process.env.OPENAI_BASE_URL || process.env.OPENAI_API_KEY);
if (!live) {
  process.stdout.write(
    "No OPENAI_BASE_URL / OPENAI_API_KEY set: replaying recorded model responses (examples/sphero/recorded/square-and-smile.json).\n",
  );
}
const model: LanguageModel = live
  ? new OpenAILanguageModel()
  : await ScriptedLanguageModel.fromFile(RECORDING);
process.stdout.write(`Task: ${TASK}\n\n`);

const positive = (name: string): number | undefined => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : undefined;
};
const maxTokens = positive("MOSS_MAX_TOKENS");
const contextTokens = positive("MOSS_CONTEXT_TOKENS");
const agent = new MossAgent({
  model,
  modulePath: MODULE,
  maxSteps: 8,
  ...(maxTokens === undefined ? {} : { maxTokens }),
  ...(contextTokens === undefined ? {} : { contextTokens }),
});
const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
};
const printer = new EventPrinter(io, DEFAULT_OBSERVATION_LIMITS.maxStdoutChars);
try {
  const result = await agent.run(TASK, { onEvent: (event) => printer.print(event) });
  process.exitCode = EXIT_CODES[result.stopReason];
} finally {
  printer.stopSpinner();
  await agent.close();
  await closeSharedSandboxes();
}
