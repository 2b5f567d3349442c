import path from "node:path";
import { renderDiagnostics } from "../check/index.ts";
import { MossCompiler } from "../compiler/moss-compiler.ts";
import type { CliCommand } from "./cli-io.ts";
import { EXIT } from "./exit-codes.ts";
import { loadHostSetup } from "./host-setup.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { readCode } from "./read-code.ts";

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
  const compiler = new MossCompiler({ sandbox: "in-process" });
  await loadHostSetup(modulePath, compiler);
  const runtime = await compiler.compile(modulePath);
  try {
    const diagnostics = await runtime.typecheck(code);
    const fileName =
      values.code === "-" || !values.code
        ? "<stdin>"
        : path.relative(io.cwd, path.resolve(io.cwd, values.code as string));
    const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error").length;
    if (diagnostics.length > 0) {
      io.stdout.write(`${renderDiagnostics(diagnostics, { fileName, max: Number(values.max ?? 20) })}\n\n`);
    }
    io.stdout.write(errors > 0 ? `Found ${errors} error${errors === 1 ? "" : "s"}.\n` : "No errors.\n");
    return errors > 0 ? EXIT.failed : EXIT.ok;
  } finally {
    await runtime.close();
  }
};
