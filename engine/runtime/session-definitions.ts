import { ts } from "ts-morph";
import { SNIPPET_FILE } from "../snippet-file.ts";
import type { Diagnostic, MossContext } from "../types.ts";
import { prepareSnippet } from "./prepare-snippet.ts";

/** Most source text a session's definitions keep (the oldest go first, as if redefined by a `let`). */
const MAX_DEFINITIONS_CHARS = 256 * 1024;
/** Most names the hint of a definition not kept is remembered for. */
const MAX_NOT_KEPT = 1024;

/**
 * Base classes a kept class may extend besides the session's own kept classes: built-ins the bootstrap leaves as they
 * are, so evaluating `class A extends Error {}` again in a new isolate reads only intrinsics (never model code).
 */
const BUILT_IN_BASES = new Set([
  "Error",
  "TypeError",
  "RangeError",
  "SyntaxError",
  "ReferenceError",
  "EvalError",
  "URIError",
  "AggregateError",
  "Object",
  "Array",
  "Map",
  "Set",
  "WeakMap",
  "WeakSet",
  "Promise",
  "Date",
  "RegExp",
]);

/** One kept definition: the names it declares and its TypeScript source (no `export`). */
interface Definition {
  names: string[];
  text: string;
  /** Identifiers its code reads (conservative: every identifier outside a property name position). */
  reads: Set<string>;
  /** The kept class it extends, if any (it must stay defined before this one). */
  extendsName?: string;
}

/**
 * The one record of what a session's earlier snippets defined and a new isolate of the session gets again: the
 * checker is given exactly this text (`WorkerModuleChecker.define`), a new, moved, evicted or rebuilt isolate
 * evaluates it compiled before any run (`SessionSetup.definitions`), and it is saved with the context
 * (`MossContext.definitions`) so a runtime made from a saved context has it too. A definition is kept only if
 * evaluating it again runs no model code and needs no state: functions (declarations, and `const` arrow or function
 * expressions), classes without decorators, static initialisers of other than literals or functions, computed keys
 * or a base other than a kept class or a built-in, `const` of a literal, enums of literal members, interfaces, type
 * aliases and type-only namespaces. Everything else a snippet declares at top level (`let`, `var`, an object, a
 * destructuring, an ambient `declare`, and any kept definition that reads one of those) is not kept: the checker does
 * not know it in later snippets (its diagnostic says why), so a strict check never passes for a run that would fail.
 */
export class SessionDefinitions {
  #entries: Definition[] = [];
  /** Names a snippet declared at top level that are not kept, with why (for the checker's diagnostics). */
  readonly #notKept = new Map<string, string>();
  #text: string | undefined = "";
  /** The record compiled into the classic script a new isolate evaluates (see `script`). */
  #compiled: { text: string; script: string } = { text: "", script: "" };

  /** A record restored from a saved context's `definitions` text (classified again: only what may be kept stays). */
  constructor(saved?: string) {
    if (typeof saved === "string" && saved !== "") this.accept(saved);
  }

  /** The kept definitions as TypeScript source, in the order they were made (empty when none). */
  get text(): string {
    this.#text ??= this.#entries.map((entry) => entry.text).join("\n");
    return this.#text;
  }

  /** Why `name` (declared by an earlier snippet) is not available to later ones; undefined when it is not known. */
  notKept(name: string): string | undefined {
    return this.#notKept.get(name);
  }

  /** Diagnostics of a name an earlier snippet declared but the session did not keep say why. */
  hint(diagnostics: Diagnostic[]): Diagnostic[] {
    return diagnostics.map((diagnostic) => {
      if (diagnostic.code !== 2304 && diagnostic.code !== 2552) return diagnostic;
      const name = /'([^']+)'/.exec(diagnostic.message)?.[1];
      const reason = name === undefined ? undefined : this.notKept(name);
      if (reason === undefined) return diagnostic;
      return {
        ...diagnostic,
        message: `${diagnostic.message} An earlier snippet declared '${name}', but it is not kept between executes: ${reason}. Keep state in a \`moss\` data field, or define it again in this snippet.`,
      };
    });
  }

  /** A context carrying the kept definitions (none: no field). */
  into(context: MossContext): MossContext {
    const { definitions: _, ...rest } = context;
    const text = this.text;
    return text === "" ? rest : { ...rest, definitions: text };
  }

  /** The record compiled into the script a new isolate evaluates (compiled again only once the record changed). */
  async script(): Promise<string> {
    const text = this.text;
    if (this.#compiled.text === text) return this.#compiled.script;
    const prepared = text === "" ? undefined : await prepareSnippet(text);
    // Every kept definition came from a snippet that compiled; the record compiles as they did.
    const script = prepared !== undefined && "script" in prepared ? prepared.script : "";
    this.#compiled = { text, script };
    return script;
  }

  /**
   * Takes the top-level definitions of a snippet that ran: later ones replace earlier ones of the same name. Returns
   * whether the record changed. `parsed`: the snippet as `prepareSnippet` parsed it, when it did (used only if its
   * text is the snippet's), so it is not parsed twice.
   */
  accept(snippet: string, parsed?: ts.SourceFile): boolean {
    const before = this.text;
    const { made, notKept } = definitionsOf(snippet, parsed);
    const declared = new Set([...made.flatMap((entry) => entry.names), ...notKept.keys()]);
    if (declared.size === 0) return false;
    this.#entries = this.#entries.filter((entry) => !entry.names.some((name) => declared.has(name)));
    for (const name of made.flatMap((entry) => entry.names)) this.#notKept.delete(name);
    for (const [name, reason] of notKept) this.#remember(name, reason);
    this.#entries.push(...made);
    this.#settle();
    this.#text = undefined;
    return this.text !== before;
  }

  #remember(name: string, reason: string): void {
    this.#notKept.delete(name);
    this.#notKept.set(name, reason);
    if (this.#notKept.size > MAX_NOT_KEPT) this.#notKept.delete(this.#notKept.keys().next().value!);
  }

  /** Drops what can no longer be rebuilt: a definition reading a name not kept, a class before its base, the oldest past the bound. */
  #settle(): void {
    let size = this.#entries.reduce((total, entry) => total + entry.text.length + 1, 0);
    while (size > MAX_DEFINITIONS_CHARS && this.#entries.length > 0) {
      const oldest = this.#entries.shift()!;
      size -= oldest.text.length + 1;
      for (const name of oldest.names)
        this.#remember(name, "the session's definitions outgrew their bound, and this one was the oldest");
    }
    for (let changed = true; changed; ) {
      changed = false;
      const position = new Map<string, number>();
      this.#entries.forEach((entry, index) => {
        for (const name of entry.names) position.set(name, index);
      });
      const kept: Definition[] = [];
      for (const [index, entry] of this.#entries.entries()) {
        const missing = [...entry.reads].find((name) => this.#notKept.has(name) && !position.has(name));
        const base = entry.extendsName;
        const reason =
          missing !== undefined
            ? `it uses '${missing}', which is not kept`
            : base !== undefined && !BUILT_IN_BASES.has(base) && !((position.get(base) ?? index) < index)
              ? `its base class '${base}' is not a kept class defined before it`
              : undefined;
        if (reason === undefined) {
          kept.push(entry);
          continue;
        }
        for (const name of entry.names) this.#remember(name, reason);
        changed = true;
      }
      this.#entries = kept;
    }
  }
}

/** What one snippet defines at top level: the definitions it makes (in order) and the names it declares but are not kept. */
interface SnippetDefinitions {
  made: readonly Definition[];
  notKept: ReadonlyMap<string, string>;
}

/** Snippets classified lately, by text (as `prepareSnippet` keeps what it compiled): code run again is not parsed again. */
const classified = new Map<string, SnippetDefinitions>();
const CLASSIFIED_SIZE = 128;

/**
 * What `snippet` defines: a function of its text alone, so it is kept by text (the definitions are never changed
 * once made: a session's record holds them as they are). `parsed` is the snippet as `prepareSnippet` parsed it, used
 * only when its text is the snippet's.
 */
function definitionsOf(snippet: string, parsed?: ts.SourceFile): SnippetDefinitions {
  const known = classified.get(snippet);
  if (known !== undefined) {
    classified.delete(snippet);
    classified.set(snippet, known);
    return known;
  }
  const sourceFile =
    parsed !== undefined && parsed.text === snippet
      ? parsed
      : ts.createSourceFile(SNIPPET_FILE, snippet, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const made: Definition[] = [];
  const notKept = new Map<string, string>();
  const groupOf = new Map<string, Definition>();
  for (const statement of sourceFile.statements) {
    for (const found of classify(statement, sourceFile)) {
      if ("reason" in found) {
        for (const name of found.names) notKept.set(name, found.reason);
        continue;
      }
      // Overloads and merged declarations of one name in one snippet stay together.
      const group = found.names.length === 1 ? groupOf.get(found.names[0]!) : undefined;
      if (group !== undefined) {
        group.text += `\n${found.text}`;
        for (const read of found.reads) group.reads.add(read);
        continue;
      }
      made.push(found);
      for (const name of found.names) groupOf.set(name, found);
    }
  }
  const result = { made, notKept };
  classified.set(snippet, result);
  if (classified.size > CLASSIFIED_SIZE) classified.delete(classified.keys().next().value as string);
  return result;
}

type Classified = Definition | { names: string[]; reason: string };

/** The definitions one top-level statement makes, each kept or not (with why). */
function classify(statement: ts.Statement, sourceFile: ts.SourceFile): Classified[] {
  const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
  const ambient = modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.DeclareKeyword);
  const text = (node: ts.Node = statement) => sourceFile.text.slice(textStart(node, sourceFile), node.end);
  const kept = (names: string[], node: ts.Node = statement, extendsName?: string): Definition => ({
    names,
    text: text(node),
    reads: readsOf(node),
    ...(extendsName === undefined ? {} : { extendsName }),
  });
  if (ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement))
    return [kept([statement.name.text])];
  if (ts.isFunctionDeclaration(statement)) {
    if (statement.name === undefined) return [];
    const names = [statement.name.text];
    if (ambient) return [{ names, reason: "it was only declared (`declare`), never defined" }];
    return [kept(names)];
  }
  if (ts.isClassDeclaration(statement)) {
    if (statement.name === undefined) return [];
    const names = [statement.name.text];
    if (ambient) return [{ names, reason: "it was only declared (`declare`), never defined" }];
    const problem = classProblem(statement);
    if (typeof problem === "string") return [{ names, reason: problem }];
    return [kept(names, statement, problem.extendsName)];
  }
  if (ts.isEnumDeclaration(statement)) {
    const names = [statement.name.text];
    if (ambient) return [{ names, reason: "it was only declared (`declare`), never defined" }];
    const literal = statement.members.every(
      (member) => member.initializer === undefined || isLiteral(member.initializer),
    );
    return literal ? [kept(names)] : [{ names, reason: "an enum member is computed" }];
  }
  if (ts.isModuleDeclaration(statement)) {
    if (!ts.isIdentifier(statement.name)) return [];
    const names = [statement.name.text];
    return isTypeOnlyNamespace(statement)
      ? [kept(names)]
      : [{ names, reason: "a namespace with values is not kept (only one of types is)" }];
  }
  if (ts.isVariableStatement(statement)) {
    const list = statement.declarationList;
    // `using` and `await using` share bits with `const`: only the exact `const` flag is a const.
    const isConst = (list.flags & ts.NodeFlags.BlockScoped) === ts.NodeFlags.Const;
    const keyword = isConst ? "const" : (list.flags & ts.NodeFlags.Let) !== 0 ? "let" : "var";
    const result: Classified[] = [];
    for (const declaration of list.declarations) {
      const names: string[] = [];
      collectNames(declaration.name, names);
      if (names.length === 0) continue;
      if (ambient) result.push({ names, reason: "it was only declared (`declare`), never defined" });
      else if (!ts.isIdentifier(declaration.name))
        result.push({ names, reason: `it was declared by a destructuring ${keyword}` });
      else if (!isConst)
        result.push({
          names,
          reason: `it was declared with \`${keyword}\`: top-level variables hold state a new isolate cannot rebuild`,
        });
      else if (declaration.initializer === undefined || !isKeptInitializer(declaration.initializer))
        result.push({
          names,
          reason:
            "its `const` value is not a literal or a function (an object or a computed value is state a new isolate cannot rebuild)",
        });
      else
        result.push({
          names,
          text: `const ${sourceFile.text.slice(declaration.getStart(sourceFile), declaration.end)};`,
          reads: readsOf(declaration),
        });
    }
    return result;
  }
  return [];
}

/** Why a class cannot be evaluated again without running model code, or the kept class it extends (if any). */
function classProblem(node: ts.ClassDeclaration): string | { extendsName?: string } {
  if (hasDecorators(node) || node.members.some(hasDecorators)) return "it has decorators";
  let extendsName: string | undefined;
  for (const clause of node.heritageClauses ?? []) {
    if (clause.token !== ts.SyntaxKind.ExtendsKeyword) continue;
    const base = clause.types[0]?.expression;
    if (base === undefined || !ts.isIdentifier(base)) return "its base class is an expression";
    extendsName = base.text;
  }
  for (const member of node.members) {
    if (ts.isClassStaticBlockDeclaration(member)) return "it has a static block";
    if (member.name !== undefined && ts.isComputedPropertyName(member.name)) {
      const key = member.name.expression;
      if (!ts.isStringLiteral(key) && !ts.isNumericLiteral(key)) return "it has a computed member name";
    }
    const isStatic = (ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : []).some(
      (modifier) => modifier.kind === ts.SyntaxKind.StaticKeyword,
    );
    if (
      isStatic &&
      ts.isPropertyDeclaration(member) &&
      member.initializer !== undefined &&
      !isKeptInitializer(member.initializer)
    )
      return "a static field's value is not a literal or a function";
  }
  return extendsName === undefined ? {} : { extendsName };
}

function hasDecorators(node: ts.Node): boolean {
  return ts.canHaveDecorators(node) && (ts.getDecorators(node)?.length ?? 0) > 0;
}

/** A literal, an arrow function or a function expression (type assertions and parentheses around one allowed). */
function isKeptInitializer(node: ts.Expression): boolean {
  const inner = unwrap(node);
  return isLiteral(inner) || ts.isArrowFunction(inner) || ts.isFunctionExpression(inner);
}

function isLiteral(node: ts.Expression): boolean {
  const inner = unwrap(node);
  if (
    ts.isStringLiteral(inner) ||
    ts.isNumericLiteral(inner) ||
    ts.isBigIntLiteral(inner) ||
    ts.isNoSubstitutionTemplateLiteral(inner)
  )
    return true;
  if (
    inner.kind === ts.SyntaxKind.TrueKeyword ||
    inner.kind === ts.SyntaxKind.FalseKeyword ||
    inner.kind === ts.SyntaxKind.NullKeyword
  )
    return true;
  return (
    ts.isPrefixUnaryExpression(inner) &&
    (inner.operator === ts.SyntaxKind.MinusToken || inner.operator === ts.SyntaxKind.PlusToken) &&
    (ts.isNumericLiteral(inner.operand) || ts.isBigIntLiteral(inner.operand))
  );
}

function unwrap(node: ts.Expression): ts.Expression {
  let inner = node;
  while (
    ts.isParenthesizedExpression(inner) ||
    ts.isAsExpression(inner) ||
    ts.isSatisfiesExpression(inner) ||
    ts.isTypeAssertionExpression(inner) ||
    ts.isNonNullExpression(inner)
  )
    inner = inner.expression;
  return inner;
}

function isTypeOnlyNamespace(node: ts.ModuleDeclaration): boolean {
  const body = node.body;
  if (body === undefined) return false;
  if (ts.isModuleDeclaration(body)) return isTypeOnlyNamespace(body);
  if (!ts.isModuleBlock(body)) return false;
  return body.statements.every(
    (statement) =>
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      (ts.isModuleDeclaration(statement) && isTypeOnlyNamespace(statement)),
  );
}

function collectNames(name: ts.BindingName, into: string[]): void {
  if (ts.isIdentifier(name)) {
    into.push(name.text);
    return;
  }
  for (const element of name.elements) if (ts.isBindingElement(element)) collectNames(element.name, into);
}

/** Every identifier a definition's code may read (property names excluded): a superset, so nothing is missed. */
function readsOf(node: ts.Node): Set<string> {
  const reads = new Set<string>();
  const visit = (child: ts.Node): void => {
    if (ts.isIdentifier(child)) {
      const parent = child.parent;
      const propertyName =
        (ts.isPropertyAccessExpression(parent) && parent.name === child) ||
        (ts.isPropertyAssignment(parent) && parent.name === child) ||
        (ts.isQualifiedName(parent) && parent.right === child);
      if (!propertyName) reads.add(child.text);
    }
    ts.forEachChild(child, visit);
  };
  visit(node);
  return reads;
}

/** Where a statement's text starts once its `export`/`default` modifiers are skipped. */
function textStart(node: ts.Node, sourceFile: ts.SourceFile): number {
  const modifiers = ts.canHaveModifiers(node) ? (ts.getModifiers(node) ?? []) : [];
  let start = node.getStart(sourceFile);
  for (const modifier of modifiers) {
    if (modifier.kind === ts.SyntaxKind.ExportKeyword || modifier.kind === ts.SyntaxKind.DefaultKeyword)
      start = modifier.end;
  }
  return start;
}
