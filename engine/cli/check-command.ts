import { startSpareCheckWorker } from "../check/check-worker-start.ts";
import { ensureModuleSurface } from "../module-surface.ts";
import { renderDiagnostics } from "../render-diagnostics.ts";
import type { Diagnostic } from "../types.ts";
import { checkCacheKey, readCachedCheckResult, writeCachedCheck } from "./check-result-cache.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { EXIT } from "./exit-codes.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { readCode } from "./read-code.ts";
import { replayWarnings, trackReads } from "./read-tracker.ts";
import { codeFileName, Terminal } from "./terminal.ts";

const USAGE = `Usage: moss check <module.ts> --code <file|->

Type-checks the code (the model's main(moss)) against the context module, like tsc; exits 1 on errors.
  --code <file|->   the code to check; - reads stdin
  --max <n>         show at most n diagnostics (default 20)
  --no-cache        check again even if these inputs were checked before (results are kept in a private temp folder)`;

/** `moss check <module.ts> --code <file|->`. */
export const checkCommand: CliCommand = async (argv, io) => {
  // From the sources, moss-ts's declarations may be emitted now: before the check's start, so its result is kept.
  ensureModuleSurface();
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
  const cached = cacheKey === undefined ? undefined : await readCachedCheckResult(cacheKey);
  if (cached !== undefined) {
    replayWarnings(cached.warnings);
    return report(cached.result);
  }
  // TypeScript loads in the checker's worker while this thread loads the module.
  void startSpareCheckWorker().catch(() => {});
  const { MossCompiler, hostSetupFile, loadHostSetup } = await loadCompiler();
  const { moduleProjectFiles } = await import("../module/index.ts");
  // Everything the host setup file, the module and their imports read is tracked: the kept result holds while
  // each of those inputs is unchanged (the host setup's code runs again whenever one changed).
  const { value: runtime, tracked } = await trackReads(() =>
    terminal.step(`loading ${modulePath}`, async () => {
      const compiler = new MossCompiler({ sandbox: "in-process" });
      await loadHostSetup(modulePath, compiler);
      return compiler.compile(modulePath);
    }),
  );
  try {
    const diagnostics = await terminal.step("type-checking", () => runtime.typecheck(code));
    if (cacheKey !== undefined && !tracked.printed) {
      const reads = new Map(tracked.reads);
      for (const file of [...moduleProjectFiles(), hostSetupFile(modulePath)]) {
        if (!reads.has(file)) reads.set(file, "content");
      }
      await writeCachedCheck(cacheKey, reads, startedAtMs, diagnostics, tracked.warnings);
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
