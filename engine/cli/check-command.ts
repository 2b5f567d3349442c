import { startSpareCheckWorker } from "../check/check-worker-start.ts";
import { renderDiagnostics } from "../check/render-diagnostics.ts";
import type { Diagnostic } from "../types.ts";
import { checkCacheKey, readCachedCheck, writeCachedCheck } from "./check-result-cache.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { EXIT } from "./exit-codes.ts";
import { hostSetupFile, loadHostSetup } from "./host-setup.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { readCode } from "./read-code.ts";
import { codeFileName, Terminal } from "./terminal.ts";

const USAGE = `Usage: moss check <module.ts> --code <file|->

Type-checks the code (the model's main(moss)) against the context module, like tsc; exits 1 on errors.
  --code <file|->   the code to check; - reads stdin
  --max <n>         show at most n diagnostics (default 20)
  --no-cache        check again even if these files were checked before (results are kept in a private temp folder)`;

/** `moss check <module.ts> --code <file|->`. */
export const checkCommand: CliCommand = async (argv, io) => {
  const startedAtMs = Date.now();
  const { values, positionals } = parseOptions(
    argv,
    { code: { type: "string" }, max: { type: "string" }, "no-cache": { type: "boolean" } },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const code = await readCode(values.code as string | undefined, io.stdin, USAGE);
  const terminal = new Terminal(io);
  const report = (diagnostics: Diagnostic[]): number =>
    reportDiagnostics(diagnostics, terminal, io, values.code as string | undefined, Number(values.max ?? 20));
  const cacheKey = values["no-cache"] === true ? undefined : checkCacheKey(modulePath, code, io.cwd, io.env);
  const cached = cacheKey === undefined ? undefined : await readCachedCheck(cacheKey);
  if (cached !== undefined) return report(cached);
  // TypeScript loads in the checker's worker while this thread loads the module.
  void startSpareCheckWorker().catch(() => {});
  const { runtime, setupFile, moduleProjectFiles } = await terminal.step(
    `loading ${modulePath}`,
    async () => {
      const { MossCompiler, moduleProjectFiles } = await loadCompiler();
      const compiler = new MossCompiler({ sandbox: "in-process" });
      const setupFile = await loadHostSetup(modulePath, compiler);
      return { runtime: await compiler.compile(modulePath), setupFile, moduleProjectFiles };
    },
  );
  try {
    const diagnostics = await terminal.step("type-checking", () => runtime.typecheck(code));
    // A host setup file runs code of its own choosing before the check: its results are not kept.
    if (cacheKey !== undefined && setupFile === undefined) {
      const files = [...moduleProjectFiles(), hostSetupFile(modulePath)];
      await writeCachedCheck(cacheKey, files, startedAtMs, diagnostics);
    }
    return report(diagnostics);
  } finally {
    await runtime.close();
  }
};

/** Prints the diagnostics as tsc would and returns the exit code. */
function reportDiagnostics(
  diagnostics: Diagnostic[],
  terminal: Terminal,
  io: CliIo,
  code: string | undefined,
  max: number,
): number {
  const fileName = codeFileName(code, io.cwd);
  const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error").length;
  if (diagnostics.length > 0) {
    const text = renderDiagnostics(diagnostics, { fileName, max });
    io.stdout.write(`${terminal.diagnostics(text)}\n\n`);
  }
  io.stdout.write(
    errors > 0
      ? `${terminal.stdout.red(`Found ${errors} error${errors === 1 ? "" : "s"}.`)}\n`
      : `${terminal.stdout.green("No errors.")}\n`,
  );
  return errors > 0 ? EXIT.failed : EXIT.ok;
}
