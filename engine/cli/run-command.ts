import { inspect } from "node:util";
import { describeRequest } from "../agent/observation.ts";
import { renderDiagnostics } from "../check/render-diagnostics.ts";
import { readContextFile, writeContextFile } from "../context/index.ts";
import type { Execution } from "../types.ts";
import { answerRequests, PersonPrompt, readAnswersFile } from "./answer-requests.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { EXIT, usageError } from "./exit-codes.ts";
import { loadHostSetup } from "./host-setup.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { oneOf, readCode } from "./read-code.ts";
import { codeFileName, colourEnabled, Terminal } from "./terminal.ts";

const USAGE = `Usage: moss run <module.ts> --code <file|-> [--context <file>]

Runs code (the model's main(moss)) against the context module in the sandbox.
  --code <file|->          the code to run; - reads stdin
  --context <file>         a MossContext JSON file: read before (if present), written after the run
  --target <name>          the function to call (default main)
  --type-check <mode>      strict (default) | warn | off
  --sandbox <kind>         process (default) | in-process
  --approve <all|none>     answer every call marked @approval (or asked by a policy) without asking
  --answers <file|->       answers to the run's requests, a JSON object of request id -> answer
  --json                   print the Execution as JSON

When the code calls something marked @approval, or moss.ask(question), the run pauses: on a terminal you are
asked; otherwise the answers come from --approve/--answers, and a run left waiting exits with code 7.`;

/** `moss run <module.ts> --code <file|-> [--context <file>]`. */
export const runCommand: CliCommand = async (argv, io) => {
  const { values, positionals } = parseOptions(
    argv,
    {
      code: { type: "string" },
      context: { type: "string" },
      target: { type: "string" },
      "type-check": { type: "string" },
      sandbox: { type: "string" },
      approve: { type: "string" },
      answers: { type: "string" },
      json: { type: "boolean" },
    },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const code = await readCode(values.code as string | undefined, io.stdin, USAGE);
  const typeCheck = oneOf(
    USAGE,
    "type-check",
    values["type-check"] as string | undefined,
    ["strict", "warn", "off"] as const,
    "strict",
  );
  const sandbox = oneOf(
    USAGE,
    "sandbox",
    values.sandbox as string | undefined,
    ["process", "in-process"] as const,
    "process",
  );
  const approve =
    values.approve === undefined
      ? undefined
      : oneOf(USAGE, "approve", values.approve as string, ["all", "none"] as const, "all");
  if (values.answers === "-" && values.code === "-") {
    throw usageError("--answers - and --code - cannot both read stdin", USAGE);
  }
  const answersFile =
    values.answers === undefined
      ? undefined
      : await readAnswersFile(values.answers as string, io.cwd, io.stdin);
  const contextFile = values.context as string | undefined;
  const saved = contextFile ? await readContextFile(contextFile) : undefined;

  const terminal = new Terminal(io);
  const runtime = await terminal.step(`loading ${modulePath}`, async () => {
    const { MossCompiler } = await import("../compiler/moss-compiler.ts");
    const compiler = new MossCompiler({ typeCheck, sandbox });
    await loadHostSetup(modulePath, compiler);
    if (saved) compiler.joinContext(saved, { source: contextFile });
    return compiler.compile(modulePath);
  });
  try {
    const target = (values.target as string | undefined) ?? "main";
    let execution = await terminal.step(`running ${target}`, () => runtime.execute({ code, target }));
    // A paused run: answered from --answers/--approve or by the person at the terminal, then resumed, until it
    // ends or nobody can answer what it waits for.
    const person =
      (io.stdin as { isTTY?: boolean }).isTTY === true && values.code !== "-"
        ? new PersonPrompt(io.stdin, io.stderr)
        : undefined;
    try {
      while (execution.pending) {
        const { requests, continuation } = execution.pending;
        const { answers, unanswered } = await answerRequests(requests, {
          ...(answersFile === undefined ? {} : { file: answersFile }),
          ...(approve === undefined ? {} : { approve }),
          ...(person === undefined ? {} : { person }),
        });
        if (unanswered.length > 0) break;
        // The resumed run prints everything again from the start: only its output is shown.
        execution = await terminal.step("resuming", () => runtime.resume(continuation, answers));
      }
    } finally {
      person?.close();
    }
    // The run's output and result come first: a context file that cannot be written must not hide them.
    if (values.json) io.stdout.write(`${JSON.stringify(execution, null, 2)}\n`);
    else printExecution(execution, io, terminal, codeFileName(values.code as string | undefined, io.cwd));
    if (contextFile) {
      await writeContextFile(contextFile, execution.context);
      if (!values.json)
        io.stderr.write(`ran in ${execution.durationMs.toFixed(1)} ms; context saved to ${contextFile}\n`);
    }
    if (execution.pending) {
      if (!values.json) {
        io.stderr.write(
          `the run paused: it waits for ${execution.pending.requests.length === 1 ? "an answer" : "answers"} no one gave\n`,
        );
        for (const request of execution.pending.requests) io.stderr.write(`  ${describeRequest(request)}\n`);
        io.stderr.write(
          "answer with --approve all|none or --answers <file> (a JSON object of request id -> answer)\n",
        );
      }
      return EXIT.paused;
    }
    return execution.ok ? EXIT.ok : EXIT.failed;
  } finally {
    await runtime.close();
  }
};

function printExecution(execution: Execution, io: CliIo, terminal: Terminal, fileName: string): void {
  const colors = terminal.stderr;
  // The code file is named as `moss check` names it (`<stdin>` or its path), never the internal snippet.ts.
  const named = (text: string) => text.replaceAll("snippet.ts:", `${fileName}:`);
  if (execution.stdout)
    io.stdout.write(execution.stdout.endsWith("\n") ? execution.stdout : `${execution.stdout}\n`);
  for (const warning of execution.warnings) io.stderr.write(`${colors.yellow("warning")}: ${warning}\n`);
  if (execution.ok) {
    if (execution.returns !== undefined) {
      io.stdout.write(
        `returned: ${inspect(execution.returns, { depth: 6, colors: colourEnabled(io.stdout, io.env) })}\n`,
      );
    }
  } else if (execution.error) {
    const error = execution.error;
    if (error.kind === "type" || (error.kind === "syntax" && error.diagnostics)) {
      const rendered = error.diagnostics
        ? renderDiagnostics(error.diagnostics, { fileName, max: 20 })
        : named(error.message);
      io.stderr.write(
        `${colors.red(`error[${error.kind}]`)}: the code does not type-check against the module, so it did not run\n${terminal.diagnostics(rendered, colors)}\n`,
      );
    } else {
      const where =
        error.line === undefined
          ? ""
          : ` at ${colors.cyan(fileName)}:${colors.yellow(String(error.line))}:${colors.yellow(String(error.column))}`;
      io.stderr.write(`${colors.red(`error[${error.kind}]`)}${where}: ${error.name}: ${error.message}\n`);
      if (error.frame) io.stderr.write(`${terminal.diagnostics(error.frame, colors)}\n`);
      const frames = error.stack?.split("\n").slice(1).join("\n");
      if (frames) io.stderr.write(`${colors.gray(named(frames))}\n`);
    }
  }
}
