// The public shapes of the agent: its options, the runtime and stores it uses, its events and results.
import type { Container } from "../../container/index.ts";
import type { ConversationMessage, ConversationStore, LanguageModel } from "../model/index.ts";
import type { StopReason } from "../stop-reasons.ts";
import type {
  Answers,
  ExecuteRequest,
  Execution,
  ExecutionLimits,
  ImageInput,
  MossContext,
  PendingRequest,
} from "../types.ts";
import type { ContextTrim } from "./context-window.ts";
import type { CodeSource } from "./extract-code.ts";
import type { ModuleRuntimeOptions } from "./module-runtime.ts";
import type { ObservationLimits } from "./observation.ts";

/** What the agent needs of a MossRuntime (MossRuntime satisfies it). */
export interface AgentRuntime {
  execute(request: ExecuteRequest): Promise<Execution>;
  /** Continues a paused run with a person's answers (a runtime without it cannot resume a paused run). */
  resume?(
    continuation: string,
    answers: Answers,
    options?: { limits?: Partial<ExecutionLimits>; signal?: AbortSignal },
  ): Promise<Execution>;
  prompter(): { dumpModulePrompt(): Promise<string> };
  dumpContext(): MossContext;
  close(): Promise<void>;
}

/** What the agent needs of a ContextStore (FileContextStore satisfies it). */
export interface AgentContextStore {
  load(sessionId: string): Promise<MossContext | undefined>;
  save(sessionId: string, context: MossContext): Promise<unknown>;
  /** Locks the session for a run, before any code runs (a store that cannot write the session throws here). */
  acquire?(sessionId: string): Promise<void>;
  /** Unlocks the session after the run's last save. */
  release?(sessionId: string): Promise<void>;
}

/** Builds a runtime, continuing from `context` when one is given (a saved session or a retry point). */
export type CreateRuntime = (context: MossContext | undefined) => Promise<AgentRuntime>;

/** Options of {@link MossAgent}. */
export interface MossAgentOptions {
  model: LanguageModel;
  /** The context module the agent works through; compiled with a fresh MossCompiler per runtime. */
  modulePath?: string;
  /** Each compile works in a child of this container (the host's services). */
  container?: Container;
  /** Passed to every MossCompiler (type-check mode, limits, sandbox). */
  compiler?: ModuleRuntimeOptions["compiler"];
  /**
   * Run the module's `<name>.host.ts` `setup(compiler)` before each compile when it exists (default true), none
   * (false), or the setup file at this path (a config's `modules.<name>.host`).
   */
  hostSetup?: boolean | string;
  /** Builds runtimes instead of compiling `modulePath` (any object with the AgentRuntime shape). */
  createRuntime?: CreateRuntime;
  /** Persist the MossContext and the conversation under this id after every step; resume from them. */
  sessionId?: string;
  /** Where the MossContext of the session is saved (required with `sessionId` to persist the context). */
  store?: AgentContextStore;
  /** Where the conversation tree of the session is saved (required with `sessionId` to persist it). */
  conversationStore?: ConversationStore;
  /** Offer the `moss` tool (default). When false the model writes one fenced typescript block per answer. */
  tools?: boolean;
  /** Stream model text as `text-delta` events (default true). */
  stream?: boolean;
  /** Model calls per run before it stops with `max-steps`. Default {@link DEFAULT_MAX_STEPS}. */
  maxSteps?: number;
  /** Failed steps in a row before the run stops with `max-consecutive-errors`. Default {@link DEFAULT_MAX_ERRORS}. */
  maxConsecutiveErrors?: number;
  /**
   * Output tokens per model call, always sent as `max_tokens` (some servers default to unlimited output).
   * Default {@link DEFAULT_MAX_TOKENS}, at most a quarter of the context.
   */
  maxTokens?: number;
  /**
   * The model's context size in tokens; the conversation sent is shortened to fit it. Default: what the model
   * server reports (llama-server's `n_ctx`), else {@link DEFAULT_CONTEXT_TOKENS}.
   */
  contextTokens?: number;
  /** Answers cut off at `maxTokens` in a row (without code that could run) before the run stops with `truncated`. Default 2. */
  maxContinuations?: number;
  temperature?: number;
  /** Extra instructions placed between the fixed instructions and the module prompt. */
  instructions?: string;
  /** Bounds of each observation sent back to the model. */
  observation?: Partial<ObservationLimits>;
  /** Defaults merged into every execute request (e.g. `timeoutMs`, `typeCheck`). */
  execute?: Omit<ExecuteRequest, "code">;
}

/** Token and cost totals of a run. */
export interface AgentUsage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars, from the model's price table (0 for unknown models). */
  cost: number;
}

/** Events streamed while the agent runs, in order: `run-start`, then per step text/messages/code/executions, then `run-end`. */
export type AgentEvent =
  | { type: "run-start"; sessionId: string | undefined; task: string | undefined; model: string }
  | { type: "text-delta"; step: number; delta: string }
  | { type: "message"; message: ConversationMessage }
  | { type: "code"; step: number; code: string; source: CodeSource; toolCallId?: string }
  | { type: "execution"; step: number; execution: Execution; observation: string }
  | {
      /** The code paused: a host call waits for a person's yes (one event per request; the run ends `pending`). */
      type: "approval-request";
      step: number;
      request: Extract<PendingRequest, { kind: "approval" }>;
      /** The request in one line, by the engine's one describer (`describeRequest`): what a person is asked. */
      description: string;
    }
  | {
      /** The code paused: it asked a question with `moss.ask` (one event per request; the run ends `pending`). */
      type: "clarification-request";
      step: number;
      request: Extract<PendingRequest, { kind: "clarification" }>;
      /** The request in one line, by the engine's one describer (`describeRequest`). */
      description: string;
    }
  | {
      /** What was sent to the model was shortened to fit its context (the conversation itself keeps everything). */
      type: "context-trimmed";
      step: number;
      trim: ContextTrim;
      contextTokens: number;
      message: string;
    }
  | {
      /** Something the model did wrong that the agent told it about (`cut-off`, `unclear-answer`), or a retry. */
      type: "notice";
      step: number;
      kind: "cut-off" | "unclear-answer" | "context-overflow" | "pending-abandoned";
      message: string;
    }
  | { type: "error"; error: unknown; message: string }
  | {
      type: "run-end";
      stopReason: StopReason;
      /** One sentence saying why the run stopped. */
      reason: string;
      answer: string | undefined;
      steps: number;
      usage: AgentUsage;
      /** What the paused run waits for when `stopReason` is `pending`. */
      pending?: PendingRequest[];
    };

/** What a run returns once finished (the same facts as its `run-end` event). */
export interface AgentRunResult {
  stopReason: StopReason;
  /** One sentence saying why the run stopped. */
  reason: string;
  /** The model's final text when it stopped by answering without code. */
  answer: string | undefined;
  steps: number;
  usage: AgentUsage;
  /** The error that ended the run when `stopReason` is `error`. */
  error?: unknown;
  /** What the paused run waits for when `stopReason` is `pending`: answer each by id with {@link MossAgent.resume}. */
  pending?: PendingRequest[];
}

/** A task with images for vision models (file bytes or URLs); `run(task)` with a string is the same without images. */
export interface AgentTask {
  task: string;
  images?: ImageInput[];
}

/** Per-run options. */
export interface AgentRunOptions {
  signal?: AbortSignal;
  onEvent?: (event: AgentEvent) => void;
}
