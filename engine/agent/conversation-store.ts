import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { MossError } from "../errors.ts";
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
    if (!/^[\w-][\w.-]*$/.test(sessionId)) {
      throw new MossError(
        "invalid-argument",
        `Invalid session id "${sessionId}": use letters, digits, "_", "-" and ".", not starting with ".".`,
        { sessionId },
      );
    }
    return join(this.directory, `${sessionId}.conversation.json`);
  }

  async load(sessionId: string): Promise<Conversation | undefined> {
    const path = this.path(sessionId);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new MossError(
        "context-corrupt",
        `${path}: the conversation is not valid JSON (${(error as Error).message}).`,
        {
          path,
        },
      );
    }
    return Conversation.fromJSON(json, path);
  }

  async save(sessionId: string, conversation: Conversation): Promise<void> {
    const path = this.path(sessionId);
    await mkdir(this.directory, { recursive: true });
    const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(temporary, `${JSON.stringify(conversation.toJSON(), null, 2)}\n`, "utf8");
    await rename(temporary, path);
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
