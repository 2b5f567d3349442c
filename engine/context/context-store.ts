import type { MossContext } from "../types.ts";

/** Where MossContexts live between turns, keyed by session id. */
export interface ContextStore {
  /** The saved context of a session, or `undefined` when there is none. */
  load(sessionId: string): Promise<MossContext | undefined>;
  /** Saves a session's context, replacing the previous one. */
  save(sessionId: string, context: MossContext): Promise<unknown>;
  /** Deletes a session's context; resolves whether there was one. */
  delete(sessionId: string): Promise<boolean>;
  /** The ids of the saved sessions, sorted. */
  list(): Promise<string[]>;
  /** Releases what the store holds (locks, connections). */
  close(): Promise<void>;
}
