import type { Conversation, ConversationStore } from "../model/index.ts";
import type { MossContext } from "../types.ts";
import type { AgentContextStore } from "./agent-types.ts";

/** Where a session is kept: nothing is saved without a `sessionId`, and each part only with its store. */
export interface SessionStores {
  sessionId?: string;
  store?: AgentContextStore;
  conversationStore?: ConversationStore;
}

/**
 * Saves the session after a step: the MossContext (when given and the session has a context store), then the
 * conversation tree (when it has a conversation store). The context goes first, so a saved conversation never
 * points past the saved context.
 */
export async function persistSession(
  stores: SessionStores,
  conversation: Conversation,
  context?: MossContext,
): Promise<void> {
  const { sessionId, store, conversationStore } = stores;
  if (sessionId === undefined) return;
  if (context !== undefined && store !== undefined) await store.save(sessionId, context);
  if (conversationStore !== undefined) await conversationStore.save(sessionId, conversation);
}
