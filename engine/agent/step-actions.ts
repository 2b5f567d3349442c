import type { LanguageModelResponse, ToolCall } from "../model/index.ts";
import { MOSS_TOOL } from "./agent-prompt.ts";
import {
  type ExtractedCode,
  extractProseCode,
  extractTextToolCalls,
  extractToolCode,
  stripReasoning,
} from "./extract-code.ts";

/** One thing a step does: run the code of a tool call (or of the answer's text), or tell the model why it cannot. */
export interface StepAction {
  toolCall?: ToolCall;
  extracted: ExtractedCode;
}

const noSuchTool = (name: string): ExtractedCode => ({
  kind: "invalid",
  reason: `There is no tool named "${name}"; the only tool is "${MOSS_TOOL.name}".`,
});

/**
 * The actions of one answer: one per structured tool call; else the tool calls the model wrote as text (servers
 * without a tool parser pass them on); else the code of its prose (a fenced or bare `main`). Empty: no code at all.
 */
export function stepActions(response: Pick<LanguageModelResponse, "content" | "toolCalls">): StepAction[] {
  if (response.toolCalls.length > 0) {
    return response.toolCalls.map((toolCall) => ({
      toolCall,
      extracted:
        toolCall.name === MOSS_TOOL.name ? extractToolCode(toolCall.arguments) : noSuchTool(toolCall.name),
    }));
  }
  // Servers that do not parse tool calls pass them through as text; models also answer with fences in tool mode.
  const content = stripReasoning(response.content);
  const text = extractTextToolCalls(content);
  if (text.kind === "invalid") return [{ extracted: text }];
  if (text.kind === "calls") {
    return text.calls.map((call) => {
      if (call.name !== MOSS_TOOL.name) return { extracted: noSuchTool(call.name) };
      const extracted = extractToolCode(call.arguments);
      return { extracted: extracted.kind === "code" ? { ...extracted, source: "tool-text" } : extracted };
    });
  }
  const extracted = extractProseCode(content);
  return extracted.kind === "none" ? [] : [{ extracted }];
}
