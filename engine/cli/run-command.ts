import { randomBytes } from "node:crypto";
import path from "node:path";
import { startSpareCheckWorker } from "../check/check-worker-start.ts";
import { lockContextFile, readContextFile, writeContextFile } from "../context/index.ts";
import { MossError } from "../errors.ts";
import { describeRequest, formatValue } from "../format-value.ts";
import { renderDiagnostics } from "../render-diagnostics.ts";
import { prestartSharedSandbox } from "../runtime/shared-sandbox.ts";
import { SNIPPET_FILE } from "../snippet-file.ts";
import type { Execution } from "../types.ts";
import {
  answerRequests,
  answersTemplate,
  type MismatchedAnswer,
  PersonPrompt,
  readAnswersFile,
} from "./answer-requests.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { escapeControlCharacters } from "./escape-control-characters.ts";
import { EXIT, usageError } from "./exit-codes.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions, requireModulePath } from "./parse-options.ts";
import { pausedRunPath, readPausedRun, removePausedRun, writePausedRun } from "./paused-run-file.ts";
import { oneOf, readCode } from "./read-code.ts";
import { codeFileName, Terminal } from "./terminal.ts";

const USAGE = `Usage: moss run <module.ts> --code <file|-> [--context <file>]
       moss run <module.ts> --resume [--context <file>] [--answers <file|->] [--approve all|none]

Runs code (the model's main(moss)) against the context module in the sandbox.
  --code <file|->          the code to run; - reads stdin
  --context <file>         a MossContext JSON file: read before (if present), written after the run
  --target <name>          the function to call (default main)
  --type-check <mode>      strict (default) | warn | off
  --sandbox <kind>         process (default) | in-process
  --approve <all|none>     answer every call marked @approval (or asked by a policy) without asking
  --answers <file|->       answers to the run's requests, a JSON object of request id -> answer
  --resume                 resume the run this module (and --context) left paused; takes no --code
  --json                   print the Execution as JSON

When the code calls something marked @approval, or moss.ask(question), the run pauses: on a terminal you are
asked; otherwise the answers come from --approve/--answers. A run left waiting is kept (beside the --context file,
else in .moss/runs/) and exits with code 7; --resume, or the same command again, resumes it: calls that completed
before the pause do not run again. An answer may name the request it answers ("member" and "args", or "question");
if the run now asks something else under that id, nothing runs.`;

/** `moss run <module.ts> --code <file|-> [--context <file>]`, or `--resume` a run it left paused. */
export const runCommand: CliCommand = async (argv, io) => {
  const releases: Array<() => Promise<void>> = [];
  try {
    return await run(argv, io, releases);
  } finally {
    for (const release of releases) await release();
  }
};

/** The run; a lock it takes is added to `releases`, released when the command ends however it ends. */
async function run(argv: string[], io: CliIo, releases: Array<() => Promise<void>>): Promise<number> {
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
      resume: { type: "boolean" },
      json: { type: "boolean" },
    },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const modulePath = requireModulePath(positionals, USAGE);
  const resuming = values.resume === true;
  if (resuming && values.code !== undefined) {
    throw usageError("--resume continues the paused run with its own code: leave out --code", USAGE);
  }
  const contextFile = values.context as string | undefined;
  const pausedFile = pausedRunPath(modulePath, contextFile, io.cwd);
  const kept = await readPausedRun(pausedFile);
  if (resuming && kept === undefined) {
    throw new MossError(
      "invalid-argument",
      `${modulePath} has no paused run to resume${contextFile === undefined ? "" : ` with --context ${contextFile}`} (looked for ${pausedFile})`,
      { file: pausedFile },
    );
  }
  const code = resuming ? kept!.code : await readCode(values.code as string | undefined, io.stdin, USAGE);
  const target = resuming ? kept!.target : ((values.target as string | undefined) ?? "main");
  // The file the code's frames name: on --resume, the one the paused run was started with.
  const codeName =
    resuming && typeof kept!.codeFile === "string"
      ? kept!.codeFile
      : resuming
        ? path.relative(io.cwd, pausedFile)
        : codeFileName(values.code as string | undefined, io.cwd);
  // The same command run again resumes the run it left paused: running it from the top would repeat every call
  // that completed before the pause.
  const resume = kept !== undefined && kept.code === code && kept.target === target ? kept : undefined;
  if (kept !== undefined && resume === undefined) {
    throw new MossError(
      "invalid-argument",
      `a paused run of ${modulePath} is kept in ${pausedFile} (paused ${kept.pausedAt}, waiting for ${kept.requests.map((request) => `#${request.id}`).join(", ")}), and this code is not the code it ran. Resume it with \`moss run ${modulePath}${contextFile === undefined ? "" : ` --context ${contextFile}`} --resume --answers <file>\`, or delete ${pausedFile} to start over.`,
      { file: pausedFile },
    );
  }
  const typeCheck = oneOf(
    USAGE,
    "type-check",
    values["type-check"] as string | undefined,
    ["strict", "warn", "off"] as const,
    "strict",
  );
  // TypeScript loads in the checker's worker while this thread loads the module.
  if (typeCheck !== "off") void startSpareCheckWorker().catch(() => {});
  const sandbox = oneOf(
    USAGE,
    "sandbox",
    values.sandbox as string | undefined,
    ["process", "in-process"] as const,
    "process",
  );
  // The sandbox process starts while this thread loads and compiles the module.
  if (sandbox === "process") prestartSharedSandbox("process");
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
  // One run at a time per context file: two runs that both read it would each save over the other's changes.
  if (contextFile) releases.push(await lockContextFile(contextFile));
  const saved = contextFile ? await readContextFile(contextFile) : resume?.context;
  // The key that signs the run's continuation: $MOSS_CONTINUATION_KEY, else a fresh one kept with the paused run
  // (so a run that never pauses writes nothing beside the module or in the working directory).
  // A kept run goes on with the key it was signed with.
  const sharedKey = nonEmpty(io.env.MOSS_CONTINUATION_KEY);
  const ownKey =
    resume !== undefined
      ? resume.key
      : sharedKey === undefined
        ? randomBytes(32).toString("base64url")
        : undefined;
  const continuationKey = ownKey ?? sharedKey;

  const terminal = new Terminal(io);
  const runtime = await terminal.step(`loading ${modulePath}`, async () => {
    const { MossCompiler, loadHostSetup } = await loadCompiler();
    const compiler = new MossCompiler({ typeCheck, sandbox, continuationKey });
    await loadHostSetup(modulePath, compiler);
    if (saved) compiler.joinContext(saved, { source: contextFile ?? pausedFile });
    return compiler.compile(modulePath);
  });
  try {
    let execution: Execution | undefined;
    let pending: Pending | undefined;
    if (resume !== undefined) {
      if (!values.json && !resuming) {
        io.stderr.write(
          `resuming the run kept in ${pausedFile} (it waited for answers): calls that completed before do not run again\n`,
        );
      }
      pending = resume;
    } else {
      execution = await terminal.step(`running ${target}`, () => runtime.execute({ code, target }));
      pending = execution.pending;
    }
    // A paused run: answered from --answers/--approve or by the person at the terminal, then resumed, until it
    // ends or nobody can answer what it waits for.
    const person =
      (io.stdin as { isTTY?: boolean }).isTTY === true && values.code !== "-" && values.answers !== "-"
        ? new PersonPrompt(io.stdin, io.stderr)
        : undefined;
    let mismatched: MismatchedAnswer[] = [];
    try {
      while (pending) {
        const answered = await answerRequests(pending.requests, {
          ...(answersFile === undefined ? {} : { file: answersFile }),
          ...(approve === undefined ? {} : { approve }),
          ...(person === undefined ? {} : { person }),
        });
        mismatched = answered.mismatched;
        if (answered.unanswered.length > 0 || mismatched.length > 0) break;
        const { continuation } = pending;
        // The resumed run prints everything again from the start: only its output is shown.
        execution = await terminal.step("resuming", () => runtime.resume(continuation, answered.answers));
        pending = execution.pending;
      }
    } catch (error) {
      if (MossError.is(error, "continuation-invalid") && resume !== undefined) {
        throw new MossError(
          "continuation-invalid",
          `${error.message}\nThe paused run kept in ${pausedFile} cannot go on: delete the file to start over.`,
          { file: pausedFile },
          { cause: error },
        );
      }
      throw error;
    } finally {
      person?.close();
    }
    // The run's output and result come first: a context file that cannot be written must not hide them.
    if (execution !== undefined) {
      if (values.json) io.stdout.write(`${JSON.stringify(execution, null, 2)}\n`);
      else printExecution(execution, io, terminal, codeName);
      if (contextFile) {
        await writeContextFile(contextFile, execution.context);
        if (!values.json)
          io.stderr.write(
            `ran in ${execution.durationMs.toFixed(1)} ms; context saved to ${escapeControlCharacters(contextFile)}\n`,
          );
      }
    }
    if (pending === undefined) {
      await removePausedRun(pausedFile);
      return execution?.ok ? EXIT.ok : EXIT.failed;
    }
    if (pending !== resume) {
      await writePausedRun(pausedFile, {
        version: 1,
        module: path.resolve(io.cwd, modulePath),
        code,
        codeFile: codeName,
        target,
        requests: pending.requests,
        continuation: pending.continuation,
        ...(ownKey === undefined ? {} : { key: ownKey }),
        pausedAt: new Date().toISOString(),
        ...(contextFile === undefined && execution !== undefined ? { context: execution.context } : {}),
      });
    }
    const resumeCommand = `moss run ${modulePath}${contextFile === undefined ? "" : ` --context ${contextFile}`} --resume --answers <file.json>`;
    if (mismatched.length > 0) {
      io.stderr.write("nothing ran: an answer was given for another request than the one now waiting\n");
      for (const { reason } of mismatched) io.stderr.write(`  ${reason}\n`);
    } else if (!values.json) {
      io.stderr.write(
        `the run paused: it waits for ${pending.requests.length === 1 ? "an answer" : "answers"} no one gave\n`,
      );
    }
    if (!values.json || mismatched.length > 0) {
      for (const request of pending.requests)
        io.stderr.write(`  ${escapeControlCharacters(describeRequest(request))}\n`);
      io.stderr.write(
        `the paused run is kept in ${pausedFile}; write the answers to a file, e.g.\n  ${escapeControlCharacters(JSON.stringify(answersTemplate(pending.requests)))}\n(deny with {"approved": false, "reason": "…"}), then run:\n  ${resumeCommand}\n(--approve all|none answers every approval)\n`,
      );
    }
    return mismatched.length > 0 ? EXIT.input : EXIT.paused;
  } finally {
    await runtime.close();
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

type Pending = Pick<NonNullable<Execution["pending"]>, "requests" | "continuation">;

function printExecution(execution: Execution, io: CliIo, terminal: Terminal, fileName: string): void {
  const colors = terminal.stderr;
  // The code file is named as `moss check` names it (`<stdin>` or its path), never the internal snippet.ts.
  const named = (text: string) => text.replaceAll(`${SNIPPET_FILE}:`, `${fileName}:`);
  // Everything below but our own colours is text the model's code controls.
  const safe = escapeControlCharacters;
  if (execution.stdout) {
    const stdout = safe(execution.stdout);
    io.stdout.write(stdout.endsWith("\n") ? stdout : `${stdout}\n`);
  }
  for (const warning of execution.warnings)
    io.stderr.write(`${colors.yellow("warning")}: ${safe(warning)}\n`);
  if (execution.ok) {
    if (execution.returns !== undefined) {
      // formatValue (inspect) escapes control characters in strings but not bidirectional overrides: escaped here.
      io.stdout.write(`returned: ${safe(formatValue(execution.returns))}\n`);
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
          : ` at ${colors.cyan(safe(fileName))}:${colors.yellow(String(error.line))}:${colors.yellow(String(error.column))}`;
      io.stderr.write(
        `${colors.red(`error[${error.kind}]`)}${where}: ${safe(error.name)}: ${safe(error.message)}\n`,
      );
      if (error.frame) io.stderr.write(`${terminal.diagnostics(error.frame, colors)}\n`);
      const frames = error.stack?.split("\n").slice(1).join("\n");
      if (frames) io.stderr.write(`${colors.gray(safe(named(frames)))}\n`);
    }
  }
}
