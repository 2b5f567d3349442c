// The URL a context module is imported by, and the export of its top-level values appended to it. Shared by the
// Node loader hooks (engine/compiler/module-hooks.ts) and the Vite plugin of vitest.config.ts, so both load a
// context module the same way: no file is written anywhere.

/** The query parameter that marks a context-module import; its value makes each compile a fresh module instance. */
export const COMPILE_PARAMETER = "moss-compile";
const LOCALS_PARAMETER = "moss-locals";
const SOURCE_PARAMETER = "moss-source";

/** The export holding the module's top-level values (exported or not), appended to its source. */
export const LOCALS_EXPORT = "__moss_locals__";

/** What a context-module URL carries besides the file. */
export interface CompileRequest {
  /** The top-level value names to export as `__moss_locals__`. */
  names: string[];
  /** The source to load instead of the file's (a MossContext `code`), if any. */
  source?: string;
}

/** The URL that loads `fileUrl` as a fresh instance (number `id`) with its locals export. */
export function compileUrl(fileUrl: string, id: number, request: CompileRequest): string {
  const url = new URL(fileUrl);
  url.searchParams.set(COMPILE_PARAMETER, String(id));
  url.searchParams.set(LOCALS_PARAMETER, request.names.join(","));
  if (request.source !== undefined) {
    url.searchParams.set(SOURCE_PARAMETER, Buffer.from(request.source, "utf8").toString("base64url"));
  }
  return url.href;
}

/** The request a URL (or a Vite id: a path with a query) carries, or undefined when it is no context-module import. */
export function parseCompileUrl(url: string): CompileRequest | undefined {
  const query = url.indexOf("?");
  if (query === -1) return undefined;
  const parameters = new URLSearchParams(url.slice(query + 1));
  if (!parameters.has(COMPILE_PARAMETER)) return undefined;
  const names = (parameters.get(LOCALS_PARAMETER) ?? "")
    .split(",")
    .filter((name) => /^[\p{L}_$][\p{L}\p{N}_$]*$/u.test(name));
  const encoded = parameters.get(SOURCE_PARAMETER);
  return encoded === null ? { names } : { names, source: Buffer.from(encoded, "base64url").toString("utf8") };
}

/** `source` plus the locals export, on lines of its own after the last line (so line numbers stay the module's). */
export function withLocalsExport(source: string, names: string[]): string {
  return `${source}\n;export const ${LOCALS_EXPORT} = { ${names.join(", ")} };\n`;
}

/** The part of a URL or id before its query. */
export function withoutQuery(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}
