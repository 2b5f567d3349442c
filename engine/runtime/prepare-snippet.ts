import {
  decodedMappings,
  GREATEST_LOWER_BOUND,
  LEAST_UPPER_BOUND,
  originalPositionFor,
  type SourceMapSegment,
  TraceMap,
} from "@jridgewell/trace-mapping";
import { ts } from "ts-morph";
import { withEsbuild } from "../esbuild-service.ts";
import { CALL_SITE_PROBE, callSiteOf } from "../membrane/index.ts";
import { SNIPPET_FILE } from "../snippet-file.ts";

/** A snippet ready for the sandbox: a classic script whose top-level definitions become globals. */
export interface PreparedSnippet {
  script: string;
  map: TraceMap;
  /** Names the snippet defines at top level. */
  definitions: string[];
  /**
   * The snippet as TypeScript parsed it, handed on so the session's definitions (`SessionDefinitions.accept`) need
   * not parse it again. Only on the result of a fresh compile: the cache keeps no parse tree (many times the text's
   * size), so a snippet prepared from the cache is parsed again where it is needed.
   */
  parsed?: ts.SourceFile;
}

/** Why a snippet could not be prepared: a syntax error located in the snippet. */
export interface SnippetSyntaxError {
  message: string;
  line: number;
  column: number;
}

const CACHE_SIZE = 128;
const cache = new Map<string, PreparedSnippet | SnippetSyntaxError>();

/**
 * Compiles the model's TypeScript into a classic script: `export` dropped, top-level `const`/`let`/`class`
 * turned into `var` so a later execute may define them again, imports rejected (the sandbox has none).
 * Results are kept in a small LRU cache: code run again (retries, test cases, loops) skips parse and transform.
 */
export async function prepareSnippet(code: string): Promise<PreparedSnippet | SnippetSyntaxError> {
  const cached = cache.get(code);
  if (cached) {
    cache.delete(code);
    cache.set(code, cached);
    return cached;
  }
  const prepared = await compileSnippet(code);
  if ("parsed" in prepared) {
    const { parsed: _parsed, ...kept } = prepared;
    cache.set(code, kept);
  } else {
    cache.set(code, prepared);
  }
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  return prepared;
}

async function compileSnippet(code: string): Promise<PreparedSnippet | SnippetSyntaxError> {
  try {
    return await rewriteAndTransform(code);
  } catch (error) {
    // The TypeScript parser and the rewrite walk recurse once per nesting level on the host's stack: model code
    // nested a few thousand levels deep (`[[[…]]]`, `((…))`) overflows it. That is bad input, never a host failure.
    if (error instanceof RangeError) {
      return { message: "the code is nested too deeply to compile", line: 1, column: 1 };
    }
    throw error;
  }
}

async function rewriteAndTransform(code: string): Promise<PreparedSnippet | SnippetSyntaxError> {
  const sourceFile = ts.createSourceFile(SNIPPET_FILE, code, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const edits: Array<{ start: number; end: number; text: string }> = [];
  const definitions: string[] = [];
  for (const statement of sourceFile.statements) {
    if (ts.isImportDeclaration(statement) || ts.isImportEqualsDeclaration(statement)) {
      const position = sourceFile.getLineAndCharacterOfPosition(statement.getStart(sourceFile));
      return {
        message:
          "imports are not available in the sandbox: use the names the context module already has in scope",
        line: position.line + 1,
        column: position.character + 1,
      };
    }
    for (const modifier of ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : []) {
      if (modifier.kind === ts.SyntaxKind.ExportKeyword || modifier.kind === ts.SyntaxKind.DefaultKeyword) {
        edits.push({
          start: modifier.getStart(sourceFile),
          end: modifier.getEnd(),
          text: " ".repeat(modifier.getWidth(sourceFile)),
        });
      }
    }
    if (ts.isExportDeclaration(statement) || ts.isExportAssignment(statement)) {
      edits.push({ start: statement.getStart(sourceFile), end: statement.getEnd(), text: "" });
    } else if (ts.isVariableStatement(statement)) {
      const list = statement.declarationList;
      const keyword = list.getFirstToken(sourceFile);
      if (keyword && (list.flags & (ts.NodeFlags.Const | ts.NodeFlags.Let)) !== 0) {
        edits.push({
          start: keyword.getStart(sourceFile),
          end: keyword.getEnd(),
          text: "var".padEnd(keyword.getWidth(sourceFile)),
        });
      }
      for (const declaration of list.declarations) definitions.push(...boundNames(declaration.name));
    } else if (ts.isClassDeclaration(statement) && statement.name) {
      const name = statement.name.text;
      const classKeyword = statement
        .getChildren(sourceFile)
        .find((child) => child.kind === ts.SyntaxKind.ClassKeyword);
      if (classKeyword)
        edits.push({
          start: classKeyword.getStart(sourceFile),
          end: classKeyword.getStart(sourceFile),
          text: `var ${name} = `,
        });
      edits.push({ start: statement.getEnd(), end: statement.getEnd(), text: ";" });
      definitions.push(name);
    } else if (ts.isFunctionDeclaration(statement) && statement.name) {
      definitions.push(statement.name.text);
    } else if (ts.isEnumDeclaration(statement)) {
      definitions.push(statement.name.text);
    }
  }
  let rewritten = code;
  for (const edit of edits.sort((a, b) => b.start - a.start)) {
    rewritten = rewritten.slice(0, edit.start) + edit.text + rewritten.slice(edit.end);
  }
  try {
    // esbuild is loaded with the first snippet that runs (`moss check` and a prompt never need it).
    const result = await withEsbuild((esbuild) =>
      esbuild.transform(rewritten, {
        loader: "ts",
        target: "es2022",
        sourcemap: "external",
        sourcefile: SNIPPET_FILE,
        tsconfigRaw: { compilerOptions: { experimentalDecorators: true, useDefineForClassFields: true } },
      }),
    );
    return { ...withCallSiteProbe(result.code, result.map), definitions, parsed: sourceFile };
  } catch (error) {
    const first = (error as { errors?: Array<{ text: string; location?: { line: number; column: number } }> })
      .errors?.[0];
    return {
      message: first?.text ?? String(error),
      line: first?.location?.line ?? 1,
      column: (first?.location?.column ?? 0) + 1,
    };
  }
}

/** A line of esbuild's output that is a directive (`"use strict";`): it stays first, before the probe. */
const DIRECTIVE_LINE = /^\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*');?\s*$/;

/**
 * The script with the call-site probe (`CALL_SITE_PROBE`) as its first statement, at the start of the first line
 * after the directives (no line moves: the lines model code reads in its own stacks stay the script's), and the
 * source map's columns on that line moved by its width: the isolate learns from it which script is the run's own.
 */
function withCallSiteProbe(code: string, mapText: string): { script: string; map: TraceMap } {
  const lines = code.split("\n");
  let at = 0;
  while (at < lines.length && DIRECTIVE_LINE.test(lines[at]!)) at++;
  const probe = `${CALL_SITE_PROBE}();`;
  if (at === lines.length) lines.push(probe);
  else lines[at] = `${probe}${lines[at]}`;
  const json = JSON.parse(mapText) as { version: 3; sources: string[]; names: string[] };
  const decoded = decodedMappings(new TraceMap(mapText)).map((segments, line) =>
    line === at
      ? segments.map((segment) => [segment[0] + probe.length, ...segment.slice(1)] as typeof segment)
      : segments,
  );
  return {
    script: lines.join("\n"),
    map: new TraceMap({ ...json, mappings: decoded as SourceMapSegment[][] }),
  };
}

function boundNames(name: ts.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text];
  return name.elements.flatMap((element) =>
    ts.isOmittedExpression(element) ? [] : boundNames(element.name),
  );
}

/** Maps a 1-based line/column of the compiled script back to the snippet. */
export function mapToSnippet(
  map: TraceMap,
  line: number,
  column: number,
): { line: number; column: number } | undefined {
  const original = originalPositionFor(map, { line, column: Math.max(0, column - 1) });
  if (original.line === null || original.column === null) return undefined;
  return { line: original.line, column: original.column + 1 };
}

/**
 * The snippet position of a host call's site in the script (see `callSiteOf`): mapped from the call's own column, so
 * a call on a continuation line names its line and column (column 0 of a generated line maps to the end of the
 * previous one). A site without a column falls back to the first mapped position of its line, and its column is
 * unknown (0). The one mapping approvals, policies and the call trace use.
 */
export function mapCallSiteToSnippet(
  map: TraceMap,
  site: number,
): { line: number; column: number } | undefined {
  const { line, column } = callSiteOf(site);
  if (line <= 0) return undefined;
  if (column > 0) {
    const original = mapToSnippet(map, line, column);
    if (original !== undefined) return original;
  }
  for (const bias of [LEAST_UPPER_BOUND, GREATEST_LOWER_BOUND] as const) {
    const original = originalPositionFor(map, { line, column: 0, bias });
    if (original.line !== null) return { line: original.line, column: 0 };
  }
  return undefined;
}

/** Rewrites `snippet.js:L:C` frames of a sandbox stack to snippet positions, keeping only snippet frames. */
export function mapStack(
  stack: string | undefined,
  map: TraceMap,
): { stack?: string; line?: number; column?: number } {
  if (!stack) return {};
  const lines: string[] = [];
  let first: { line: number; column: number } | undefined;
  for (const text of stack.split("\n")) {
    const frame = text.match(/snippet\.js:(\d+):(\d+)/);
    if (!frame) {
      if (!/^\s+at /.test(text) && lines.length === 0) lines.push(text);
      continue;
    }
    const mapped = mapToSnippet(map, Number(frame[1]), Number(frame[2]));
    if (!mapped) continue;
    first ??= mapped;
    lines.push(
      text.replace(/\(?[^\s(]*snippet\.js:\d+:\d+\)?/, (match) => {
        const location = `${SNIPPET_FILE}:${mapped.line}:${mapped.column}`;
        return match.startsWith("(") ? `(${location})` : location;
      }),
    );
  }
  return { stack: lines.join("\n"), line: first?.line, column: first?.column };
}
