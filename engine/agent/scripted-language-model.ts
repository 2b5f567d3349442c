import { MossError } from "../errors.ts";
import type {
  FinishReason,
  LanguageModel,
  LanguageModelRequest,
  LanguageModelResponse,
  ToolCall,
} from "../model/index.ts";
import { readJsonFile } from "../read-json-file.ts";

/** One recorded answer; every field is optional so a recording can be as short as `{ "content": "done" }`. */
export interface ScriptedResponse {
  content?: string;
  /** `arguments` may be written as an object; it is sent to the agent as JSON text, like a real model. */
  toolCalls?: Array<{ id?: string; name: string; arguments: string | Record<string, unknown> }>;
  inputTokens?: number;
  outputTokens?: number;
  cost?: number;
  model?: string;
  finishReason?: FinishReason;
}

/** A recorded run on disk: either a bare array of responses or this object. */
export interface ScriptedRecording {
  model?: string;
  description?: string;
  responses: ScriptedResponse[];
}

/** A {@link LanguageModel} that replays recorded responses in order and records every request it was sent. */
export class ScriptedLanguageModel implements LanguageModel {
  readonly model: string;
  /** Every request received, in order (copies of the messages, so later mutation does not show). */
  readonly requests: LanguageModelRequest[] = [];
  readonly #responses: ScriptedResponse[];
  readonly #source: string;

  constructor(responses: ScriptedResponse[], options: { model?: string; source?: string } = {}) {
    this.#responses = [...responses];
    this.model = options.model ?? "scripted";
    this.#source = options.source ?? "the script";
  }

  /** Loads a recording (`ScriptedRecording` or a bare array of responses) from a JSON file. */
  static async fromFile(path: string): Promise<ScriptedLanguageModel> {
    const parsed = await readJsonFile(
      path,
      ({ error }) =>
        new MossError(
          "invalid-argument",
          `Cannot read the recorded model responses ${path}: ${error.message}`,
          { path },
          { cause: error },
        ),
    );
    const recording: ScriptedRecording = Array.isArray(parsed)
      ? { responses: parsed as ScriptedResponse[] }
      : (parsed as ScriptedRecording);
    if (recording === null || typeof recording !== "object" || !Array.isArray(recording.responses)) {
      throw new MossError(
        "invalid-argument",
        `${path}: a recording is a JSON array of responses or an object with a "responses" array.`,
        { path },
      );
    }
    return new ScriptedLanguageModel(recording.responses, {
      ...(recording.model === undefined ? {} : { model: recording.model }),
      source: path,
    });
  }

  /** How many recorded responses have not been replayed yet. */
  get remaining(): number {
    return this.#responses.length - this.requests.length;
  }

  async generate(request: LanguageModelRequest): Promise<LanguageModelResponse> {
    return this.#next(request);
  }

  async stream(
    request: LanguageModelRequest,
    onTextDelta: (delta: string) => void,
  ): Promise<LanguageModelResponse> {
    const response = this.#next(request);
    for (const piece of response.content.match(/\S+\s*|\s+/g) ?? []) onTextDelta(piece);
    return response;
  }

  #next(request: LanguageModelRequest): LanguageModelResponse {
    request.signal?.throwIfAborted();
    const index = this.requests.length;
    this.requests.push({ ...request, messages: structuredClone(request.messages) });
    const recorded = this.#responses[index];
    if (recorded === undefined) {
      throw new MossError(
        "model-request",
        `ScriptedLanguageModel: ${this.#source} has ${this.#responses.length} recorded response(s); request #${index + 1} has none.`,
        { requestIndex: index, recorded: this.#responses.length },
      );
    }
    const toolCalls: ToolCall[] = (recorded.toolCalls ?? []).map((call, callIndex) => ({
      id: call.id ?? `call_${index + 1}_${callIndex + 1}`,
      name: call.name,
      arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
    }));
    return {
      content: recorded.content ?? "",
      toolCalls,
      inputTokens: recorded.inputTokens ?? 0,
      outputTokens: recorded.outputTokens ?? 0,
      cost: recorded.cost ?? 0,
      model: recorded.model ?? this.model,
      finishReason: recorded.finishReason ?? (toolCalls.length > 0 ? "tool-calls" : "stop"),
    };
  }
}
