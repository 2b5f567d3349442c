import type { PublishedMessage } from "./published-message.ts";

/** What the app implements to receive a request's messages. */
export interface PluginPort {
  /** The server accepted the request; messages follow. */
  connectionStarted(): void;
  /** One message of the run (or an error). */
  publishMessage(message: PublishedMessage): void;
  /** The request is over: the run answered, paused for a clarification, failed, or the request was refused. */
  connectionFinished(): void;
}

/** Passes a request's messages to the app's {@link PluginPort}, each callback at most once per stage. */
export class ResponseStreamHandler {
  readonly #port: PluginPort;
  #started = false;
  #finished = false;

  constructor(port: PluginPort) {
    if (
      typeof port?.connectionStarted !== "function" ||
      typeof port.publishMessage !== "function" ||
      typeof port.connectionFinished !== "function"
    ) {
      throw new TypeError(
        "ResponseStreamHandler needs a PluginPort: an object with connectionStarted(), publishMessage(message) and connectionFinished().",
      );
    }
    this.#port = port;
  }

  /** Resets the handler for a new request. */
  begin(): void {
    this.#started = false;
    this.#finished = false;
  }

  /** Tells the port the request was accepted (once). */
  started(): void {
    if (this.#started || this.#finished) return;
    this.#started = true;
    this.#call(() => this.#port.connectionStarted());
  }

  /** Publishes one message (nothing after the end). */
  publish(message: PublishedMessage): void {
    if (this.#finished) return;
    this.#call(() => this.#port.publishMessage(message));
  }

  /** Tells the port the request is over (once). */
  finished(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#call(() => this.#port.connectionFinished());
  }

  // An app's callback that throws must not stop the stream nor skip connectionFinished.
  #call(callback: () => void): void {
    try {
      callback();
    } catch (error) {
      console.error("moss-ts/client: a PluginPort callback threw:", error);
    }
  }
}
