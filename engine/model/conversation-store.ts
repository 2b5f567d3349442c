import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { validSessionId, writeFileAtomically } from "../context/index.ts";
import { MossError } from "../errors.ts";
import { readJsonFile } from "../read-json-file.ts";
import { Conversation } from "./conversation.ts";

/** Where an agent keeps the conversation tree of each session, next to the session's MossContext. */
export interface ConversationStore {
  /** The saved conversation, or undefined when the session has none yet. */
  load(sessionId: string): Promise<Conversation | undefined>;
  save(sessionId: string, conversation: Conversation): Promise<void>;
}

/**
 * Conversations as JSON files `<directory>/<sessionId>.conversation.json`, written atomically (temporary
 * file, then rename). Pointed at the directory of a `FileContextStore`, each session's conversation is a
 * sibling of its context file.
 */
export class FileConversationStore implements ConversationStore {
  readonly directory: string;

  constructor(directory: string) {
    this.directory = directory;
  }

  /** The file a session's conversation lives in. */
  path(sessionId: string): string {
    validSessionId(sessionId);
    return join(this.directory, `${sessionId}.conversation.json`);
  }

  async load(sessionId: string): Promise<Conversation | undefined> {
    const path = this.path(sessionId);
    const json = await readJsonFile(path, (problem) => {
      if (problem.kind === "invalid") {
        return new MossError(
          "context-corrupt",
          `${path}: the conversation is not valid JSON (${problem.error.message}).`,
          { path },
        );
      }
      // ENOTDIR: a folder on the path is a file, so the file cannot exist either.
      const code = problem.error.code;
      return code === "ENOENT" || code === "ENOTDIR" ? undefined : problem.error;
    });
    if (json === undefined) return undefined;
    return Conversation.fromJSON(json, path);
  }

  async save(sessionId: string, conversation: Conversation): Promise<void> {
    const path = this.path(sessionId);
    await mkdir(this.directory, { recursive: true });
    await writeFileAtomically(path, `${JSON.stringify(conversation.toJSON(), null, 2)}\n`);
  }
}

/** Keeps conversations in memory (tests, one-process sessions). */
export class MemoryConversationStore implements ConversationStore {
  readonly #conversations = new Map<string, unknown>();

  async load(sessionId: string): Promise<Conversation | undefined> {
    const json = this.#conversations.get(sessionId);
    return json === undefined ? undefined : Conversation.fromJSON(structuredClone(json));
  }

  async save(sessionId: string, conversation: Conversation): Promise<void> {
    this.#conversations.set(sessionId, structuredClone(conversation.toJSON()));
  }
}
