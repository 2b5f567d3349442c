/** A document or plugin folder that cannot be used; `message` starts with `file:line:column - ` where known. */
export class OpenApiLoadError extends Error {
  override name = "OpenApiLoadError";
}

/**
 * A response outside 2xx. Inside the sandbox it arrives as an `Error` named `HttpError` whose message is
 * `HTTP <status> <statusText>: <body>` (the body bounded), with `status`, `statusText`, `body` and `code` as fields.
 */
export class HttpError extends Error {
  /** The fields the membrane copies into the sandbox's error (plain data, bounded; see `mossErrorFields`). */
  static readonly mossErrorFields = ["status", "statusText", "body"] as const;
  override name = "HttpError";
  /** The HTTP status, e.g. 404. */
  readonly status: number;
  /** The status text, e.g. "Not Found". */
  readonly statusText: string;
  /** The response body: parsed JSON, else text; bounded. */
  readonly body: unknown;
  /** Same as `status`: the membrane carries an error's `code` into the sandbox where it can. */
  readonly code: number;

  constructor(status: number, statusText: string, body: unknown, operation: string) {
    super(`HTTP ${status} ${statusText} from ${operation}${bodySuffix(body)}`);
    this.status = status;
    this.statusText = statusText;
    this.body = body;
    this.code = status;
  }
}

function bodySuffix(body: unknown): string {
  if (body === undefined || body === "") return "";
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return `: ${text}`;
}
