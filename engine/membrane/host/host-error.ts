import { readdirSync, realpathSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { escapeRegExp } from "../../escape-reg-exp.ts";
import { encodeWire, measureWire } from "./host-wire.ts";

/*
 * Host error text on its way to model code. Only `{ name, message, code }` of a host error ever crosses (never its
 * stack, `cause` or `errors` list), and each of those strings is cleaned of host paths first: whatever the folder
 * names (spaces, accents, any script), a path becomes `<host path>/<base name>` so the message stays useful.
 */

/** What replaces the folder part of a removed path. */
export const HOST_PATH_MARKER = "<host path>";

const hostRoots = new Set<string>();
let rootPattern: RegExp | undefined;

/** Adds a folder whose every occurrence in host error text is removed (the runtime adds each module's folder). */
export function addHostRoot(folder: string): void {
  if (folder.length < 2) return;
  hostRoots.add(folder);
  try {
    hostRoots.add(realpathSync(folder));
  } catch {}
  rootPattern = undefined;
}

for (const folder of [
  process.cwd(),
  homedir(),
  tmpdir(),
  path.dirname(process.execPath),
  // Where moss-ts itself is installed (node_modules/moss-ts/dist or the checkout): this file is engine/membrane/host/.
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../.."),
]) {
  addHostRoot(folder);
}

// A path segment: no separator, quote, whitespace or the punctuation that ends a path in prose (`:` ends
// `file.ts:12:5`). Segments before a separator may contain single spaces (`données privées/`).
const SEGMENT = String.raw`[^\s\\/'"\x60<>|:*?,;]+`;
const INNER_SEGMENT = `${SEGMENT}(?: ${SEGMENT})*`;
const SEPARATOR = String.raw`[\\/]`;
const TAIL = `(?:${INNER_SEGMENT}${SEPARATOR})*(?:${SEGMENT})?`;

/** Absolute (POSIX, drive, UNC, home) and relative-climb paths, not inside a word, a URL or a marker. */
const PATH_PATTERN = new RegExp(
  [
    String.raw`(?<![\w.:/\\>~-])(?:[A-Za-z]:${SEPARATOR}|\\\\|~${SEPARATOR}|\.{1,2}${SEPARATOR}|${SEPARATOR}(?=[^\s\\/]))${TAIL}`,
    // Relative paths with at least two separators (`node_modules/pkg/file.js`) reveal layout too.
    String.raw`(?<![^\s('"\x60=\[{])${SEGMENT}${SEPARATOR}${SEGMENT}${SEPARATOR}${TAIL}`,
  ].join("|"),
  "gu",
);
const FILE_URL_PATTERN = /\bfile:\/\/[^\s'"`<>]*/giu;
const QUOTED_PATTERN = new RegExp(
  String.raw`(['"\x60])((?:[A-Za-z]:${SEPARATOR}|\\\\|~${SEPARATOR}|\.{0,2}${SEPARATOR}|file:)[^'"\x60\n]*)\1`,
  "giu",
);
const STACK_FRAME_PATTERN = /^[ \t]*at [^\n]*(?:\(|:\d+:\d+)[^\n]*(?:\n|$)/gmu;

/** Entries of the file system's root, read once on first use (not at import): undefined when unreadable. */
let rootEntries: readonly string[] | null | undefined = null;
function rootListing(): readonly string[] | undefined {
  if (rootEntries === null) {
    try {
      rootEntries = readdirSync("/");
    } catch {
      rootEntries = undefined;
    }
  }
  return rootEntries;
}

/**
 * Whether a `/…` token can name a host file: only when its first folder exists at the root (`/home/…`, `/tmp/…`).
 * `/pets/{petId}` in an HTTP error is a route, not a path, and stays readable. Other shapes (drive, UNC, `~/`,
 * `../`) are always treated as host paths.
 */
export function mayBeHostPath(found: string): boolean {
  const root = rootListing();
  if (root === undefined || !/^\/(?![\\/])/.test(found)) return true;
  const first = found.slice(1).split(/[\\/]/, 1)[0] ?? "";
  return first === "" || root.includes(first);
}

function rootsPattern(): RegExp {
  if (rootPattern) return rootPattern;
  const roots = hostRootFolders().map(escapeRegExp);
  rootPattern = new RegExp(`(?:${roots.join("|")})(?:${SEPARATOR}${TAIL})?`, "gu");
  return rootPattern;
}

/**
 * The known host folders, longest first: working directory, home, temp, Node's own folder, moss-ts's install, and
 * every module folder added (each also as its real path). The one list every scrubber of host paths starts from.
 */
export function hostRootFolders(): string[] {
  return [...hostRoots].sort((a, b) => b.length - a.length);
}

/**
 * How a removed host path is shown, the one form for every text bound for the model: `<host path>/base` for a file
 * (its name keeps the message useful), the marker alone for a folder (its name is layout).
 */
export function hostPathReplacement(found: string): string {
  return replacement(found);
}

function replacement(found: string): string {
  const trimmed = found.replace(/^file:\/\/+/i, "/");
  const parts = trimmed.split(/[\\/]/);
  let base = parts[parts.length - 1] ?? "";
  try {
    base = decodeURIComponent(base);
  } catch {}
  if (base === "" || base === "." || base === ".." || base === "~" || /^[A-Za-z]:$/.test(base)) {
    return HOST_PATH_MARKER;
  }
  // A file's base name keeps the message useful; a folder's name is layout (Node 26's EISDIR names the folder).
  if (isFolder(trimmed)) return HOST_PATH_MARKER;
  return `${HOST_PATH_MARKER}/${base}`;
}

function isFolder(candidate: string): boolean {
  try {
    return (
      path.isAbsolute(candidate) && statSync(candidate, { throwIfNoEntry: false })?.isDirectory() === true
    );
  } catch {
    return false;
  }
}

/** At most this many places in one text are tried as the start of a path on the host's file system. */
const MAX_WALK_STARTS = 64;
/** At most this many folders are listed while cleaning one text. */
const MAX_WALK_LISTINGS = 256;
const STICKY_TAIL = new RegExp(TAIL, "uy");

/**
 * Paths in `text` that exist on the host, whatever characters their folder names hold (quotes, commas, tabs,
 * emoji, parentheses, several spaces: any of them ends a path token for the patterns below, and the rest of the
 * folder names would stay in the text). From each place where a known host folder, or an absolute path, starts,
 * the text is followed one real directory entry at a time; what follows the last entry that exists is taken by the
 * ordinary path pattern. Listings are bounded, so a text full of slashes costs little.
 */
function hostPathsOnDisk(text: string): string[] {
  const found: string[] = [];
  const listings = new Map<string, readonly string[]>();
  const list = (folder: string): readonly string[] => {
    let entries = listings.get(folder);
    if (entries) return entries;
    if (listings.size >= MAX_WALK_LISTINGS) return [];
    if (folder === "/") return rootListing() ?? [];
    try {
      entries = readdirSync(folder);
    } catch {
      entries = [];
    }
    listings.set(folder, entries);
    return entries;
  };
  const starts: Array<{ index: number; folder: string; length: number }> = [];
  for (const root of hostRoots) {
    for (let index = text.indexOf(root); index !== -1; index = text.indexOf(root, index + 1)) {
      starts.push({ index, folder: root, length: root.length });
    }
  }
  for (const match of text.matchAll(/(?<![\w.:/\\>~-])\//gu)) {
    starts.push({ index: match.index, folder: "/", length: 0 });
  }
  for (const start of starts.slice(0, MAX_WALK_STARTS)) {
    let end = start.index + start.length;
    let folder = start.folder;
    let walked = 0;
    while (text[end] === "/" && walked < 64) {
      let best = "";
      for (const entry of list(folder)) {
        if (entry.length > best.length && text.startsWith(entry, end + 1)) best = entry;
      }
      if (best === "") break;
      end += 1 + best.length;
      folder = path.join(folder, best);
      walked++;
    }
    if (walked === 0) continue;
    if (text[end] === "/") {
      STICKY_TAIL.lastIndex = end + 1;
      if (STICKY_TAIL.exec(text)) end = STICKY_TAIL.lastIndex;
    }
    found.push(text.slice(start.index, end));
  }
  return found;
}

/**
 * Removes host paths from text bound for model code: the exact `paths` given (a Node system error's `path` and
 * `dest`), host stack-frame lines, `file://` URLs, quoted paths, every occurrence of the known host folders (working
 * directory, home, temp, module folders, moss-ts's own install) and every absolute or climbing path token.
 */
export function redactHostPaths(
  text: string,
  paths: readonly string[] = [],
  written: readonly string[] = [],
): string {
  // The same path spelled another way (%-encoded, or with decomposed accents) must not slip through: the text is
  // also redacted in those spellings, and the most redacted result (the shortest) is what the model sees.
  let result = redactWritten(text, paths, written);
  for (const spelling of otherSpellings(text)) {
    const other = redactWritten(spelling, paths, written);
    if (other.length < result.length) result = other;
  }
  return result;
}

/**
 * Removes only the known host folders (working directory, home, temp, module folders, moss-ts's own install) and
 * what follows them: for text people wrote or read as it is (a conversation), where a path token of another shape
 * is the writer's own and stays.
 */
export function redactHostRoots(text: string): string {
  return text.replace(rootsPattern(), (found) =>
    hostRoots.has(found) ? HOST_PATH_MARKER : replacement(found),
  );
}

/** Most strings of one call's arguments kept as the model wrote them, and the longest such string. */
const MAX_WRITTEN_STRINGS = 32;
const MAX_WRITTEN_CHARACTERS = 1024;
/** Brackets a kept string while the text is redacted (private-use characters; a text holding them keeps nothing). */
const KEEP_OPEN = "\uE000";
const KEEP_CLOSE = "\uE001";
const TOKEN_BEFORE = /[\s'"`([{=,;<>]/u;
const TOKEN_AFTER = /[\s'"`)\]},;:<>!?]/u;

/**
 * The strings of a call's arguments (plain data, a few levels deep, bounded): text the model wrote itself, which a
 * host error may echo back as it was written (a refused `../x` is not a host path).
 */
export function writtenStrings(args: readonly unknown[]): string[] {
  const found: string[] = [];
  const visit = (value: unknown, depth: number): void => {
    if (found.length >= MAX_WRITTEN_STRINGS) return;
    if (typeof value === "string") {
      if (value.length >= 2 && value.length <= MAX_WRITTEN_CHARACTERS) found.push(value);
      return;
    }
    if (depth >= 3 || value === null || typeof value !== "object") return;
    if (Array.isArray(value)) {
      for (const item of value) visit(item, depth + 1);
      return;
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return;
    for (const item of Object.values(value)) visit(item, depth + 1);
  };
  for (const arg of args) visit(arg, 0);
  return found;
}

/**
 * Whether a written string is relative text that names no place on the host: not absolute (`/`, `\\`, a drive,
 * `~`, `file:`) and holding no known host folder. Only such text is echoed back: a host path stays hidden even from
 * the model that guessed it.
 */
function isRelativeText(item: string): boolean {
  if (/^(?:[A-Za-z]:|[\\/]|~|file:)/iu.test(item)) return false;
  for (const root of hostRoots) if (item.includes(root)) return false;
  return true;
}

/**
 * Redacts `text`, except where it names one of the `written` strings (relative text only, see `isRelativeText`) as a
 * whole token, not part of a longer path (`../x` in `/srv/../x` is removed): those are the model's own words.
 */
function redactWritten(text: string, paths: readonly string[], written: readonly string[]): string {
  if (written.length === 0 || text.includes(KEEP_OPEN) || text.includes(KEEP_CLOSE)) {
    return redactSpelling(text, paths);
  }
  const kept: string[] = [];
  let masked = text;
  for (const item of [...written].filter(isRelativeText).sort((a, b) => b.length - a.length)) {
    let out = "";
    let from = 0;
    for (let at = masked.indexOf(item); at !== -1; at = masked.indexOf(item, at + 1)) {
      if (at < from) continue;
      const before = masked[at - 1];
      const end = at + item.length;
      const after = masked[end];
      const sentenceEnd = after === "." && (end + 1 === masked.length || /\s/u.test(masked[end + 1]!));
      if (before !== undefined && !TOKEN_BEFORE.test(before)) continue;
      if (after !== undefined && !TOKEN_AFTER.test(after) && !sentenceEnd) continue;
      out += `${masked.slice(from, at)}${KEEP_OPEN}${kept.length}${KEEP_CLOSE}`;
      kept.push(item);
      from = end;
    }
    masked = out + masked.slice(from);
  }
  if (kept.length === 0) return redactSpelling(text, paths);
  return redactSpelling(masked, paths).replace(
    new RegExp(`${KEEP_OPEN}(\\d+)${KEEP_CLOSE}`, "gu"),
    (_match, index: string) => kept[Number(index)] ?? "",
  );
}

/** The text %-decoded (sequence by sequence; broken sequences stay) and in NFC, where those differ from it. */
function otherSpellings(text: string): string[] {
  const spellings: string[] = [];
  const normalized = text.normalize("NFC");
  if (/%[0-9A-Fa-f]{2}/.test(text)) {
    const decoded = normalized.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run;
      }
    });
    if (decoded !== text) spellings.push(decoded);
  }
  if (normalized !== text) spellings.push(normalized);
  return spellings;
}

function redactSpelling(text: string, paths: readonly string[]): string {
  let result = text;
  for (const exact of [...paths, ...hostPathsOnDisk(text)]
    .filter((item) => item.length > 1)
    .sort((a, b) => b.length - a.length)) {
    result = result.split(exact).join(replacement(exact));
  }
  return result
    .replace(STACK_FRAME_PATTERN, "")
    .replace(FILE_URL_PATTERN, replacement)
    .replace(QUOTED_PATTERN, (match, quote: string, inner: string) =>
      mayBeHostPath(inner) ? `${quote}${replacement(inner)}${quote}` : match,
    )
    .replace(rootsPattern(), (found) => (hostRoots.has(found) ? HOST_PATH_MARKER : replacement(found)))
    .replace(PATH_PATTERN, (found) => (mayBeHostPath(found) ? replacement(found) : found))
    .trimEnd();
}

/** Reads a property without letting a throwing getter or Proxy trap escape. */
function read(value: unknown, key: string): unknown {
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

function text(value: unknown, fallback: string): string {
  if (typeof value === "string") return value;
  try {
    return value === undefined ? fallback : String(value);
  } catch {
    return fallback;
  }
}

/** Most bytes the opted-in fields of one host error may take once expanded (more are left out). */
export const MAX_ERROR_FIELDS_BYTES = 16 * 1024;
/** Names a host error's fields may never use inside the isolate. */
const RESERVED_FIELDS = new Set([
  "name",
  "message",
  "code",
  "stack",
  "cause",
  "errors",
  "constructor",
  "__proto__",
  "prototype",
]);

/** What model code may see of anything a host function threw: name, message, code, opted-in fields; no host paths. */
export interface HostErrorFields {
  name: string;
  message: string;
  code?: string | number;
  /** Plain-data fields the error's class opted in with a static `mossErrorFields` list (e.g. an HTTP status). */
  fields?: Record<string, unknown>;
}

/**
 * The `{ name, message, code?, fields? }` model code may see of anything a host function threw, host paths removed.
 * Other properties of an error never cross (they may hold credentials: a client's request config, headers …), unless
 * its class lists them in a static `mossErrorFields`; those cross as plain data, strings without host paths, bounded.
 */
export function hostErrorFields(error: unknown, written: readonly string[] = []): HostErrorFields {
  const objectLike = typeof error === "object" && error !== null;
  const paths = objectLike
    ? [read(error, "path"), read(error, "dest")].filter((item): item is string => typeof item === "string")
    : [];
  const name = objectLike ? text(read(error, "name"), "Error") : "Error";
  const message = objectLike ? text(read(error, "message"), "") : text(error, "");
  const code = objectLike ? read(error, "code") : undefined;
  const fields = objectLike ? optedInFields(error as object, paths, written) : undefined;
  return {
    name: redactHostPaths(name, paths).slice(0, 200) || "Error",
    message: redactHostPaths(message, paths, written),
    ...(typeof code === "number" ? { code } : {}),
    ...(typeof code === "string" ? { code: redactHostPaths(code, paths) } : {}),
    ...(fields === undefined ? {} : { fields }),
  };
}

/** The fields a host error's class opted in to show model code, as plain data within {@link MAX_ERROR_FIELDS_BYTES}. */
function optedInFields(
  error: object,
  paths: readonly string[],
  written: readonly string[],
): Record<string, unknown> | undefined {
  const errorClass = read(error, "constructor");
  const listed = typeof errorClass === "function" ? read(errorClass, "mossErrorFields") : undefined;
  if (!Array.isArray(listed)) return undefined;
  const fields: Record<string, unknown> = {};
  let budget = MAX_ERROR_FIELDS_BYTES;
  for (const field of listed.slice(0, 32)) {
    if (typeof field !== "string" || RESERVED_FIELDS.has(field) || field.startsWith("_")) continue;
    const value = redactStrings(read(error, field), paths, written, 0);
    try {
      // Plain data only (no handle can be made here: encodeWire throws for host objects), measured expanded.
      const size = measureWire(encodeWire(value), budget);
      budget -= size;
      fields[field] = value;
    } catch {
      // Not plain data, or over what is left of the budget: left out.
    }
  }
  return Object.keys(fields).length === 0 ? undefined : fields;
}

/** A copy of plain data with host paths removed from its strings (non-plain values are returned as they are). */
function redactStrings(
  value: unknown,
  paths: readonly string[],
  written: readonly string[],
  depth: number,
): unknown {
  if (typeof value === "string") return redactHostPaths(value, paths, written);
  if (depth > 32 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => redactStrings(item, paths, written, depth + 1));
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[key] = redactStrings(item, paths, written, depth + 1);
  return copy;
}

/**
 * Wire text of a host-side failure for the isolate: `{ name, message, code?, fields? }` without host paths, never a
 * stack. `written`: the strings of the call's arguments (see `writtenStrings`), echoed back as the model wrote them.
 */
export function hostErrorWire(error: unknown, written: readonly string[] = []): string {
  return encodeWire(hostErrorFields(error, written));
}

/** Removes host paths from the Error values inside a wire text (errors a host method returned rather than threw). */
export function redactErrorValues(wire: string): string {
  if (!wire.includes('["E",')) return wire;
  const nodes = JSON.parse(wire) as unknown[];
  for (const node of nodes) {
    if (!Array.isArray(node) || node[0] !== "E") continue;
    node[1] = redactHostPaths(String(node[1])) || "Error";
    node[2] = redactHostPaths(String(node[2]));
    if (typeof node[3] === "string") node[3] = redactHostPaths(node[3]);
  }
  return JSON.stringify(nodes);
}
