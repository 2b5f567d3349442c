import { randomUUID } from "node:crypto";
import { MossError } from "../errors.ts";
import type { ImageContent } from "../types.ts";

/** Who wrote a message of the conversation. */
export type ConversationRole = "system" | "user" | "assistant" | "tool";

/** One node of the conversation tree; `parentId` is undefined only for roots. */
export interface ConversationMessage {
  id: string;
  parentId: string | undefined;
  role: ConversationRole;
  content: string;
  /** Free-form data: tool calls, the tool call answered, usage, the MossContext after an execution, … */
  metadata: Record<string, unknown>;
  /** Images of the message: a task's, or those the code showed with `moss.show` (bytes as base64, or a URL). */
  images?: ImageContent[];
}

/** The JSON form of a {@link Conversation}. */
export interface ConversationJson {
  version: 1;
  /** The message the conversation continues from, when it has one. */
  headId?: string;
  /** In insertion order, so children keep their order (the first child is the leftmost branch). */
  messages: Array<Omit<ConversationMessage, "parentId"> & { parentId?: string }>;
}

/**
 * A conversation kept as a tree: every message has a parent, a retry or an edit attaches a sibling branch,
 * and `head` marks the message the next turn continues from.
 */
export class Conversation {
  readonly #messages = new Map<string, ConversationMessage>();
  readonly #children = new Map<string | undefined, string[]>();
  #head: string | undefined;

  /** The message the next turn continues from (the last appended, unless moved with {@link checkout}). */
  get head(): ConversationMessage | undefined {
    return this.#head === undefined ? undefined : this.#messages.get(this.#head);
  }

  /** Number of messages in the whole tree. */
  get size(): number {
    return this.#messages.size;
  }

  /** Appends a message after the head and makes it the head. */
  append(
    role: ConversationRole,
    content: string,
    metadata: Record<string, unknown> = {},
    images?: ImageContent[],
  ): ConversationMessage {
    return this.attach(this.#head, role, content, metadata, images);
  }

  /** Attaches a message under `parentId` (undefined: a new root), a new branch when the parent has children; it becomes the head. */
  attach(
    parentId: string | undefined,
    role: ConversationRole,
    content: string,
    metadata: Record<string, unknown> = {},
    images?: ImageContent[],
  ): ConversationMessage {
    if (parentId !== undefined) this.get(parentId);
    const message: ConversationMessage = {
      id: randomUUID(),
      parentId,
      role,
      content,
      metadata,
      ...(images === undefined || images.length === 0 ? {} : { images }),
    };
    this.#insert(message);
    this.#head = message.id;
    return message;
  }

  /** Merges `metadata` into a message's metadata; a key set to undefined is removed. */
  update(id: string, metadata: Record<string, unknown>): ConversationMessage {
    const message = this.get(id);
    for (const [key, value] of Object.entries(metadata)) {
      if (value === undefined) delete message.metadata[key];
      else message.metadata[key] = value;
    }
    return message;
  }

  /** Moves the head to an existing message; the next append starts a branch there. */
  checkout(id: string | undefined): void {
    if (id !== undefined) this.get(id);
    this.#head = id;
  }

  /** The message with this id; throws a MossError naming the id when it does not exist. */
  get(id: string): ConversationMessage {
    const message = this.#messages.get(id);
    if (message === undefined) {
      throw new MossError("invalid-argument", `The conversation has no message with id "${id}".`, { id });
    }
    return message;
  }

  /** Children of a message (undefined: the roots), first (leftmost) branch first. */
  children(id: string | undefined): ConversationMessage[] {
    return (this.#children.get(id) ?? []).map((child) => this.#messages.get(child)!);
  }

  /** The path root → message (default: the head). */
  thread(id: string | undefined = this.#head): ConversationMessage[] {
    const path: ConversationMessage[] = [];
    let current = id === undefined ? undefined : this.get(id);
    while (current !== undefined) {
      path.push(current);
      current = current.parentId === undefined ? undefined : this.#messages.get(current.parentId);
    }
    return path.reverse();
  }

  /** The thread that always follows the first child, from the first root to a leaf. */
  leftmostThread(): ConversationMessage[] {
    const path: ConversationMessage[] = [];
    let next = this.children(undefined)[0];
    while (next !== undefined) {
      path.push(next);
      next = this.children(next.id)[0];
    }
    return path;
  }

  toJSON(): ConversationJson {
    return {
      version: 1,
      ...(this.#head === undefined ? {} : { headId: this.#head }),
      messages: [...this.#messages.values()].map(({ parentId, ...rest }) => ({
        ...rest,
        ...(parentId === undefined ? {} : { parentId }),
      })),
    };
  }

  /** Rebuilds a conversation from {@link toJSON}'s output; a malformed document is a MossError. */
  static fromJSON(json: unknown, source = "conversation"): Conversation {
    const document = json as Partial<ConversationJson> | null;
    if (
      document === null ||
      typeof document !== "object" ||
      document.version !== 1 ||
      !Array.isArray(document.messages)
    ) {
      throw new MossError(
        "context-invalid",
        `${source}: not a moss-ts conversation (version 1 with a messages array).`,
        {
          source,
        },
      );
    }
    const conversation = new Conversation();
    for (const [index, entry] of document.messages.entries()) {
      const valid =
        entry !== null &&
        typeof entry === "object" &&
        typeof entry.id === "string" &&
        typeof entry.content === "string" &&
        ["system", "user", "assistant", "tool"].includes(entry.role) &&
        (entry.parentId === undefined || conversation.#messages.has(entry.parentId)) &&
        (entry.images === undefined ||
          (Array.isArray(entry.images) &&
            entry.images.every((image) => typeof image?.mediaType === "string")));
      if (!valid) {
        throw new MossError(
          "context-invalid",
          `${source}: message #${index + 1} is malformed or its parent comes later.`,
          {
            source,
            index,
          },
        );
      }
      conversation.#insert({
        id: entry.id,
        parentId: entry.parentId,
        role: entry.role,
        content: entry.content,
        metadata: entry.metadata ?? {},
        ...(entry.images === undefined ? {} : { images: entry.images }),
      });
    }
    if (document.headId !== undefined) conversation.checkout(document.headId);
    return conversation;
  }

  #insert(message: ConversationMessage): void {
    this.#messages.set(message.id, message);
    const siblings = this.#children.get(message.parentId) ?? [];
    siblings.push(message.id);
    this.#children.set(message.parentId, siblings);
  }
}
