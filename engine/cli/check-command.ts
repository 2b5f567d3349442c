import { startSpareCheckWorker } from "../check/check-worker-start.ts";
import { renderDiagnostics } from "../check/render-diagnostics.ts";
import type { CliCommand } from "./cli-io.ts";
import { EXIT } from "./exit-codes.ts";
import { loadHostSetup } from "./host-setup.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { readCode } from "./read-code.ts";
import { codeFileName, Terminal } from "./terminal.ts";

const USAGE = `Usage: moss check <module.ts> --code <file|->

Type-checks the code (the model's main(moss)) against the context module, like tsc; exits 1 on errors.
  --code <file|->   the code to check; - reads stdin
  --max <n>         show at most n diagnostics (default 20)`;

/** `moss check <module.ts> --code <file|->`. */
export const checkCommand: CliCommand = async (argv, io) => {
  const { values, positionals } = parseOptions(
    argv,
    { code: { type: "string" }, max: { type: "string" } },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const code = await readCode(values.code as string | undefined, io.stdin, USAGE);
  // TypeScript loads in the checker's worker while this thread loads the module.
  void startSpareCheckWorker().catch(() => {});
  const terminal = new Terminal(io);
  const runtime = await terminal.step(`loading ${modulePath}`, async () => {
    const { MossCompiler } = await loadCompiler();
    const compiler = new MossCompiler({ sandbox: "in-process" });
    await loadHostSetup(modulePath, compiler);
    return compiler.compile(modulePath);
  });
  try {
    const diagnostics = await terminal.step("type-checking", () => runtime.typecheck(code));
    const fileName = codeFileName(values.code as string | undefined, io.cwd);
    const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error").length;
    if (diagnostics.length > 0) {
      const text = renderDiagnostics(diagnostics, { fileName, max: Number(values.max ?? 20) });
      io.stdout.write(`${terminal.diagnostics(text)}\n\n`);
    }
    io.stdout.write(
      errors > 0
        ? `${terminal.stdout.red(`Found ${errors} error${errors === 1 ? "" : "s"}.`)}\n`
        : `${terminal.stdout.green("No errors.")}\n`,
    );
    return errors > 0 ? EXIT.failed : EXIT.ok;
  } finally {
    await runtime.close();
  }
};
