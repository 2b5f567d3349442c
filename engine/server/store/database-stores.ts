import { type ContextStore, validateContext } from "../../context/index.ts";
import { Conversation, type ConversationStore } from "../../model/index.ts";
import type { MossContext } from "../../types.ts";
import type { Database } from "./database.ts";

/**
 * The server's ContextStore: one row per session in `moss_contexts` (PGlite or PostgreSQL). A save replaces the
 * row in one statement, so a reader sees the old document or the new one, never a mix. The session lock of a run
 * is the run's lease (see RunQueue), not a lock of this store.
 */
export class DatabaseContextStore implements ContextStore {
  readonly #database: Database;

  constructor(database: Database) {
    this.#database = database;
  }

  async load(sessionId: string): Promise<MossContext | undefined> {
    const rows = await this.#database.query<{ document: MossContext }>(
      "SELECT document FROM moss_contexts WHERE session_id = $1",
      [sessionId],
    );
    const row = rows[0];
    return row === undefined
      ? undefined
      : validateContext(row.document, `the stored context of session "${sessionId}"`);
  }

  /** Saves the context (an invalid one is refused with MossError `context-invalid`, like the file store does). */
  async save(sessionId: string, context: MossContext): Promise<void> {
    const valid = validateContext(context);
    await this.#database.query(
      `INSERT INTO moss_contexts (session_id, document) VALUES ($1, $2)
       ON CONFLICT (session_id) DO UPDATE SET document = EXCLUDED.document, updated_at = now()`,
      [sessionId, JSON.stringify(valid)],
    );
  }

  async delete(sessionId: string): Promise<boolean> {
    const rows = await this.#database.query("DELETE FROM moss_contexts WHERE session_id = $1 RETURNING 1", [
      sessionId,
    ]);
    return rows.length > 0;
  }

  async list(): Promise<string[]> {
    const rows = await this.#database.query<{ session_id: string }>(
      'SELECT session_id FROM moss_contexts ORDER BY session_id COLLATE "C"',
    );
    return rows.map((row) => row.session_id);
  }

  /** The database belongs to whoever opened it: closing the store leaves it open. */
  async close(): Promise<void> {}
}

/** The server's ConversationStore: one row per session in `moss_conversations`. */
export class DatabaseConversationStore implements ConversationStore {
  readonly #database: Database;

  constructor(database: Database) {
    this.#database = database;
  }

  async load(sessionId: string): Promise<Conversation | undefined> {
    const rows = await this.#database.query<{ document: unknown }>(
      "SELECT document FROM moss_conversations WHERE session_id = $1",
      [sessionId],
    );
    const row = rows[0];
    return row === undefined ? undefined : Conversation.fromJSON(row.document, `conversation ${sessionId}`);
  }

  async save(sessionId: string, conversation: Conversation): Promise<void> {
    await this.#database.query(
      `INSERT INTO moss_conversations (session_id, document) VALUES ($1, $2)
       ON CONFLICT (session_id) DO UPDATE SET document = EXCLUDED.document, updated_at = now()`,
      [sessionId, JSON.stringify(conversation.toJSON())],
    );
  }
}
