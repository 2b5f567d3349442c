import { join, resolve } from "node:path";
import type { AgentEvent, AgentRunResult, LanguageModel } from "../agent/index.ts";
import { MossError } from "../errors.ts";
import { describeRequest, truncateMiddle } from "../format-value.ts";
import { imageFromFile } from "../image-content.ts";
import { STOP_REASONS, type StopReason } from "../stop-reasons.ts";
import type { PendingRequest } from "../types.ts";
import {
  answerRequests,
  answersTemplate,
  DENIED_BY_FLAG,
  PersonPrompt,
  readAnswersFile,
} from "./answer-requests.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { ConfigSettings } from "./config-settings.ts";
import { escapeControlCharacters as safe } from "./escape-control-characters.ts";
import { EXIT, isInputError, usageError } from "./exit-codes.ts";
import { loadCompiler } from "./load-compiler.ts";
import { parseOptions } from "./parse-options.ts";
import { oneOf } from "./read-code.ts";
import { settingOptions, settingsUsage } from "./settings.ts";
import { Terminal } from "./terminal.ts";

/** The exit code of each stop reason (the table of every command is in exit-codes.ts). */
export const EXIT_CODES: Readonly<Record<StopReason, number>> = Object.freeze({
  answer: EXIT.ok,
  error: EXIT.failed,
  aborted: EXIT.failed,
  "max-steps": EXIT.stopped,
  "max-consecutive-errors": EXIT.stopped,
  truncated: EXIT.truncated,
  "unclear-answer": EXIT.unclear,
  pending: EXIT.paused,
});

const STOP_REASON_HELP = (Object.keys(STOP_REASONS) as StopReason[])
  .map((reason) => `  ${`${reason} (${EXIT_CODES[reason]})`.padEnd(28)}${STOP_REASONS[reason]}`)
  .join("\n");

const USAGE = `Usage: moss agent <module.ts> "<task>" [options]
       moss agent <module.ts> --session <id> --resume [--answers <file.json>] [--approve all|none]

Lets a model do the task by writing code against the context module, streaming what happens.
  --session <id>          keep the session's MossContext and conversation in .moss/sessions and resume it
  --sessions-dir <dir>    where sessions live (default .moss/sessions)
  --image <file>          attach an image (png, jpeg, gif, webp) to the task for a vision model; repeatable
  --replay <file.json>    use recorded model responses instead of a server
  --working-directory <dir>  bind a Files service (moss-ts/files) confined to <dir> for a module that declares one
${settingsUsage("agent")}
Calls marked @approval wait for a person, and so does moss.ask(question): the run pauses. On a terminal you are
asked (approve or deny with a reason; pick a choice or type an answer) and the run goes on. Otherwise:
  --approve all|none      answer every approval without asking (none denies, with "${DENIED_BY_FLAG}")
  --answers <file|->      answers by request id: {"<id>": {"approved": true} | {"approved": false, "reason": "…"}
                          | {"answer": "…"}}; consulted at every pause
  --resume                continue the session's paused run (needs --session; takes no task)
  --config <file>         settings file (default ./moss.config.yaml when it exists): model, agent, store.dataDir (the
                          sessions live in <dataDir>/sessions), modules.<module.ts>.config (bound as "moss.config")
                          and .host (the host setup file); flags and environment variables win over it
  --print-config          print every setting in effect with where it came from, and exit (takes no task)
A question no one answers leaves the run paused (exit ${EXIT.paused}); the session keeps it for --resume. Paused runs are
signed with $MOSS_CONTINUATION_KEY, else a key kept in <sessions-dir>/continuation.key.
The run stops for one of these reasons, printed on its last line (exit code in parentheses):
${STOP_REASON_HELP}`;

/** The flags of `moss agent`'s settings (settings.ts), `--config` and `--print-config`. */
const AGENT_SETTING_OPTIONS = settingOptions("agent");

/** `moss agent <module.ts> "<task>"`: runs a MossAgent, printing model text, code and results as they happen. */
export const agentCommand: CliCommand = async (argv, io) => {
  const { values, positionals } = parseOptions(
    argv,
    {
      ...AGENT_SETTING_OPTIONS,
      session: { type: "string" },
      "sessions-dir": { type: "string" },
      replay: { type: "string" },
      image: { type: "string", multiple: true },
      approve: { type: "string" },
      answers: { type: "string" },
      resume: { type: "boolean" },
      "working-directory": { type: "string" },
    },
    USAGE,
  );
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [modulePath, ...taskWords] = positionals;
  const task = taskWords.join(" ").trim();
  const resuming = values.resume === true;
  const printing = values["print-config"] === true;
  if (printing) {
    if (!modulePath) throw usageError("missing <module.ts>", USAGE);
  } else if (resuming) {
    if (!modulePath) throw usageError("missing <module.ts>", USAGE);
    if (values.session === undefined) throw usageError("--resume needs --session <id>", USAGE);
    if (task !== "") throw usageError("--resume continues the paused run and takes no task", USAGE);
    if (values.image !== undefined) throw usageError("--image goes with a task, not with --resume", USAGE);
  } else if (!modulePath || task === "") {
    throw usageError(`missing <module.ts> or "<task>"`, USAGE);
  }
  // moss.config.yaml (the same file `moss serve` reads): a setting's flag wins, then its environment variable.
  const config = await (await import("./moss-config.ts")).loadMossConfig({
    cwd: io.cwd,
    modulePath: modulePath!,
    ...(values.config === undefined ? {} : { file: values.config }),
  });
  const settings = new ConfigSettings(config, values, io.env, USAGE, "agent");
  const modelName = settings.get<string>("model.name");
  const baseUrl = settings.get<string>("model.baseUrl");
  const maxTokens = settings.get<number>("model.maxTokens");
  const contextTokens = settings.get<number>("model.contextTokens");
  const maxSteps = settings.get<number>("agent.maxSteps")!;
  const maxErrors = settings.get<number>("agent.maxErrors")!;
  const tools = settings.get<boolean>("agent.tools")!;
  const dataDir = settings.get<string>("store.dataDir")!;
  const sessionsDirectory = resolve(io.cwd, values["sessions-dir"] ?? join(dataDir, "sessions"));
  settings.show("sessionsDir", {
    value: sessionsDirectory,
    source: values["sessions-dir"] === undefined ? "store.dataDir" : "--sessions-dir",
  });
  settings.showModule(modulePath!);
  if (printing) {
    io.stdout.write(`${settings.render()}\n`);
    return EXIT.ok;
  }
  const approve =
    values.approve === undefined
      ? undefined
      : oneOf(USAGE, "approve", values.approve, ["all", "none"] as const, "all");
  const fileAnswers =
    values.answers === undefined ? undefined : await readAnswersFile(values.answers, io.cwd, io.stdin);
  // Loaded only now: `moss agent --help` and usage errors need none of the agent, openai or the runtime.
  const [
    {
      MossAgent,
      OpenAILanguageModel,
      ScriptedLanguageModel,
      FileConversationStore,
      DEFAULT_OBSERVATION_LIMITS,
    },
    { FileContextStore },
    { sessionContinuationKey },
  ] = await Promise.all([
    import("../agent/index.ts"),
    import("../context/index.ts"),
    import("./continuation-key.ts"),
  ]);
  // A module that does not type-check is an unusable input (exit 4), before any model is asked.
  await (await loadCompiler()).checkModuleFile(modulePath!);
  const model: LanguageModel = values.replay
    ? await ScriptedLanguageModel.fromFile(resolve(io.cwd, values.replay))
    : new OpenAILanguageModel({
        env: io.env,
        ...(modelName === undefined ? {} : { model: String(modelName) }),
        ...(baseUrl === undefined ? {} : { baseUrl: String(baseUrl) }),
      });
  const store = values.session === undefined ? undefined : new FileContextStore(sessionsDirectory);
  const continuationKey =
    values.session === undefined ? undefined : await sessionContinuationKey(sessionsDirectory, io.env);
  const container = await agentContainer(
    values["working-directory"] === undefined ? undefined : resolve(io.cwd, values["working-directory"]),
    config.moduleConfig(),
  );
  const hostSetup = config.hostSetup();
  const agent = new MossAgent({
    model,
    modulePath: resolve(io.cwd, modulePath!),
    ...(container === undefined ? {} : { container }),
    ...(continuationKey === undefined ? {} : { compiler: { continuationKey } }),
    ...(hostSetup === undefined ? {} : { hostSetup: String(hostSetup.value) }),
    tools,
    maxSteps,
    maxConsecutiveErrors: maxErrors,
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(contextTokens === undefined ? {} : { contextTokens }),
    ...(values.session === undefined || store === undefined
      ? {}
      : {
          sessionId: values.session,
          store,
          conversationStore: new FileConversationStore(sessionsDirectory),
        }),
  });
  const printer = new EventPrinter(io, DEFAULT_OBSERVATION_LIMITS.maxStdoutChars);
  const interactive = (io.stdin as { isTTY?: boolean }).isTTY === true;
  const person = interactive ? new PersonPrompt(io.stdin, io.stderr) : undefined;
  const sources = {
    ...(fileAnswers === undefined ? {} : { file: fileAnswers }),
    ...(approve === undefined ? {} : { approve }),
    ...(person === undefined ? {} : { person }),
  };
  const onEvent = (event: AgentEvent) => printer.print(event);
  try {
    let requests: PendingRequest[] | undefined;
    if (resuming) {
      requests = await agent.pending();
      if (requests === undefined) {
        throw new MossError(
          "invalid-argument",
          `Session "${values.session}" has no paused run to resume (in ${sessionsDirectory}).`,
          { sessionId: values.session },
        );
      }
      for (const request of requests) printer.request(request);
    } else {
      const images = await Promise.all(
        (values.image ?? []).map((file) => imageFromFile(resolve(io.cwd, file))),
      );
      const result = await agent.run({ task, images }, { onEvent });
      if (result.stopReason !== "pending") return runExitCode(result);
      requests = result.pending ?? [];
    }
    while (true) {
      const { answers, unanswered, mismatched } = await answerRequests(requests, sources);
      if (mismatched.length > 0) {
        printer.mismatched(mismatched.map((entry) => entry.reason));
        printer.unanswered(requests, values.session, modulePath!);
        return EXIT.input;
      }
      if (unanswered.length > 0) {
        printer.unanswered(unanswered, values.session, modulePath!);
        return EXIT.paused;
      }
      const result = await agent.resume(answers, { onEvent });
      if (result.stopReason !== "pending") return runExitCode(result);
      requests = result.pending ?? [];
    }
  } finally {
    person?.close();
    printer.stopSpinner();
    await agent.close();
    await store?.close();
  }
};

/** The exit code of a finished run: its stop reason's, but {@link EXIT.input} when the module or its setup failed. */
function runExitCode(result: AgentRunResult): number {
  if (result.stopReason === "error" && isInputError(result.error)) return EXIT.input;
  return EXIT_CODES[result.stopReason];
}

/** Renders agent events for a terminal: colour and a spinner only where {@link Terminal} allows them. */
export class EventPrinter {
  readonly #io: CliIo;
  readonly #terminal: Terminal;
  /** A paused run's stdout is shown cut as the observation cuts it (the agent's `maxStdoutChars`). */
  readonly #maxStdoutChars: number;
  #stopSpinner: (() => void) | undefined;
  #atLineStart = true;
  #started = false;

  constructor(io: CliIo, maxStdoutChars: number) {
    this.#io = io;
    this.#maxStdoutChars = maxStdoutChars;
    this.#terminal = new Terminal(io);
  }

  print(event: AgentEvent): void {
    switch (event.type) {
      case "run-start":
        // A resume after the person answered is the same run to them: the header is printed once.
        if (!this.#started) {
          this.#line(
            this.#paint(
              "dim",
              `moss agent · model ${event.model}${event.sessionId ? ` · session ${event.sessionId}` : ""}`,
            ),
          );
        }
        this.#started = true;
        this.#startSpinner();
        break;
      case "text-delta":
        this.stopSpinner();
        this.#write(safe(event.delta));
        break;
      case "message":
        if (event.message.role === "assistant") {
          this.stopSpinner();
          if (!this.#atLineStart) this.#write("\n");
        }
        if (
          event.message.role === "tool" ||
          (event.message.role === "user" && event.message.metadata.kind === "observation")
        ) {
          this.#startSpinner();
        }
        break;
      case "code":
        this.#line(this.#paint("cyan", `── code · step ${event.step} ──`));
        this.#line(safe(event.code));
        break;
      case "execution": {
        const status = event.execution.ok
          ? this.#paint("green", "ok")
          : event.execution.pending !== undefined
            ? this.#paint("yellow", "paused")
            : this.#paint("red", `failed (${event.execution.error?.kind})`);
        this.#line(
          `${this.#paint("cyan", "── result ·")} ${status} ${this.#paint("dim", `· ${Math.round(event.execution.durationMs)} ms`)}`,
        );
        // A paused run shows what it printed so far; its requests follow, one by one.
        const shown =
          event.execution.pending === undefined
            ? event.observation.split("\n").filter((line) => !/^<\/?execution/.test(line))
            : event.execution.stdout === ""
              ? []
              : [
                  "<stdout>",
                  truncateMiddle(event.execution.stdout.replace(/\n$/, ""), this.#maxStdoutChars),
                  "</stdout>",
                ];
        if (shown.length > 0) this.#line(safe(shown.join("\n")));
        break;
      }
      case "approval-request":
      case "clarification-request":
        this.request(event.request);
        break;
      case "notice":
        this.stopSpinner();
        this.#line(this.#paint("yellow", `── ${event.kind} · step ${event.step} ──`));
        this.#line(safe(event.message));
        break;
      case "context-trimmed":
        this.#line(this.#paint("dim", `── context · ${event.message} ──`));
        break;
      case "error":
        this.stopSpinner();
        // The error starts on its own line, also after a partial answer streamed to stdout.
        if (!this.#atLineStart) this.#write("\n");
        this.#io.stderr.write(
          `${this.#paint("red", `error${MossError.is(event.error) ? `[${event.error.code}]` : ""}:`)} ${safe(event.message)}\n`,
        );
        break;
      case "run-end": {
        this.stopSpinner();
        const { usage } = event;
        const cost = usage.cost > 0 ? ` · $${usage.cost.toFixed(4)}` : " · cost unknown";
        this.#line(
          this.#paint(
            "dim",
            `── ${event.stopReason}: ${safe(firstLine(event.reason))} · ${event.steps} step(s) · ${usage.inputTokens} input + ${usage.outputTokens} output tokens${cost} ──`,
          ),
        );
        break;
      }
    }
  }

  /** Shows what a paused run waits for: the call or question, and the code around its line. */
  request(request: PendingRequest): void {
    this.stopSpinner();
    const title = request.kind === "approval" ? "approval" : "question";
    this.#line(this.#paint("yellow", `── ${title} · ${safe(describeRequest(request))} ──`));
    if (request.code !== undefined && request.code !== "") this.#line(safe(request.code));
  }

  /** Says which requests no one answered and how to resume the session with their answers. */
  unanswered(requests: PendingRequest[], sessionId: string | undefined, modulePath: string): void {
    this.#line(this.#paint("yellow", `── paused: ${requests.length} request(s) wait for an answer ──`));
    for (const request of requests) this.#line(`  ${safe(describeRequest(request))}`);
    if (sessionId === undefined) {
      this.#line("The run cannot be resumed later: it has no --session. Run it again with --session <id>.");
      return;
    }
    // Each answer names the request it answers: it cannot approve another call that later takes the same id.
    this.#line(
      `Write the answers to a file, e.g. ${safe(JSON.stringify(answersTemplate(requests)))} (deny with {"approved": false, "reason": "…"}), then run:`,
    );
    this.#line(`  moss agent ${modulePath} --session ${sessionId} --resume --answers <file.json>`);
  }

  /** Says that nothing ran because answers were given for other requests than those now waiting. */
  mismatched(reasons: string[]): void {
    this.#line(
      this.#paint(
        "red",
        "── nothing ran: an answer was given for another request than the one now waiting ──",
      ),
    );
    for (const reason of reasons) this.#line(`  ${reason}`);
  }

  stopSpinner(): void {
    this.#stopSpinner?.();
    this.#stopSpinner = undefined;
  }

  #startSpinner(): void {
    this.#stopSpinner ??= this.#terminal.spin("thinking…");
  }

  #line(text: string): void {
    if (!this.#atLineStart) this.#write("\n");
    this.#write(`${text}\n`);
  }

  #write(text: string): void {
    if (text === "") return;
    this.#io.stdout.write(text);
    this.#atLineStart = text.endsWith("\n");
  }

  #paint(style: "dim" | "cyan" | "green" | "red" | "yellow", text: string): string {
    return this.#terminal.stdout[style](text);
  }
}

function firstLine(text: string): string {
  const line = text.split("\n")[0] ?? "";
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** A container holding a `Files` service confined to `directory` (what `--working-directory` binds). */
/**
 * The container every compile of `moss agent` works in: the module's merged `config` section under `"moss.config"`
 * (as `moss serve` binds it), and a Files service confined to `--working-directory` when given.
 */
async function agentContainer(directory: string | undefined, moduleConfig: Record<string, unknown>) {
  const { Container } = await import("../../container/index.ts");
  const container = new Container({ name: "moss-agent" }).bind("moss.config", moduleConfig);
  if (directory === undefined) return container;
  const { Files } = await import("../../moss-modules/files/index.ts");
  let files: InstanceType<typeof Files>;
  try {
    files = new Files(directory);
  } catch (error) {
    throw new MossError("invalid-argument", `--working-directory: ${(error as Error).message}`, {
      directory,
    });
  }
  return container.bind(Files, files);
}
