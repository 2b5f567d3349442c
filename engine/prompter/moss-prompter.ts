import path from "node:path";
import { type ImportDeclaration, Node, type SourceFile, ts } from "ts-morph";
import { MossError } from "../errors.ts";
import { type CompiledModule, findHiddenRegions, isLineHidden, visibleSource } from "../module/index.ts";
import { isModuleSurfaceFile } from "../module-surface.ts";
import { isNonPublicMember, renderDeclaration } from "./render-declaration.ts";

/** Reflected imports by module (see `ModuleCache`: several runtimes may share one module). */
const reflections = new WeakMap<CompiledModule, AttributeEntry[]>();
/** One entry of the attribute section. */
export interface AttributeEntry {
  name: string;
  /** Where the name comes from: the import specifier, or the declaring file relative to the module. */
  module?: string;
  prompt: string;
  /** `override`: from `__moss_attr_prompts__`; `import`: an imported name; `type`: a type reached transitively. */
  origin: "override" | "import" | "type";
}

/** Headings of the default module prompt. */
export const MODULE_SOURCE_HEADING = "The context module you work with (its visible source):";
export const ATTRIBUTES_HEADING =
  "Declarations of the names it imports and the types they use (signatures and docs; bodies are not shown):";
export const MAX_TRANSITIVE_TYPES = 60;
const MAX_TRANSITIVE_DEPTH = 4;

/** Turns a compiled context module into the prompt a model reads. Output is deterministic byte for byte. */
export class MossPrompter {
  readonly #module: CompiledModule;
  #reflected: AttributeEntry[] | undefined;

  constructor(module: CompiledModule) {
    this.#module = module;
  }

  /** The module's path as given to the compiler. */
  get modulePath(): string {
    return this.#module.displayPath;
  }

  /**
   * Reflects the imports now (the compiler calls it while the module's project is current); later renders reuse
   * the reflection and only re-run `__moss_attr_prompts__`.
   */
  async prepare(): Promise<void> {
    this.#reflected ??= this.#reflection();
  }

  /**
   * The module source; by default without hidden regions and marker lines, and without the `Moss` class's methods and
   * accessors, which model code cannot reach (`isReachableMossMember`).
   */
  async sourceCode(options: { excludeHidden?: boolean } = {}): Promise<string> {
    const { source, mossClass } = this.#module.analysis;
    if (options.excludeHidden === false) return source;
    return visibleSource(withoutDeclarations(source, mossClass?.unreachable ?? []));
  }

  /** The attribute entries as `[name, prompt]` pairs, overrides first. */
  async reflectModuleAttrs(): Promise<Array<[string, string]>> {
    return (await this.attributeEntries()).map((entry) => [entry.name, entry.prompt]);
  }

  /** The attribute entries with their origin and module. */
  async attributeEntries(): Promise<AttributeEntry[]> {
    const overrides = this.#attrPromptOverrides();
    const decided = new Set(overrides.map(([name]) => name));
    const entries: AttributeEntry[] = overrides
      .filter(([, prompt]) => prompt !== "")
      .map(([name, prompt]) => ({ name, prompt: prompt as string, origin: "override" as const }));
    this.#reflected ??= this.#reflection();
    for (const entry of this.#reflected) if (!decided.has(entry.name)) entries.push(entry);
    return entries;
  }

  /** The attribute section alone. */
  async dumpAttrsPrompt(): Promise<string> {
    return formatEntries(await this.attributeEntries());
  }

  /** The whole prompt: `__moss_module_prompt__(prompter)` when the module defines it, else source then attributes. */
  async dumpModulePrompt(): Promise<string> {
    const hook = this.#module.hooks.__moss_module_prompt__;
    if (hook) {
      const text = await hook(this);
      if (typeof text !== "string") {
        throw this.#hookShapeError("__moss_module_prompt__", `must return a string, got ${describe(text)}`);
      }
      return text;
    }
    const sections = [MODULE_SOURCE_HEADING, fenced(await this.sourceCode())];
    const attributes = await this.dumpAttrsPrompt();
    if (attributes) sections.push(ATTRIBUTES_HEADING, fenced(attributes));
    return `${sections.join("\n\n")}\n`;
  }

  #attrPromptOverrides(): Array<[string, string | null | undefined]> {
    const hook = this.#module.hooks.__moss_attr_prompts__;
    if (!hook) return [];
    const result = hook();
    if (result === null || typeof result !== "object" || !(Symbol.iterator in result)) {
      throw this.#hookShapeError(
        "__moss_attr_prompts__",
        `must return an iterable of [name, prompt], got ${describe(result)}`,
      );
    }
    const pairs: Array<[string, string | null | undefined]> = [];
    for (const item of result as Iterable<unknown>) {
      const valid =
        Array.isArray(item) &&
        typeof item[0] === "string" &&
        (item[1] === null || item[1] === undefined || typeof item[1] === "string");
      if (!valid) {
        throw this.#hookShapeError(
          "__moss_attr_prompts__",
          `yielded ${describe(item)}; expected [name: string, prompt: string | null | undefined]`,
        );
      }
      if (typeof item[1] === "string") pairs.push([item[0], item[1]]);
    }
    return pairs;
  }

  #hookShapeError(hook: string, problem: string): MossError {
    const location = this.#module.analysis.hooks.get(hook as never);
    const where = location
      ? `${this.#module.displayPath}:${location.line}:${location.column}`
      : this.#module.displayPath;
    return new MossError("hook-shape", `${where} - ${hook} ${problem}`, {
      file: this.#module.displayPath,
      hook,
    });
  }

  /** The imports' reflection depends on the module alone: runtimes sharing a cached module share it. */
  #reflection(): AttributeEntry[] {
    let entries = reflections.get(this.#module);
    if (entries === undefined) {
      entries = this.#reflectImports();
      reflections.set(this.#module, entries);
    }
    return entries;
  }

  #reflectImports(): AttributeEntry[] {
    const { analysis, locals } = this.#module;
    const used = usedIdentifiers(analysis.sourceFile, (line) =>
      isLineHidden(line, analysis.regions, analysis.markerLines),
    );
    const entries: AttributeEntry[] = [];
    const seen = new Set<Node>();
    const queue: Array<{ node: Node; depth: number }> = [];
    const reflectedNames = new Set<string>();
    for (const importDeclaration of analysis.sourceFile.getImportDeclarations()) {
      if (isLineHidden(importDeclaration.getStartLineNumber(), analysis.regions, analysis.markerLines))
        continue;
      const specifier = importDeclaration.getModuleSpecifierValue();
      for (const binding of importBindings(importDeclaration)) {
        if (!used.has(binding.local) || reflectedNames.has(binding.local)) continue;
        reflectedNames.add(binding.local);
        const runtimePrompt = promptOfValue(locals[binding.local]);
        const declarations = binding.declarations();
        for (const declaration of declarations) {
          seen.add(declaration);
          queue.push({ node: declaration, depth: 1 });
        }
        const prompt =
          runtimePrompt ??
          (binding.imported === "*"
            ? `declare const ${binding.local}: typeof import("${specifier}");`
            : declarations
                .map((declaration) => renderDeclaration(declaration))
                .filter((text): text is string => text !== undefined)
                .join("\n"));
        if (prompt) entries.push({ name: binding.local, module: specifier, prompt, origin: "import" });
      }
    }
    entries.push(...this.#reflectReferencedTypes(queue, seen, reflectedNames));
    return entries;
  }

  #reflectReferencedTypes(
    queue: Array<{ node: Node; depth: number }>,
    seen: Set<Node>,
    names: Set<string>,
  ): AttributeEntry[] {
    const entries: AttributeEntry[] = [];
    const moduleFile = this.#module.analysis.sourceFile;
    const program = this.#module.project.getProgram().compilerObject;
    for (let index = 0; index < queue.length && entries.length < MAX_TRANSITIVE_TYPES; index++) {
      const { node, depth } = queue[index]!;
      if (depth > MAX_TRANSITIVE_DEPTH) continue;
      for (const declaration of referencedDeclarations(node)) {
        if (seen.has(declaration)) continue;
        seen.add(declaration);
        const file = declaration.getSourceFile();
        if (file === moduleFile || program.isSourceFileDefaultLibrary(file.compilerNode)) continue;
        if (file.getFilePath().includes("/node_modules/@types/node/")) continue;
        const name = (declaration as { getName?: () => string | undefined }).getName?.();
        if (!name || names.has(name)) continue;
        const prompt = renderDeclaration(declaration);
        if (!prompt) continue;
        names.add(name);
        entries.push({ name, module: this.#moduleLabel(file), prompt, origin: "type" });
        queue.push({ node: declaration, depth: depth + 1 });
        if (entries.length >= MAX_TRANSITIVE_TYPES) break;
      }
    }
    return entries;
  }

  #moduleLabel(file: SourceFile): string {
    const filePath = file.getFilePath();
    if (isModuleSurfaceFile(filePath)) return "moss-ts";
    const packageMatch = filePath.match(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (packageMatch) return packageMatch[1]!;
    const relative = path.relative(path.dirname(this.#module.path), filePath);
    return relative.startsWith(".") ? relative : `./${relative}`;
  }
}

interface ImportBinding {
  local: string;
  imported: string;
  declarations: () => Node[];
}

function importBindings(importDeclaration: ImportDeclaration): ImportBinding[] {
  // One export table per import declaration: asking per imported name made large modules quadratic.
  let exports: ReadonlyMap<string, Node[]> | undefined;
  const exported = (name: string) => () => {
    exports ??= importDeclaration.getModuleSpecifierSourceFile()?.getExportedDeclarations() ?? new Map();
    return withoutOverloadDuplicates(exports.get(name) ?? []);
  };
  const bindings: ImportBinding[] = [];
  const defaultImport = importDeclaration.getDefaultImport();
  if (defaultImport)
    bindings.push({ local: defaultImport.getText(), imported: "default", declarations: exported("default") });
  const namespaceImport = importDeclaration.getNamespaceImport();
  if (namespaceImport)
    bindings.push({ local: namespaceImport.getText(), imported: "*", declarations: () => [] });
  for (const named of importDeclaration.getNamedImports()) {
    const local = named.getAliasNode()?.getText() ?? named.getName();
    bindings.push({ local, imported: named.getName(), declarations: exported(named.getName()) });
  }
  return bindings;
}

/** An overloaded function is listed once per overload and once for its implementation: keep one node. */
function withoutOverloadDuplicates(declarations: Node[]): Node[] {
  return declarations.filter(
    (declaration) =>
      !(
        Node.isFunctionDeclaration(declaration) &&
        !declaration.isImplementation() &&
        declaration.getImplementation()
      ),
  );
}

/** Identifiers used by visible code outside import declarations. */
/**
 * The source without the given declarations: a declaration alone on its lines takes those lines with it, and the
 * blank line above it, one that shares a line leaves the rest of the line. A declaration that holds a hide marker is kept:
 * removing half a region would change what the rest of the file hides.
 */
function withoutDeclarations(
  source: string,
  declarations: ReadonlyArray<{ start: number; end: number }>,
): string {
  let text = source;
  for (const { start, end } of [...declarations].sort((left, right) => right.start - left.start)) {
    if (findHiddenRegions(text.slice(start, end)).markerLines.size > 0) continue;
    let from = start;
    let to = end;
    const lineStart = text.lastIndexOf("\n", start - 1) + 1;
    const newline = text.indexOf("\n", end);
    const lineEnd = newline === -1 ? text.length : newline;
    if (text.slice(lineStart, start).trim() === "" && text.slice(end, lineEnd).trim() === "") {
      // The blank line that set the declaration apart goes with it.
      const previousLineStart = text.lastIndexOf("\n", lineStart - 2) + 1;
      from =
        lineStart > 0 && text.slice(previousLineStart, lineStart).trim() === ""
          ? previousLineStart
          : lineStart;
      to = newline === -1 ? lineEnd : newline + 1;
    }
    text = text.slice(0, from) + text.slice(to);
  }
  return text;
}

function usedIdentifiers(sourceFile: SourceFile, hidden: (line: number) => boolean): Set<string> {
  const used = new Set<string>();
  for (const identifier of sourceFile.getDescendantsOfKind(ts.SyntaxKind.Identifier)) {
    if (identifier.getFirstAncestorByKind(ts.SyntaxKind.ImportDeclaration)) continue;
    if (hidden(identifier.getStartLineNumber())) continue;
    used.add(identifier.getText());
  }
  return used;
}

/** Declarations of the named types a declaration's text refers to, in order of appearance. */
function referencedDeclarations(node: Node): Node[] {
  const result: Node[] = [];
  const references = [
    ...node.getDescendantsOfKind(ts.SyntaxKind.TypeReference).map((reference) => reference.getTypeName()),
    ...node
      .getDescendantsOfKind(ts.SyntaxKind.ExpressionWithTypeArguments)
      .map((heritage) => heritage.getExpression()),
  ].sort((a, b) => a.getStart() - b.getStart());
  for (const nameNode of references) {
    if (isInsideBody(nameNode, node)) continue;
    let symbol = nameNode.getSymbol();
    if (symbol?.isAlias()) symbol = symbol.getAliasedSymbol() ?? symbol;
    for (const declaration of symbol?.getDeclarations() ?? []) {
      if (Node.isTypeParameterDeclaration(declaration)) continue;
      result.push(declaration);
    }
  }
  return result;
}

function isInsideBody(node: Node, root: Node): boolean {
  for (let current = node.getParent(); current && current !== root; current = current.getParent()) {
    if (Node.isBlock(current)) return true;
    const parent = current.getParent();
    if (parent && Node.isPropertyDeclaration(parent) && parent.getInitializer() === current) return true;
    if (parent && Node.isClassDeclaration(parent) && isNonPublicMember(current)) return true;
  }
  return false;
}

/** A value's own prompt: static `__class_prompt__()` of a class, else `__prompt__` (string or function). */
function promptOfValue(value: unknown): string | undefined {
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return undefined;
  const holder = value as { __class_prompt__?: unknown; __prompt__?: unknown };
  if (typeof value === "function" && typeof holder.__class_prompt__ === "function") {
    return String((holder.__class_prompt__ as () => unknown).call(value));
  }
  const prompt = holder.__prompt__;
  if (typeof prompt === "string") return prompt;
  if (typeof prompt === "function") return String((prompt as () => unknown).call(value));
  return undefined;
}

/**
 * The attribute section: a `// from "<module>"` line opens each run of entries from one module, entries are
 * separated by a blank line, and an entry whose text does not declare its own name (an alias, a `__prompt__`, a
 * note) is labelled `// <name>:`. Declarations name themselves, so a tag around every entry (≈ 16% of the
 * prompt's tokens on large modules) would tell the model nothing more.
 */
function formatEntries(entries: AttributeEntry[]): string {
  const parts: string[] = [];
  let module: string | undefined;
  for (const entry of entries) {
    const lines: string[] = [];
    if (entry.module !== undefined && entry.module !== module)
      lines.push(`${MODULE_LINE_PREFIX}"${entry.module}"`);
    module = entry.module;
    if (!declaresName(entry.prompt, entry.name)) lines.push(`// ${entry.name}:`);
    lines.push(entry.prompt.trimEnd());
    parts.push(lines.join("\n"));
  }
  return parts.join("\n\n");
}

/** Opens the entries of one module in the attribute section. */
export const MODULE_LINE_PREFIX = "// from ";

const DECLARATION_KEYWORD = "(?:class|interface|type|enum|function|const|let|var|namespace)";

function declaresName(prompt: string, name: string): boolean {
  const escaped = name.replace(/[$]/g, "\\$&");
  return new RegExp(String.raw`(?:^|[\s;{}])${DECLARATION_KEYWORD}\s+${escaped}(?![\w$])`).test(prompt);
}

function fenced(text: string): string {
  return `\`\`\`typescript\n${text.trimEnd()}\n\`\`\``;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value).slice(0, 40)}`;
}
