import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Project, ts } from "ts-morph";
import { MOSS_DIAGNOSTIC_CODES } from "../diagnostic-codes.ts";
import { codeFrame, MossError } from "../errors.ts";
import { isReachableGlobalName } from "../membrane/index.ts";
import { importsNodeBuiltin, MODULE_COMPILER_OPTIONS, nodeTypeOptions } from "../module/index.ts";
import { ensureModuleSurface } from "../module-surface.ts";
import { SNIPPET_FILE } from "../snippet-file.ts";
import type { Diagnostic } from "../types.ts";
import { CheckHost } from "./check-host.ts";
import { moduleScope, scopeSource, shownIdentifiers } from "./module-scope.ts";
import { scrubMessage } from "./scrub-message.ts";
import {
  analyzeSnippet,
  applySnippetEdits,
  originalOffset,
  type SnippetAnalysis,
} from "./snippet-analysis.ts";
import {
  hostGlobalMessage,
  isHostGlobalName,
  MOSS_NAME,
  type PushFinding,
  TypedFindings,
} from "./typed-findings.ts";

/**
 * Compiler options of the checker's own project: strict, ES2022, bundler resolution with `.ts` imports. The
 * sandbox's globals come from moss-ts's own sandbox-globals.d.ts, never from the user's `@types/node` (Node's types
 * are loaded only when the context module itself imports a Node builtin, for its own declarations).
 */
export const CHECK_COMPILER_OPTIONS: ts.CompilerOptions = {
  ...MODULE_COMPILER_OPTIONS,
  types: [],
};

/** What a ModuleChecker checks against. */
export interface ModuleCheckerOptions {
  /** Absolute path of the context module (imports resolve from its folder). */
  modulePath: string;
  /** The module's full source text (may differ from the file: `MossContext.code`). */
  source: string;
  /** Top-level names declared only inside `// <moss-hide>` regions. */
  hiddenNames: string[];
  /** A ts-morph Project to share (else one is created over the real file system). */
  project?: Project;
  /** Names the runtime adds with `withLocals`, and the TypeScript type of each: in scope like the module's own. */
  locals?: Record<string, string>;
  /** Visible names of service classes: the sandbox refuses `new` on them, and so does the check. */
  serviceClasses?: string[];
}

const CANNOT_FIND_NAME_CODES = new Set([2304, 2552, 2503, 2580, 2582, 2583, 2584, 2591, 2592]);
/** "Cannot find name" variants whose only difference is a hint about the checker's configuration (dropped). */
const CANNOT_FIND_NAME_WITH_HINT = new Set([2580, 2582, 2583, 2584, 2591, 2592]);
/** TypeScript's "Property 'x' does not exist on type 'T'. Did you mean 'y'?" → the same diagnostic without a suggestion. */
const SUGGESTION_CODES: ReadonlyMap<number, number> = new Map([[2551, 2339]]);
/** The suggestion sentence ending the first line of such a message. */
const SUGGESTION = / Did you mean '[^'\n]*'\?(?=\n|$)/;
/** Unused `@ts-expect-error` directive. */
const UNUSED_EXPECT_ERROR = 2578;
/** The sandbox's globals beside the ES library, shipped with moss-ts and read by path. */
const SANDBOX_GLOBALS_PATH = fileURLToPath(new URL("./sandbox-globals.d.ts", import.meta.url));
/** Where the checker's program shows them (no host path). */
const SANDBOX_GLOBALS_FILE = "/__moss_sandbox__/sandbox-globals.d.ts";
let sandboxGlobalsText: string | undefined;
/** Most diagnostics one check returns. */
const MAX_DIAGNOSTICS = 100;
const BASE_MOSS_PATH = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "../moss.ts" : "../moss.js", import.meta.url),
);

/** Most module names listed in the message about an import. */
const MAX_NAMES_LISTED = 30;

let checkerCount = 0;

interface PreviousDefinition {
  names: string[];
  text: string;
}

/**
 * Parses and binds TypeScript's lib, the sandbox's globals and moss-ts's declarations (the surface every context
 * module imports `Moss` from) into this thread's shared file cache, and runs the checker's code once, by checking a
 * snippet against a minimal module: a spare checker worker does this before it is given a module, so that module's
 * first check builds only the module's own files.
 */
export function warmCheckLibrary(): void {
  const checker = new ModuleChecker({
    modulePath: path.join(tmpdir(), "moss-check-warm-up.ts"),
    source: 'import { Moss as Parent } from "moss-ts";\nexport class Moss extends Parent {}\n',
    hiddenNames: [],
  });
  checker.check(
    "async function main(moss: Moss) {\n  const values: number[] = [1, 2];\n  return values.map((value) => value + 1);\n}",
  );
  checker.dispose();
}

/** Type-checks the model's snippets against a context module, as if each snippet were appended to it. */
export class ModuleChecker {
  readonly #host: CheckHost;
  readonly #modulePath: string;
  readonly #moduleFileName: string;
  readonly #hiddenNames: Set<string>;
  readonly #typedFindings: TypedFindings;
  readonly #scopePath: string;
  readonly #previousPath: string;
  readonly #snippetPath: string;
  readonly #virtualPaths: string[];
  readonly #moduleDirectory: string;
  #visibleNames: string[] = [];
  #shownNames = new Set<string>();
  readonly #locals: Array<[name: string, type: string]>;
  #source = "";
  #released = false;
  /** Accepted definitions of each session sharing this checker (the empty owner: a checker of one session). */
  readonly #previousByOwner = new Map<string, PreviousDefinition[]>();
  #owner = "";

  constructor(options: ModuleCheckerOptions) {
    if (typeof options?.modulePath !== "string" || !path.isAbsolute(options.modulePath)) {
      throw new MossError(
        "invalid-argument",
        `ModuleChecker needs an absolute modulePath, got ${String(options?.modulePath)}`,
        {
          modulePath: options?.modulePath,
        },
      );
    }
    if (typeof options.source !== "string") {
      throw new MossError(
        "invalid-argument",
        `ModuleChecker needs the source text of ${options.modulePath}`,
        {
          modulePath: options.modulePath,
        },
      );
    }
    ensureModuleSurface();
    this.#host = new CheckHost(
      options.project ??
        new Project({
          // The context module is host code: a module that imports Node builtins keeps Node's types for them.
          compilerOptions: {
            ...CHECK_COMPILER_OPTIONS,
            ...nodeTypeOptions(importsNodeBuiltin(options.source)),
          },
          skipAddingFilesFromTsConfig: true,
        }),
      options.project !== undefined,
    );
    this.#modulePath = options.modulePath;
    this.#moduleFileName = path.basename(options.modulePath);
    this.#hiddenNames = new Set((options.hiddenNames ?? []).filter((name) => name !== MOSS_NAME));
    this.#locals = Object.entries(options.locals ?? {});
    const directory = path.dirname(options.modulePath);
    this.#moduleDirectory = directory;
    const stem = this.#moduleFileName.replace(/\.[cm]?tsx?$/, "");
    // Unguessable names: the model cannot write the prelude's module specifier (resolutions are shared by text).
    const id = `${++checkerCount}-${randomBytes(6).toString("hex")}`;
    this.#scopePath = path.join(directory, `.${stem}.moss-check-${id}-scope.ts`);
    this.#previousPath = path.join(directory, `.${stem}.moss-check-${id}-previous.ts`);
    this.#snippetPath = path.join(directory, `.${stem}.moss-check-${id}-snippet.ts`);
    this.#virtualPaths = [this.#scopePath, this.#previousPath, this.#snippetPath];
    this.#typedFindings = new TypedFindings(
      {
        scope: this.#scopePath,
        previous: this.#previousPath,
        snippet: this.#snippetPath,
        sandboxGlobals: SANDBOX_GLOBALS_FILE,
      },
      this.#hiddenNames,
      new Set(options.serviceClasses ?? []),
    );
    this.updateSource(options.source);
  }

  /** The module's code changed: later checks see the new source. */
  updateSource(source: string): void {
    this.#source = source;
    const scope = moduleScope(source, [...this.#hiddenNames], this.#modulePath);
    let suffix = scope.exportSuffix;
    // The module's `__moss_` names (its hooks) are in its scope file but never in the snippet's: the sandbox lacks them.
    this.#visibleNames = scope.visibleNames.filter(isReachableGlobalName);
    if (!this.#visibleNames.includes(MOSS_NAME)) {
      suffix += `export { Moss } from ${JSON.stringify(relativeSpecifier(this.#scopePath, BASE_MOSS_PATH))};\n`;
      this.#visibleNames = [...this.#visibleNames, MOSS_NAME];
    }
    for (const [name, type] of this.#locals) {
      if (this.#visibleNames.includes(name)) continue;
      suffix += `export declare const ${name}: ${type};\n`;
      this.#visibleNames = [...this.#visibleNames, name];
    }
    this.#shownNames = shownIdentifiers(source, this.#modulePath);
    this.#host.setVirtual(
      this.#scopePath,
      scopeSource(source, this.#visibleNames, this.#modulePath) + suffix,
    );
    sandboxGlobalsText ??= readSandboxGlobals();
    this.#host.setVirtual(SANDBOX_GLOBALS_FILE, sandboxGlobalsText);
    this.#writePrevious();
  }

  /**
   * Remembers a snippet that ran: its top-level definitions are visible to later checks of the same `owner` (later
   * ones win). Sessions sharing one checker each name themselves as owner; their definitions never mix.
   */
  accept(snippet: string, owner = ""): void {
    const analysis = analyzeSnippet(snippet, SNIPPET_FILE, MOSS_NAME);
    const edited = applySnippetEdits(snippet, analysis);
    // Earlier definitions of a name this snippet declares go; the snippet's own (overloads, merged ones) all stay.
    const declared = new Set(analysis.declarations.flatMap((item) => item.names.map((name) => name.name)));
    const previous = (this.#previousByOwner.get(owner) ?? []).filter(
      (entry) => !entry.names.some((name) => declared.has(name)),
    );
    for (const declaration of analysis.declarations) {
      const names = declaration.names.map((item) => item.name);
      const start = editedOffset(declaration.textStart, analysis);
      const end = editedOffset(declaration.statement.end, analysis);
      previous.push({ names, text: edited.slice(start, end) });
    }
    this.#previousByOwner.set(owner, previous);
    if (owner === this.#owner) this.#writePrevious();
  }

  /**
   * Sets the definitions of `owner` to those of `definitions` alone (the session's kept definitions, as its sandbox
   * has them): what an earlier `accept` or `define` gave is forgotten.
   */
  define(definitions: string, owner = ""): void {
    this.#previousByOwner.delete(owner);
    this.accept(definitions, owner);
  }

  /** Forgets the accepted definitions of an owner (its session ended). */
  forget(owner: string): void {
    this.#previousByOwner.delete(owner);
  }

  get #previous(): PreviousDefinition[] {
    return this.#previousByOwner.get(this.#owner) ?? [];
  }

  /**
   * Type-checks a snippet against the module and the definitions `owner` accepted; diagnostics have 1-based lines
   * and columns within the snippet, sorted by position.
   */
  check(snippet: string, owner = ""): Diagnostic[] {
    if (owner !== this.#owner) {
      this.#owner = owner;
      if (!this.#released) this.#writePrevious();
    }
    if (this.#released) {
      this.#released = false;
      this.updateSource(this.#source);
    }
    if (typeof snippet !== "string") {
      throw new MossError(
        "invalid-argument",
        `ModuleChecker.check needs the snippet text, got ${typeof snippet}`,
      );
    }
    try {
      const analysis = analyzeSnippet(snippet, SNIPPET_FILE, MOSS_NAME);
      const fast = this.#check(snippet, analysis, false);
      // Only referenced names are imported on the fast path; a missing name is checked again with all of them,
      // so that TypeScript can suggest a close module name ("Did you mean 'square'?").
      return fast.missingName ? this.#check(snippet, analysis, true).diagnostics : fast.diagnostics;
    } catch (error) {
      // A failure of the compiler itself is not the model's fault: report it without blocking the run.
      this.dispose();
      if (error instanceof RangeError && /call stack/i.test(error.message)) {
        return [checkLimitDiagnostic(snippet, "its stack size")];
      }
      const message = this.#scrub(error instanceof Error ? error.message : String(error), undefined);
      return [
        {
          code: MOSS_DIAGNOSTIC_CODES.checkerFailed,
          message: `the type checker failed on this snippet (${message}); the code was not type-checked.`,
          line: 1,
          column: 1,
          severity: "warning",
        },
      ];
    }
  }

  #check(
    snippet: string,
    analysis: SnippetAnalysis,
    allNames: boolean,
  ): { diagnostics: Diagnostic[]; missingName: boolean } {
    const wanted = (name: string): boolean =>
      !analysis.declaredNames.has(name) &&
      (allNames || name === MOSS_NAME || analysis.referencedNames.has(name));
    const previousNames = new Set(this.#previous.flatMap((entry) => entry.names));
    const fromModule = this.#visibleNames.filter((name) => wanted(name) && !previousNames.has(name));
    const fromPrevious = [...previousNames].filter(wanted);
    const prelude =
      `import { ${fromModule.join(", ")} } from ${JSON.stringify(relativeSpecifier(this.#snippetPath, this.#scopePath))};` +
      (fromPrevious.length > 0
        ? ` import { ${fromPrevious.join(", ")} } from ${JSON.stringify(relativeSpecifier(this.#snippetPath, this.#previousPath))};`
        : "");
    const offset = prelude.length + 1;
    const text = `${prelude}\n${applySnippetEdits(snippet, analysis)}`;
    this.#host.setVirtual(this.#snippetPath, text, { modelPreludeEnd: prelude.length });
    const program = this.#host.program([this.#snippetPath, SANDBOX_GLOBALS_FILE]);
    const sourceFile = program.getSourceFile(this.#snippetPath)!;
    const diagnostics: Diagnostic[] = [];
    let missingName = false;
    const push = (code: number, message: string, start: number, severity: Diagnostic["severity"]): void => {
      const position = ts.getLineAndCharacterOfPosition(analysis.sourceFile, Math.min(start, snippet.length));
      const line = position.line + 1;
      const column = position.character + 1;
      diagnostics.push({ code, message, line, column, severity, frame: codeFrame(snippet, line, column, 0) });
    };
    this.#pushFindings(analysis, push);
    const syntactic = program.getSyntacticDiagnostics(sourceFile);
    const compilerDiagnostics = syntactic.length > 0 ? syntactic : program.getSemanticDiagnostics(sourceFile);
    for (const diagnostic of compilerDiagnostics) {
      if (diagnostic.start === undefined || diagnostic.start < offset) continue;
      if (
        diagnostic.category !== ts.DiagnosticCategory.Error &&
        diagnostic.category !== ts.DiagnosticCategory.Warning
      ) {
        continue;
      }
      const start = originalOffset(diagnostic.start - offset, analysis.insertions);
      const severity = diagnostic.category === ts.DiagnosticCategory.Error ? "error" : "warning";
      const name = snippet.slice(start, start + (diagnostic.length ?? 0));
      if (CANNOT_FIND_NAME_CODES.has(diagnostic.code)) {
        if (this.#hiddenNames.has(name)) {
          push(MOSS_DIAGNOSTIC_CODES.hiddenName, hiddenNameMessage(name), start, "error");
          continue;
        }
        if (isHostGlobalName(name)) {
          push(MOSS_DIAGNOSTIC_CODES.hostGlobal, hostGlobalMessage(name), start, "error");
          continue;
        }
        // The typed pass reports every other use of a `__moss_` name the snippet does not define itself.
        if (!isReachableGlobalName(name)) continue;
        missingName = true;
      }
      // `console.table` and the like: the moss finding below says what the sandbox's console has.
      if (diagnostic.code === 2339 && /on type 'Console'/.test(flattenMessage(diagnostic))) continue;
      const line =
        ts.getLineAndCharacterOfPosition(analysis.sourceFile, Math.min(start, snippet.length)).line + 1;
      // A suggestion of a member the prompt does not show is dropped: the diagnostic is the one without a suggestion.
      const withoutSuggestion =
        SUGGESTION_CODES.has(diagnostic.code) &&
        this.#typedFindings.suggestsUnreachableMossMember(diagnostic);
      const code = withoutSuggestion
        ? SUGGESTION_CODES.get(diagnostic.code)!
        : CANNOT_FIND_NAME_WITH_HINT.has(diagnostic.code)
          ? 2304
          : diagnostic.code;
      let message = this.#message(diagnostic, sourceFile, offset, analysis, line);
      if (withoutSuggestion) message = message.replace(SUGGESTION, "");
      push(code, message, start, severity);
    }
    if (syntactic.length === 0) this.#typedFindings.push(program, sourceFile, offset, analysis, push);
    const scrubbed = withDirectives(diagnostics, analysis.sourceFile).map((diagnostic) => ({
      ...diagnostic,
      message: this.#scrub(diagnostic.message, analysis),
    }));
    return {
      diagnostics: scrubbed.sort((a, b) => a.line - b.line || a.column - b.column).slice(0, MAX_DIAGNOSTICS),
      missingName: missingName && !allNames,
    };
  }

  /** Releases the warm program and the parsed files this checker holds; a later check starts cold. */
  dispose(): void {
    this.#host.clear();
    this.#released = true;
  }

  #pushFindings(analysis: SnippetAnalysis, push: PushFinding): void {
    for (const finding of analysis.findings) {
      if (finding.kind === "import") {
        push(MOSS_DIAGNOSTIC_CODES.importStatement, this.#importMessage(), finding.start, "error");
      } else if (finding.kind === "ambient") {
        push(
          MOSS_DIAGNOSTIC_CODES.ambientDeclaration,
          "'declare global', 'declare module' and '/// <reference>' are not available: your code sees only the names of the context module and its own declarations.",
          finding.start,
          "error",
        );
      } else {
        push(
          MOSS_DIAGNOSTIC_CODES.topLevelAwait,
          "'await' is only allowed inside a function here: put the code inside `async function main(moss: Moss) { ... }`.",
          finding.start,
          "error",
        );
      }
    }
    const moduleNames = new Set(this.#visibleNames);
    for (const declaration of analysis.declarations) {
      for (const item of declaration.names) {
        if (!moduleNames.has(item.name)) continue;
        push(
          MOSS_DIAGNOSTIC_CODES.redeclaredModuleName,
          `'${item.name}' is already defined by the context module: use it as it is, or give your definition another name.`,
          item.start,
          "error",
        );
      }
    }
  }

  #message(
    diagnostic: ts.Diagnostic,
    sourceFile: ts.SourceFile,
    offset: number,
    analysis: SnippetAnalysis,
    line: number,
  ): string {
    const parts = [ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")];
    for (const related of diagnostic.relatedInformation ?? []) {
      if (related.file !== sourceFile) continue;
      const relatedMessage = ts.flattenDiagnosticMessageText(related.messageText, "\n");
      const relatedLine =
        related.start !== undefined && related.start >= offset
          ? ts.getLineAndCharacterOfPosition(
              analysis.sourceFile,
              originalOffset(related.start - offset, analysis.insertions),
            ).line + 1
          : undefined;
      parts.push(
        relatedLine === undefined || relatedLine === line
          ? relatedMessage
          : `${relatedMessage} (line ${relatedLine})`,
      );
    }
    let message = parts.join(" ").replace("because it is an import", "because the context module defines it");
    if (forgotAwait(diagnostic.code, message)) message += " Did you forget to use 'await'?";
    return message;
  }

  /** No host path, hidden name the model has not seen, or compiler-configuration hint reaches the model. */
  #scrub(message: string, analysis: SnippetAnalysis | undefined): string {
    return scrubMessage(message, {
      moduleDirectory: this.#moduleDirectory,
      virtualFiles: this.#virtualPaths.map((virtualPath) => [virtualPath, this.#moduleFileName] as const),
      hiddenNames: this.#hiddenNames,
      shownNames: new Set([...this.#shownNames, ...(analysis?.referencedNames ?? [])]),
    });
  }

  #importMessage(): string {
    const shown = this.#visibleNames.slice(0, MAX_NAMES_LISTED).join(", ");
    const more = this.#visibleNames.length - MAX_NAMES_LISTED;
    const names = more > 0 ? `${shown} and ${more} more` : shown;
    return `imports are not available in the sandbox: use the names already in scope: ${names}.`;
  }

  #writePrevious(): void {
    const names = this.#previous.flatMap((entry) => entry.names);
    const imported = this.#visibleNames.filter((name) => !names.includes(name));
    const prelude = `import { ${imported.join(", ")} } from ${JSON.stringify(relativeSpecifier(this.#previousPath, this.#scopePath))};`;
    const text = [
      prelude,
      ...this.#previous.map((entry) => entry.text),
      `export { ${names.join(", ")} };`,
    ].join("\n");
    this.#host.setVirtual(this.#previousPath, text, { modelPreludeEnd: prelude.length });
  }
}

/**
 * The error a check that ran out of a limit ends with, located at the snippet's first code: the code was not
 * checked, so a strict run fails with kind `type`.
 */
export function checkLimitDiagnostic(snippet: string, limit: string): Diagnostic {
  const start = Math.max(0, snippet.search(/\S/));
  const before = snippet.slice(0, start).split("\n");
  const line = before.length;
  const column = before[before.length - 1]!.length + 1;
  return {
    code: MOSS_DIAGNOSTIC_CODES.checkLimit,
    message: `the type-check exceeded its limit (${limit}): the code was not checked. Simplify its types (deeply recursive, very large or exponential types).`,
    line,
    column,
    severity: "error",
    frame: codeFrame(snippet, line, column, 0),
  };
}

const PROMISE_TYPE = /^'(Promise|PromiseLike)<|^'Promise'/;

/** TypeScript hints at a missing `await` only when the awaited type has the property; moss hints whenever a Promise is misused. */
function forgotAwait(code: number, message: string): boolean {
  if (message.includes("'await'")) return false;
  const typeAfter = (marker: string): string | undefined => {
    const index = message.indexOf(marker);
    return index < 0 ? undefined : message.slice(index + marker.length - 1);
  };
  const isPromise = (text: string | undefined): boolean => text !== undefined && PROMISE_TYPE.test(text);
  if (code === 2339 || code === 2551) return isPromise(typeAfter("on type '"));
  if (code === 2322 || code === 2345) {
    const target = typeAfter("to type '") ?? typeAfter("parameter of type '");
    return isPromise(typeAfter("ype '")) && target !== undefined && !isPromise(target);
  }
  if (code === 2365 || code === 2362 || code === 2363) return message.includes("'Promise<");
  return false;
}

function hiddenNameMessage(name: string): string {
  return `'${name}' is not available to your code (it is hidden by the context module).`;
}

function editedOffset(original: number, analysis: SnippetAnalysis): number {
  let shift = 0;
  for (const insertion of analysis.insertions) {
    if (insertion.at < original) shift += insertion.text.length;
  }
  return original + shift;
}

function relativeSpecifier(fromFile: string, toFile: string): string {
  const relative = path.relative(path.dirname(fromFile), toFile).split(path.sep).join("/");
  return relative.startsWith("../") ? relative : `./${relative}`;
}

function readSandboxGlobals(): string {
  try {
    return readFileSync(SANDBOX_GLOBALS_PATH, "utf8");
  } catch (error) {
    throw new MossError(
      "invalid-argument",
      `moss-ts cannot read its sandbox globals declaration file (${(error as Error).message}): the package is incomplete; it must ship engine/check/sandbox-globals.d.ts beside module-checker`,
      { path: SANDBOX_GLOBALS_PATH },
    );
  }
}

function flattenMessage(diagnostic: ts.Diagnostic): string {
  return ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
}

/** Lines (0-based) of the `@ts-ignore` / `@ts-expect-error` comments of a file, as TypeScript records them. */
function directiveLines(sourceFile: ts.SourceFile): Set<number> {
  const directives =
    (sourceFile as { commentDirectives?: Array<{ range: ts.TextRange }> }).commentDirectives ?? [];
  return new Set(
    directives.map((directive) => sourceFile.getLineAndCharacterOfPosition(directive.range.end).line),
  );
}

/**
 * Applies `// @ts-ignore` and `// @ts-expect-error` to the moss findings as TypeScript applies them to its own: a
 * finding on the first code line after the directive (blank and comment lines skipped) is dropped, and an
 * `@ts-expect-error` that a finding used is no longer reported as unused. Limit and checker failures stay.
 */
function withDirectives(diagnostics: Diagnostic[], sourceFile: ts.SourceFile): Diagnostic[] {
  const directives = directiveLines(sourceFile);
  if (directives.size === 0) return diagnostics;
  const lineStarts = sourceFile.getLineStarts();
  const used = new Set<number>();
  const directiveFor = (line: number): number | undefined => {
    for (let index = line - 1; index >= 0; index--) {
      if (directives.has(index)) return index;
      const text = sourceFile.text.slice(lineStarts[index], lineStarts[index + 1]).trim();
      if (text !== "" && !text.startsWith("//")) return undefined;
    }
    return undefined;
  };
  const kept = diagnostics.filter((diagnostic) => {
    const silenceable =
      diagnostic.code >= 90000 &&
      diagnostic.code !== MOSS_DIAGNOSTIC_CODES.checkerFailed &&
      diagnostic.code !== MOSS_DIAGNOSTIC_CODES.checkLimit;
    if (!silenceable) return true;
    const directive = directiveFor(diagnostic.line - 1);
    if (directive === undefined) return true;
    used.add(directive);
    return false;
  });
  return kept.filter(
    (diagnostic) => !(diagnostic.code === UNUSED_EXPECT_ERROR && used.has(diagnostic.line - 1)),
  );
}
