import type { CliCommand } from "./cli-io.ts";
import { escapeControlCharacters as safe } from "./escape-control-characters.ts";
import { EXIT, isInputError, usageError } from "./exit-codes.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions } from "./parse-options.ts";
import { Terminal } from "./terminal.ts";

const USAGE = `Usage: moss test <module.ts> [--host] [--sandbox process|in-process]

Runs the module's __moss_test_cases__, each in its own runtime, and prints one line per case. The services are
the fakes the module's hidden __moss_test_setup__(compiler) binds; the production host setup (name.host.ts) runs
only with --host.
  --host                 bind the real services with the module's host setup instead of its test fakes
A case is a target name (a function of the module, usually in a // <moss-hide> region, run as the model's
code would be) or { name, target, code, expectError }. A case with expectError: "runtime" (or any
ExecutionError kind, or { kind, message: "text" | /pattern/ }) tests an error path: it passes only when the
run fails that way. Exit code: 0 when every case passed, 1 otherwise (see moss --help).`;

/** `moss test <module.ts>`: runs the module's own test cases and reports each. */
export const testCommand: CliCommand = async (argv, io) => {
  const { values, positionals } = parseOptions(
    argv,
    { sandbox: { type: "string" }, host: { type: "boolean" } },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [modulePath] = positionals;
  if (!modulePath) throw usageError("missing <module.ts>", USAGE);
  const sandbox = values.sandbox ?? "in-process";
  if (sandbox !== "process" && sandbox !== "in-process") {
    throw usageError(`--sandbox is "process" or "in-process", got "${sandbox}"`, USAGE);
  }
  const terminal = new Terminal(io);
  const colors = terminal.stdout;
  const { MossTestSuite } = await import("../agent/index.ts");
  const suite = new MossTestSuite({ compiler: { sandbox }, host: values.host === true });
  // A module that does not type-check is an unusable input (exit 4), also when it has no test cases.
  await (await loadCompiler()).checkModuleFile(modulePath);
  const cases = await suite.testCases(modulePath);
  if (cases.length === 0) {
    io.stdout.write(`${modulePath}: no __moss_test_cases__ to run\n`);
    return 0;
  }
  let stopSpinner = () => {};
  const report = await suite.runModuleTests(modulePath, {
    onStart: (testCase) => {
      stopSpinner = terminal.spin(`running ${testCase.name}`);
    },
    onResult: (result) => {
      stopSpinner();
      const execution = result.execution;
      const time = execution === undefined ? "" : ` (${Math.round(execution.durationMs)} ms)`;
      const expected =
        result.expectError === undefined ? "" : ` (expects a ${result.expectError.kind} error)`;
      const mark = result.ok ? colors.green("✓") : colors.red("✗");
      io.stdout.write(`${mark} ${safe(result.name)}${colors.gray(`${expected}${time}`)}\n`);
      if (execution?.stdout) io.stdout.write(indent(safe(execution.stdout.trimEnd())));
      if (execution?.ok && execution.returns !== undefined)
        io.stdout.write(indent(safe(`returns ${JSON.stringify(execution.returns)}`)));
      if (execution?.error) {
        const { error } = execution;
        const as = result.ok ? "failed as expected with a " : "";
        io.stdout.write(
          indent(
            safe(
              `${as}${error.kind} error: ${error.message}${error.frame && !error.message.includes(error.frame) ? `\n${error.frame}` : ""}`,
            ),
          ),
        );
      }
      if (result.failure !== undefined) io.stdout.write(indent(safe(result.failure)));
      if (result.error !== undefined) {
        io.stdout.write(
          indent(safe(result.error instanceof Error ? result.error.message : String(result.error))),
        );
      }
    },
  });
  const summary = `${report.passed} passed, ${report.failed} failed`;
  io.stdout.write(`\n${report.ok ? colors.green(summary) : colors.red(summary)} (${modulePath})\n`);
  if (report.ok) return EXIT.ok;
  // Cases that could not even compile (the module, its test setup or --host setup failed) are a bad input.
  return report.results.some((result) => isInputError(result.error)) ? EXIT.input : EXIT.failed;
};

function indent(text: string): string {
  return `${text
    .split("\n")
    .map((line) => `    ${line}`)
    .join("\n")}\n`;
}
