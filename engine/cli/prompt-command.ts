import type { AttributeEntry } from "../prompter/index.ts";
import type { CliCommand } from "./cli-io.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { replayWarnings, trackReads } from "./read-tracker.ts";
import { readCachedResult, resultCacheKey, writeCachedResult } from "./result-cache.ts";
import { Terminal } from "./terminal.ts";

const USAGE = `Usage: moss prompt <module.ts> [--json]

Prints the prompt a model reads for the context module.
  --json       print { module, attributes: [{ name, module, origin, prompt }], prompt, tokens } instead
  --no-cache   reflect the module again even if these inputs were reflected before (prompts are kept in a
               private temp folder)`;

/** What `moss prompt` prints, kept between runs. */
interface PromptResult {
  prompt: string;
  attributes: AttributeEntry[];
}

/** `moss prompt <module.ts> [--json] [--no-cache]`. */
export const promptCommand: CliCommand = async (argv, io) => {
  const startedAtMs = Date.now();
  const { values, positionals } = parseOptions(
    argv,
    { json: { type: "boolean" }, "no-cache": { type: "boolean" } },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const cacheKey =
    values["no-cache"] === true ? undefined : resultCacheKey("prompt", modulePath, null, io.cwd, io.env);
  const cached = cacheKey === undefined ? undefined : await readCachedResult<PromptResult>(cacheKey);
  let result: PromptResult;
  if (cached !== undefined) {
    replayWarnings(cached.warnings);
    result = cached.result;
  } else {
    const { MossCompiler, hostSetupFile, loadHostSetup } = await loadCompiler();
    const { moduleProjectFiles } = await import("../module/index.ts");
    // The host setup, the module's hooks and the prompt's own hooks are tracked: the kept prompt holds while every
    // input they read is unchanged.
    const { value, tracked } = await trackReads(async () => {
      const runtime = await new Terminal(io).step(`loading ${modulePath}`, async () => {
        // Only prints the prompt: no run, so no type-check worker is started for it.
        const compiler = new MossCompiler({ sandbox: "in-process", typeCheck: "off" });
        await loadHostSetup(modulePath, compiler);
        return compiler.compile(modulePath);
      });
      try {
        const prompter = runtime.prompter();
        const prompt = await prompter.dumpModulePrompt();
        return { prompt, attributes: await prompter.attributeEntries() };
      } finally {
        await runtime.close();
      }
    });
    result = value;
    if (cacheKey !== undefined && !tracked.printed) {
      const reads = new Map(tracked.reads);
      for (const file of [...moduleProjectFiles(), hostSetupFile(modulePath)]) {
        if (!reads.has(file)) reads.set(file, "content");
      }
      await writeCachedResult(cacheKey, reads, startedAtMs, result, tracked.warnings);
    }
  }
  if (!values.json) {
    io.stdout.write(result.prompt);
    return 0;
  }
  const { prompt, attributes } = result;
  io.stdout.write(
    `${JSON.stringify({ module: modulePath, attributes, prompt, tokens: await countTokens(prompt) }, null, 2)}\n`,
  );
  return 0;
};

/**
 * Counts tokens as every part of moss-ts does (the agent's countTokens, o200k_base): the agent's code loads only
 * when a count is asked for (`--json`).
 */
async function countTokens(text: string): Promise<number> {
  return (await import("../agent/index.ts")).countTokens(text);
}
