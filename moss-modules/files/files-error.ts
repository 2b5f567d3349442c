/** Why a `Files` call failed: a stable code the model's code can branch on. */
export type FilesErrorCode =
  | "refused"
  | "not-found"
  | "exists"
  | "too-large"
  | "not-a-file"
  | "not-a-directory"
  | "not-empty"
  | "failed";

/**
 * A `Files` call that failed. Inside the sandbox it arrives as an `Error` named `FilesError` with `code` and `relativePath`.
 * Its message names only paths relative to the working directory, never a host path.
 */
export class FilesError extends Error {
  /** The fields the membrane copies into the sandbox's error. */
  static readonly mossErrorFields = ["relativePath"] as const;
  override name = "FilesError";
  /** Why the call failed, e.g. "not-found". */
  readonly code: FilesErrorCode;
  /**
   * The path the call was given, relative to the working directory (not named `path`: the membrane treats an
   * error's `path` as a host path and removes it).
   */
  readonly relativePath: string;

  constructor(code: FilesErrorCode, path: string, message: string) {
    super(message);
    this.code = code;
    this.relativePath = path;
  }
}
