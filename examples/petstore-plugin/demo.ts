// The pet-store plugin end to end with MossAgent: starts the store's API on 127.0.0.1, binds the plugin (the key
// stays on the host) and lets the model adopt a dog. With OPENAI_BASE_URL or OPENAI_API_KEY set it asks that model;
// without them it replays recorded responses and says so on its first line.
import { fileURLToPath } from "node:url";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { DEFAULT_OBSERVATION_LIMITS } from "../../engine/agent/observation.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { EventPrinter } from "../../engine/cli/agent-command.ts";
import type { LanguageModel } from "../../engine/model/language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { startPetStore } from "./server.ts";

export const TASK =
  "I'd like to adopt a dog that is available today. My name is Ada Lovelace. Pick one for me.";
export const MODULE = fileURLToPath(new URL("./context.ts", import.meta.url));
export const RECORDING = fileURLToPath(new URL("./recorded/adopt-a-dog.json", import.meta.url));

const live = Boolean(process.env.OPENAI_BASE_URL || process.env.OPENAI_API_KEY);
if (!live)
  process.stdout.write("No OPENAI_BASE_URL / OPENAI_API_KEY set: replaying recorded model responses.\n");
const model: LanguageModel = live
  ? new OpenAILanguageModel()
  : await ScriptedLanguageModel.fromFile(RECORDING);

process.env.PETSTORE_API_KEY ??= "demo-key-kept-on-the-host";
const store = await startPetStore(process.env.PETSTORE_API_KEY);
process.env.PETSTORE_URL = store.url;
process.stdout.write(`Task: ${TASK}\n\n`);
const agent = new MossAgent({ model, modulePath: MODULE, maxSteps: 6 });
const printer = new EventPrinter(
  {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
  },
  DEFAULT_OBSERVATION_LIMITS.maxStdoutChars,
);
try {
  const result = await agent.run(TASK, { onEvent: (event) => printer.print(event) });
  process.stdout.write(`\nOrders on the server: ${JSON.stringify(store.orders)}\n`);
  process.exitCode = result.stopReason === "answer" ? 0 : 1;
} finally {
  printer.stopSpinner();
  await agent.close();
  await store.close();
  await closeSharedSandboxes();
}
