import path from "node:path";
import { escapeRegExp } from "../escape-reg-exp.ts";
import { hostPathReplacement, hostRootFolders, mayBeHostPath } from "../membrane/index.ts";
import { moduleSurfaceFolders } from "../module-surface.ts";

/** What a diagnostic message may show the model, and what it must not. */
export interface ScrubOptions {
  /** Folder of the context module: paths inside it become the module-relative specifiers the prompt shows. */
  moduleDirectory: string;
  /** The checker's own files and the name each is shown as (the context module's file name). */
  virtualFiles: ReadonlyArray<readonly [path: string, shownAs: string]>;
  /** Names declared only in hidden regions. */
  hiddenNames: ReadonlySet<string>;
  /** Names the model has seen anyway (in the prompt, or typed itself): never replaced. */
  shownNames: ReadonlySet<string>;
}

/** Longest message shown; TypeScript can print types of any size. */
const MAX_MESSAGE_LENGTH = 2000;
/** A compiler hint about the checker's own configuration ("Do you need to change your target library? Try …"). */
const CONFIGURATION_HINT =
  / ?Do you need to (?:change your target library|install type definitions for [^?\n]*)\?[^\n]*/g;
/** A double-quoted text: module paths (`import("…")`) and string literal types. */
const DOUBLE_QUOTED = /"([^"\n]*)"/g;
/** A single-quoted text: TypeScript prints names and types inside single quotes. */
const SINGLE_QUOTED = /'([^'\n]*)'/g;
/** An absolute path outside quotes. */
const BARE_PATH = /(^|[\s(=:,[{<])(\/[^\s'"`<>|:;,()[\]{}]+)/g;
const HIDDEN_REPLACEMENT = "(hidden)";

/**
 * Makes a compiler message safe to show the model: no host path (the module's folder becomes `./`, a package's
 * files their package path, a path inside the module's folder its module-relative form, anything else the
 * membrane's one form, `<host path>/name`), no hidden-region name the
 * model has not seen, no hint to change the checker's compiler options, and a bounded length.
 */
export function scrubMessage(message: string, options: ScrubOptions): string {
  let text = message;
  for (const [virtualPath, shownAs] of options.virtualFiles) {
    text = text.replaceAll(virtualPath, shownAs).replaceAll(virtualPath.replace(/\.ts$/, ""), shownAs);
  }
  text = text.replace(CONFIGURATION_HINT, "");
  // moss-ts's own declarations (in the temp folder when moss-ts runs from its sources) are "moss-ts" to the model.
  for (const folder of moduleSurfaceFolders()) {
    text = replaceRoot(text, folder.slice(0, -1), () => "moss-ts");
  }
  // Known roots first, literally, so folder names with spaces or accents go too.
  for (const root of hostRoots(options.moduleDirectory)) {
    text = replaceRoot(text, root, (rest) => shownPath(path.join(root, rest), options.moduleDirectory));
  }
  const hostPathShown = (inner: string): string =>
    isHostPath(inner) ? shownPath(inner, options.moduleDirectory) : inner;
  text = text.replace(DOUBLE_QUOTED, (_quoted, inner: string) => `"${hostPathShown(inner)}"`);
  text = text.replace(
    SINGLE_QUOTED,
    (_quoted, inner: string) => `'${withoutHiddenNames(hostPathShown(inner), options)}'`,
  );
  text = text.replace(BARE_PATH, (match, before: string, candidate: string) =>
    isHostPath(candidate) ? before + shownPath(candidate, options.moduleDirectory) : match,
  );
  return text.length > MAX_MESSAGE_LENGTH ? `${text.slice(0, MAX_MESSAGE_LENGTH)} …` : text;
}

function withoutHiddenNames(text: string, options: ScrubOptions): string {
  let result = text;
  for (const name of options.hiddenNames) {
    if (options.shownNames.has(name) || !result.includes(name)) continue;
    result = result.replace(
      new RegExp(`(?<![\\w$])${escapeRegExp(name)}(?![\\w$])`, "g"),
      HIDDEN_REPLACEMENT,
    );
  }
  return result;
}

/** Folders whose paths never reach the model, most specific first: the module's and the membrane's known roots. */
function hostRoots(moduleDirectory: string): string[] {
  const roots = [moduleDirectory, ...hostRootFolders()].filter(
    (root) => path.isAbsolute(root) && root !== path.sep,
  );
  return [...new Set(roots)].sort((a, b) => b.length - a.length);
}

/** Replaces each `root` or `root/rest…` (up to a quote, space-free tail) by `replace(rest)`. */
function replaceRoot(text: string, root: string, replace: (rest: string) => string): string {
  const pattern = new RegExp(`${escapeRegExp(root)}(?=$|[/'"\\s)])(/[^'"\\s)]*)?`, "g");
  return text.replace(pattern, (_match, rest: string | undefined) => replace(rest ?? ""));
}

/** Whether a text is an absolute POSIX path on the host (the membrane's rule: its first folder exists here). */
function isHostPath(text: string): boolean {
  if (!text.startsWith("/") || text.startsWith("//") || text.length < 2) return false;
  return mayBeHostPath(text);
}

/** How the model may see a host path: module-relative, a package path, or the membrane's `<host path>/name`. */
function shownPath(file: string, moduleDirectory: string): string {
  const packageIndex = file.lastIndexOf("/node_modules/");
  if (packageIndex >= 0) return file.slice(packageIndex + "/node_modules/".length);
  const relative = path.relative(moduleDirectory, file).split(path.sep).join("/");
  if (relative === "") return ".";
  if (!relative.startsWith("../")) return `./${relative}`;
  return hostPathReplacement(file);
}
