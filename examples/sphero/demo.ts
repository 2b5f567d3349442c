// `npm run demo`: the sphero example end to end with MossAgent. With OPENAI_BASE_URL or OPENAI_API_KEY set it
// asks that model; without them it replays recorded responses and says so on its first line.
import { fileURLToPath } from "node:url";
import type { LanguageModel } from "../../engine/agent/language-model.ts";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { EventPrinter } from "../../engine/cli/agent-command.ts";
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

const agent = new MossAgent({ model, modulePath: MODULE, maxSteps: 8 });
const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
};
const printer = new EventPrinter(io);
try {
  const result = await agent.run(TASK, { onEvent: (event) => printer.print(event) });
  process.exitCode = result.stopReason === "answer" ? 0 : 1;
} finally {
  printer.stopSpinner();
  await agent.close();
  await closeSharedSandboxes();
}
