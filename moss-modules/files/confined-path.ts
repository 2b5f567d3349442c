import { FilesError } from "./files-error.ts";

/** Longest path `Files` accepts, in characters. */
export const MAX_PATH_CHARACTERS = 1024;
const MAX_SEGMENT_BYTES = 255;

/** A path the model gave, checked against the rules of the working directory. */
export interface ConfinedPath {
  /** The folder names and file name, in order; empty for the working directory itself. */
  segments: readonly string[];
  /** The path as errors name it: relative to the working directory, "." for the directory itself. */
  display: string;
}

/**
 * The one rule for every path the model gives `Files`: a relative path with `/` between names, no `..`, no name
 * starting with "." (dot-folders such as `.runtime` are reserved for the host), no backslash, NUL or control
 * character. Names are taken literally (no percent-decoding); a name that Unicode compatibility normalisation would
 * turn into one starting with "." (e.g. "\u2024\u2024") is refused too, in case the file system normalises.
 */
export function confinedPath(input: unknown, options: { allowRoot?: boolean } = {}): ConfinedPath {
  if (typeof input !== "string") throw refused(String(input).slice(0, 80), "a path must be a string");
  const shown = printable(input);
  if (input.length > MAX_PATH_CHARACTERS)
    throw refused(`${shown.slice(0, 80)}…`, `a path is at most ${MAX_PATH_CHARACTERS} characters`);
  if (input.includes("\0")) throw refused(shown, "a path cannot contain a NUL character");
  if (/[\u0001-\u001f\u007f]/.test(input)) throw refused(shown, "a path cannot contain control characters");
  if (input.includes("\\")) throw refused(shown, "use a forward slash between folder names, not a backslash");
  if (input.startsWith("/") || input.startsWith("~"))
    throw refused(shown, "absolute paths are not allowed: give a path relative to the working directory");
  const segments = input === "." ? [] : input.split("/").filter((segment) => segment !== "");
  // `..` anywhere is the reason given, before a reserved name earlier in the path (`./../x` climbs out).
  if (segments.some((segment) => segment === ".." || segment.normalize("NFKC").startsWith("..")))
    throw refused(shown, '".." would lead outside the working directory');
  for (const segment of segments) {
    if (segment.startsWith(".") || segment.normalize("NFKC").startsWith("."))
      throw refused(shown, `names starting with "." are reserved (${printable(segment)})`);
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)
      throw refused(shown, `a name is at most ${MAX_SEGMENT_BYTES} bytes`);
  }
  if (segments.length === 0 && !options.allowRoot)
    throw refused(
      shown === "" ? '""' : shown,
      "give the path of a file or folder inside the working directory",
    );
  return { segments, display: segments.length === 0 ? "." : segments.join("/") };
}

function refused(path: string, reason: string): FilesError {
  return new FilesError("refused", path, `${path}: ${reason}`);
}

function printable(text: string): string {
  return text.replace(
    /[\u0000-\u001f\u007f]/g,
    (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
