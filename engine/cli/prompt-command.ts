import { getEncoding } from "js-tiktoken";
import type { CliCommand } from "./cli-io.ts";
import { loadHostSetup } from "./host-setup.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { Terminal } from "./terminal.ts";

const USAGE = `Usage: moss prompt <module.ts> [--json]

Prints the prompt a model reads for the context module.
  --json   print { module, attributes: [{ name, module, origin, prompt }], prompt, tokens } instead`;

/** Counts tokens with a real tokenizer (o200k_base, the encoding of current OpenAI models). */
export function countTokens(text: string): number {
  return getEncoding("o200k_base").encode(text).length;
}

/** `moss prompt <module.ts> [--json]`. */
export const promptCommand: CliCommand = async (argv, io) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, USAGE);
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const runtime = await new Terminal(io).step(`loading ${modulePath}`, async () => {
    const { MossCompiler } = await loadCompiler();
    // Only prints the prompt: no run, so no type-check worker is started for it.
    const compiler = new MossCompiler({ sandbox: "in-process", typeCheck: "off" });
    await loadHostSetup(modulePath, compiler);
    return compiler.compile(modulePath);
  });
  try {
    const prompter = runtime.prompter();
    const prompt = await prompter.dumpModulePrompt();
    if (!values.json) {
      io.stdout.write(prompt);
      return 0;
    }
    const attributes = await prompter.attributeEntries();
    io.stdout.write(
      `${JSON.stringify({ module: modulePath, attributes, prompt, tokens: countTokens(prompt) }, null, 2)}\n`,
    );
    return 0;
  } finally {
    await runtime.close();
  }
};
