/** A request the server refuses: an HTTP status, a stable code and a sentence (the API's error body). */
export class ServerError extends Error {
  override readonly name = "ServerError";
  readonly status: 400 | 401 | 404 | 408 | 409 | 413 | 429 | 431 | 500 | 503;
  readonly code: string;

  constructor(status: ServerError["status"], code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }

  /** The API's error body: `{ error: { code, message } }`. */
  toJSON(): { error: { code: string; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}
