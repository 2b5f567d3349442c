import { createHash } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Node, type Project, type SourceFile, ts } from "ts-morph";
import { diagnosticText, locatedMessage, MossError } from "../errors.ts";
import { analyzeModule, type ModuleAnalysis } from "./module-analysis.ts";
import { hasNodeTypes, moduleProject } from "./module-project.ts";

/** Most type errors rendered in one `module-type-error` message; the rest are counted. */
const MAX_SHOWN = 10;

/** moss-ts's own sources (engine/, container/, moss-modules/): the library, checked by its own build, not here. */
const LIBRARY_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const LIBRARY_FOLDERS = ["engine", "container", "moss-modules"].map((folder) =>
  path.join(LIBRARY_ROOT, folder, path.sep),
);

/** One type error of a context module or of a file it imports. */
export interface ModuleTypeError {
  /** The file as shown to the author: the module as given to compile(), an import relative to the working directory. */
  file: string;
  /** The file's absolute path. */
  path: string;
  line: number;
  column: number;
  code: number;
  message: string;
  /** The text of the file (for the code frame). */
  source: string;
}

/** Diagnostics that say the code uses Node (its globals, `import.meta.url`) where Node's types were not loaded. */
const NODE_HINT_CODES = new Set([2580, 2591, 2592]);
const CANNOT_FIND_NAME_CODES = new Set([2304, 2552, 2582, 2583, 2584]);
const NODE_GLOBALS =
  /^Cannot find name '(process|Buffer|global|require|module|__dirname|__filename|setTimeout|setInterval|setImmediate|clearTimeout|clearInterval|clearImmediate|queueMicrotask|structuredClone|fetch|URL|URLSearchParams|TextEncoder|TextDecoder|AbortController|AbortSignal|Blob|Headers|Request|Response|FormData|performance|console|crypto)'/;
const IMPORT_META_NODE = /^Property '(url|dirname|filename|resolve)' does not exist on type 'ImportMeta'/;

/**
 * Reads a context module (see `analyzeModule`) and type-checks it, hidden regions included, with the files of the
 * author's project it imports, reusing the program the analysis built; throws MossError `module-type-error`. Node's
 * types, costly to load, are used when the module or a file it imports needs them.
 */
export function readCheckedModule(
  absolutePath: string,
  source: string,
  displayPath: string,
): { project: Project; analysis: ModuleAnalysis } {
  let project = moduleProject(source, { node: usesNode.has(absolutePath) });
  let analysis = analyzeModule(project, absolutePath, source);
  let { errors, key } = checkedTypeErrors(analysis.sourceFile, displayPath);
  if (!hasNodeTypes(project) && errors.some(missesNodeTypes)) {
    usesNode.add(absolutePath);
    project = moduleProject(source, { node: true });
    analysis = analyzeModule(project, absolutePath, source);
    ({ errors, key } = checkedTypeErrors(analysis.sourceFile, displayPath));
  }
  if (errors.length > 0) throw moduleTypeError(errors, displayPath);
  analysis.declaredTypes.key = key;
  return { project, analysis };
}

/** Modules found to need Node's types in this process: their next compile starts with them. */
const usesNode = new Set<string>();

/**
 * Files already found clean in this process, by a hash of the project's kind, the file and every author file it
 * imports (transitively): an unchanged file is not checked again. Checking every body with each compile's fresh
 * checker is the costly part, and an edited module rarely changes the files it imports.
 */
const cleanFiles = new Set<string>();

/** The module's type errors, and the key of its declarations (its text, its imports' texts and its lib kind). */
function checkedTypeErrors(
  sourceFile: SourceFile,
  displayPath: string,
): { errors: ModuleTypeError[]; key: string } {
  const graph = moduleGraph(sourceFile);
  const kind = hasNodeTypes(sourceFile.getProject()) ? "node" : "plain";
  const keys = new Map([...graph.keys()].map((file) => [file, cleanKey(file, graph, kind)]));
  const unchecked = [...graph.keys()].filter((file) => !cleanFiles.has(keys.get(file)!));
  const errors = moduleTypeErrors(sourceFile, displayPath, unchecked);
  const failed = new Set(errors.map((error) => error.path));
  for (const file of unchecked) if (!failed.has(file.getFilePath())) cleanFiles.add(keys.get(file)!);
  return { errors, key: keys.get(sourceFile) ?? cleanKey(sourceFile, graph, kind) };
}

/** The hash of a file's text and of the texts of the author files it imports, transitively. */
function cleanKey(file: SourceFile, graph: Map<SourceFile, SourceFile[]>, kind: string): string {
  const closure = new Set([file]);
  for (const member of closure) for (const imported of graph.get(member) ?? []) closure.add(imported);
  const hash = createHash("sha256").update(kind);
  const sorted = [...closure].sort((a, b) => a.getFilePath().localeCompare(b.getFilePath()));
  for (const member of sorted) hash.update(`\0${member.getFilePath()}\0${member.getFullText()}`);
  return hash.digest("hex");
}

function missesNodeTypes(error: ModuleTypeError): boolean {
  if (NODE_HINT_CODES.has(error.code)) return true;
  if (CANNOT_FIND_NAME_CODES.has(error.code)) return NODE_GLOBALS.test(error.message);
  return error.code === 2339 && IMPORT_META_NODE.test(error.message);
}

/** The type errors of a module and of the author's files it imports, in file order. */
export function moduleTypeErrors(
  sourceFile: SourceFile,
  displayPath: string,
  files: SourceFile[] = [...moduleGraph(sourceFile).keys()],
): ModuleTypeError[] {
  const program = sourceFile.getProject().getProgram().compilerObject;
  const errors: ModuleTypeError[] = [];
  for (const file of files) {
    const compilerFile = program.getSourceFile(file.getFilePath());
    if (!compilerFile) continue;
    const shownAs = file === sourceFile ? displayPath : shownPath(file.getFilePath());
    const diagnostics = [
      ...program.getSyntacticDiagnostics(compilerFile),
      ...program.getSemanticDiagnostics(compilerFile),
    ];
    for (const diagnostic of diagnostics) {
      if (diagnostic.category !== ts.DiagnosticCategory.Error) continue;
      const position = compilerFile.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      errors.push({
        file: shownAs,
        path: file.getFilePath(),
        line: position.line + 1,
        column: position.character + 1,
        code: diagnostic.code,
        message: ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"),
        source: compilerFile.text,
      });
    }
  }
  return errors;
}

/** The MossError for a module's type errors: each in tsc form with a code frame, then a summary line. */
function moduleTypeError(errors: ModuleTypeError[], displayPath: string): MossError {
  const shown = errors
    .slice(0, MAX_SHOWN)
    .map((error) =>
      locatedMessage(
        error.file,
        error.source,
        error.line,
        error.column,
        diagnosticText("error", error.code, error.message),
      ),
    );
  const more = errors.length - MAX_SHOWN;
  if (more > 0) shown.push(`… and ${more} more type error${more === 1 ? "" : "s"}`);
  const count = `${errors.length} error${errors.length === 1 ? "" : "s"}`;
  const summary = `${displayPath}: the context module does not type-check (${count}); it was not loaded`;
  const first = errors[0]!;
  return new MossError("module-type-error", `${shown.join("\n\n")}\n\n${summary}`, {
    file: first.file,
    line: first.line,
    column: first.column,
    errors: errors.map(({ source: _source, ...error }) => error),
  });
}

/**
 * The module and the files of the author's project it imports, transitively (not `.d.ts` files, not packages in
 * node_modules, not moss-ts itself), each with the author files it imports directly.
 */
function moduleGraph(sourceFile: SourceFile): Map<SourceFile, SourceFile[]> {
  const graph = new Map<SourceFile, SourceFile[]>();
  const pending = [sourceFile];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (graph.has(file)) continue;
    const imports: SourceFile[] = [];
    graph.set(file, imports);
    for (const statement of file.getStatements()) {
      if (!Node.isImportDeclaration(statement) && !Node.isExportDeclaration(statement)) continue;
      const imported = statement.getModuleSpecifierSourceFile();
      if (!imported || !isAuthorFile(imported)) continue;
      imports.push(imported);
      pending.push(imported);
    }
  }
  return graph;
}

function isAuthorFile(file: SourceFile): boolean {
  if (file.isDeclarationFile() || file.isInNodeModules()) return false;
  const filePath = path.normalize(file.getFilePath());
  return !LIBRARY_FOLDERS.some((folder) => filePath.startsWith(folder));
}

function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative.startsWith("..") || path.isAbsolute(relative) ? file : relative;
}
