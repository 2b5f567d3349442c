import type { ConversationMessage, ToolCall } from "../model/index.ts";
import type { WindowEntry } from "./context-window.ts";

/**
 * The chat messages of a thread of the conversation, each marked for the context window: tasks (user messages
 * the person wrote) are kept longest, observations (what runs returned) are shortened first. Images go with their
 * message.
 */
export function chatMessages(thread: readonly ConversationMessage[]): WindowEntry[] {
  const entries: WindowEntry[] = [];
  for (const message of thread) {
    switch (message.role) {
      case "system":
        entries.push({ message: { role: "system", content: message.content }, kind: "turn" });
        break;
      case "user":
        entries.push({
          message:
            message.images === undefined
              ? { role: "user", content: message.content }
              : { role: "user", content: message.content, images: message.images },
          kind:
            message.metadata.kind === "task" || message.metadata.kind === undefined ? "task" : "observation",
        });
        break;
      case "assistant": {
        const toolCalls = message.metadata.toolCalls as ToolCall[] | undefined;
        entries.push({
          message:
            toolCalls !== undefined && toolCalls.length > 0
              ? { role: "assistant", content: message.content, toolCalls }
              : { role: "assistant", content: message.content },
          kind: "turn",
        });
        break;
      }
      case "tool":
        entries.push({
          message: {
            role: "tool",
            content: message.content,
            toolCallId: String(message.metadata.toolCallId),
            ...(message.images === undefined ? {} : { images: message.images }),
          },
          kind: "observation",
        });
        break;
    }
  }
  return entries;
}
