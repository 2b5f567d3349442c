import { ts } from "ts-morph";
import { MOSS_DIAGNOSTIC_CODES } from "../diagnostic-codes.ts";
import {
  isReachableGlobalName,
  isReachableMember,
  isReachableMossMember,
  MOSS_NAME_PREFIX,
} from "../membrane/index.ts";
import type { Diagnostic } from "../types.ts";
import { originalOffset, type SnippetAnalysis } from "./snippet-analysis.ts";

/*
 * The checker's typed pass: what moss-ts finds in a snippet with TypeScript's types beside TypeScript's own
 * diagnostics, because the sandbox differs from what the types say. A service class constructed or extended, a
 * member the visibility rule hides (of the module's `Moss` or of any host class), a `__moss_` name the snippet did
 * not define, a Node.js or web global the sandbox lacks, a `console` method it lacks, a Promise not awaited. The
 * ModuleChecker runs it after TypeScript's semantic diagnostics, on a snippet without syntax errors.
 */

/** The class a context module declares and model code receives as `moss`. */
export const MOSS_NAME = "Moss";

/** The files of one checker's program that hold the snippet's side, not the module's or a package's code. */
export interface CheckerFiles {
  /** The scope file: the context module's source with its visible names exported. */
  scope: string;
  /** The definitions of earlier snippets of the session. */
  previous: string;
  /** The snippet with its prelude. */
  snippet: string;
  /** The sandbox's globals (sandbox-globals.d.ts, at a path without a host folder). */
  sandboxGlobals: string;
}

/** Adds one diagnostic at an offset of the model's snippet. */
export type PushFinding = (
  code: number,
  message: string,
  start: number,
  severity: Diagnostic["severity"],
) => void;

/** Methods of the sandbox's `console` (as sandbox-globals.d.ts declares them). */
const CONSOLE_METHODS = new Set(["log", "info", "warn", "error", "debug"]);
/** Node.js and web globals the sandbox does not have, whether or not some `.d.ts` in the program declares them. */
const HOST_GLOBALS = new Set([
  "process",
  "require",
  "module",
  "exports",
  "__dirname",
  "__filename",
  "Buffer",
  "global",
  "setTimeout",
  "setInterval",
  "setImmediate",
  "clearTimeout",
  "clearInterval",
  "clearImmediate",
  "queueMicrotask",
  "structuredClone",
  "fetch",
  "URL",
  "URLSearchParams",
  "TextEncoder",
  "TextDecoder",
  "AbortController",
  "AbortSignal",
  "Blob",
  "File",
  "FormData",
  "Headers",
  "Request",
  "Response",
  "performance",
  "crypto",
  "atob",
  "btoa",
  "EventTarget",
  "Event",
  "MessageChannel",
  "MessagePort",
  "BroadcastChannel",
  "WebSocket",
  "navigator",
  "ReadableStream",
  "WritableStream",
  "TransformStream",
  "NodeJS",
]);
/** ES globals the sandbox removes (their memory escapes the isolate's limit). */
const REMOVED_GLOBALS = new Set([
  "WebAssembly",
  "SharedArrayBuffer",
  "Atomics",
  "WeakRef",
  "FinalizationRegistry",
]);

/** Whether a name is a Node.js or web global the sandbox lacks, or an ES global it removes. */
export function isHostGlobalName(name: string): boolean {
  return HOST_GLOBALS.has(name) || REMOVED_GLOBALS.has(name);
}

/** The typed pass of one ModuleChecker: its files, the module's hidden names and its service classes. */
export class TypedFindings {
  readonly #files: CheckerFiles;
  readonly #hiddenNames: ReadonlySet<string>;
  readonly #serviceClasses: ReadonlySet<string>;

  constructor(files: CheckerFiles, hiddenNames: ReadonlySet<string>, serviceClasses: ReadonlySet<string>) {
    this.#files = files;
    this.#hiddenNames = hiddenNames;
    this.#serviceClasses = serviceClasses;
  }

  /** Pushes the findings of the typed pass over the snippet's statements (after the prelude, at `offset`). */
  push(
    program: ts.Program,
    sourceFile: ts.SourceFile,
    offset: number,
    analysis: SnippetAnalysis,
    push: PushFinding,
  ): void {
    const checker = program.getTypeChecker();
    const toOriginal = (node: ts.Node): number =>
      originalOffset(node.getStart(sourceFile) - offset, analysis.insertions);
    const visit = (node: ts.Node): void => {
      if (ts.isIdentifier(node) && this.#isServiceConstruction(checker, node)) {
        push(
          MOSS_DIAGNOSTIC_CODES.serviceConstruction,
          `${node.text} is a service class: model code cannot construct it (or extend it); use the instance on moss.`,
          toOriginal(node),
          "error",
        );
      }
      const reached = reachedMember(node, checker);
      const mossMember = reached && this.#unreachableMossMember(checker, reached);
      if (reached && mossMember) {
        push(
          MOSS_DIAGNOSTIC_CODES.unreachableMember,
          `'${reached.name}' is a${mossMember === "method" ? " method" : "n accessor"} of Moss: model code cannot reach it (moss holds only the data fields and services the prompt shows).`,
          toOriginal(reached.at),
          "error",
        );
      } else if (reached && this.#isUnreachableMember(program, checker, reached)) {
        push(
          MOSS_DIAGNOSTIC_CODES.unreachableMember,
          `'${reached.name}' is not reachable from model code: the sandbox does not expose this member of a host object. Use the members the prompt shows.`,
          toOriginal(reached.at),
          "error",
        );
      } else if (reached && this.#isMossName(checker, reached.name, reached.at, reached.receiver)) {
        push(MOSS_DIAGNOSTIC_CODES.mossName, mossNameMessage(reached.name), toOriginal(reached.at), "error");
      }
      if (
        ts.isIdentifier(node) &&
        isFreeName(node) &&
        this.#isMossName(checker, node.text, node, undefined)
      ) {
        push(MOSS_DIAGNOSTIC_CODES.mossName, mossNameMessage(node.text), toOriginal(node), "error");
      }
      if (ts.isIdentifier(node) && this.#isHostGlobal(checker, node)) {
        push(MOSS_DIAGNOSTIC_CODES.hostGlobal, hostGlobalMessage(node.text), toOriginal(node), "error");
      } else if (
        ts.isIdentifier(node) &&
        node.text === "console" &&
        ts.isPropertyAccessExpression(node.parent) &&
        node.parent.expression === node &&
        !CONSOLE_METHODS.has(node.parent.name.text)
      ) {
        push(
          MOSS_DIAGNOSTIC_CODES.hostGlobal,
          `'console.${node.parent.name.text}' is not available in the sandbox: use console.${[...CONSOLE_METHODS].join(", console.")}.`,
          toOriginal(node.parent.name),
          "error",
        );
      }
      if (ts.isExpressionStatement(node)) {
        let expression = node.expression;
        while (ts.isParenthesizedExpression(expression)) expression = expression.expression;
        if (
          ts.isCallExpression(expression) &&
          isPromiseLike(checker, checker.getTypeAtLocation(expression))
        ) {
          push(
            MOSS_DIAGNOSTIC_CODES.floatingPromise,
            "This call returns a Promise that is not awaited: add `await`, or the run may end before it finishes.",
            toOriginal(expression),
            "warning",
          );
        }
      }
      ts.forEachChild(node, visit);
    };
    for (const statement of sourceFile.statements) {
      if (statement.end > offset) visit(statement);
    }
  }

  /** `new X(…)` or `extends X` where X is the module's service class (not a name the snippet declared). */
  #isServiceConstruction(checker: ts.TypeChecker, identifier: ts.Identifier): boolean {
    if (!this.#serviceClasses.has(identifier.text)) return false;
    const parent = identifier.parent;
    const constructs =
      (ts.isNewExpression(parent) && parent.expression === identifier) ||
      (ts.isExpressionWithTypeArguments(parent) &&
        parent.expression === identifier &&
        ts.isHeritageClause(parent.parent) &&
        parent.parent.token === ts.SyntaxKind.ExtendsKeyword &&
        ts.isClassLike(parent.parent.parent));
    if (!constructs) return false;
    let symbol = checker.getSymbolAtLocation(identifier);
    // The snippet's prelude imports the module's names: an alias stands for the module's declaration.
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    const declarations = symbol?.declarations ?? [];
    return !declarations.some((declaration) => declaration.getSourceFile().fileName === this.#files.snippet);
  }

  /**
   * The kind of a method or accessor of the module's own `Moss` class that the snippet names: the visibility rule
   * (`isReachableMossMember`) keeps it from model code, the sandbox's `moss` has no such member.
   */
  #unreachableMossMember(checker: ts.TypeChecker, reached: ReachedMember): "method" | "accessor" | undefined {
    const receiver = checker.getApparentType(
      checker.getNonNullableType(checker.getTypeAtLocation(reached.receiver)),
    );
    const parts = receiver.isUnionOrIntersection() ? receiver.types : [receiver];
    for (const part of parts) {
      for (const declaration of checker.getPropertyOfType(part, reached.name)?.declarations ?? []) {
        const kind = this.#unreachableMossDeclaration(declaration);
        if (kind !== undefined) return kind;
      }
    }
    return undefined;
  }

  /**
   * The kind of a declaration that is a method or accessor of the module's own `Moss` class which looks reachable (a
   * public instance member) but is not, by `isReachableMossMember`; else undefined.
   */
  #unreachableMossDeclaration(declaration: ts.Declaration): "method" | "accessor" | undefined {
    const owner = declaration.parent;
    const isMossClass =
      ts.isClassDeclaration(owner) &&
      owner.name?.text === MOSS_NAME &&
      owner.parent.kind === ts.SyntaxKind.SourceFile &&
      owner.getSourceFile().fileName === this.#files.scope;
    if (!isMossClass || !ts.isClassElement(declaration) || declaration.name === undefined) return undefined;
    const kind = ts.isMethodDeclaration(declaration)
      ? "method"
      : ts.isGetAccessorDeclaration(declaration) || ts.isSetAccessorDeclaration(declaration)
        ? "accessor"
        : "field";
    const flags = ts.getCombinedModifierFlags(declaration);
    const member = {
      name: declaration.name.getText(),
      kind,
      static: (flags & ts.ModifierFlags.Static) !== 0,
      private: (flags & ts.ModifierFlags.Private) !== 0,
      protected: (flags & ts.ModifierFlags.Protected) !== 0,
    } as const;
    // A private or `_` member has its own answer (TypeScript's, or unreachableMember's).
    return kind !== "field" && isReachableMember(member) && !isReachableMossMember(member) ? kind : undefined;
  }

  /**
   * Whether a "Did you mean '…'?" diagnostic suggests a method or accessor of the module's `Moss` class: TypeScript
   * points its "'…' is declared here" at the suggested declaration, which the prompt does not show.
   */
  suggestsUnreachableMossMember(diagnostic: ts.Diagnostic): boolean {
    for (const related of diagnostic.relatedInformation ?? []) {
      if (related.file?.fileName !== this.#files.scope || related.start === undefined) continue;
      const mossClass = related.file.statements.find(
        (statement): statement is ts.ClassDeclaration =>
          ts.isClassDeclaration(statement) && statement.name?.text === MOSS_NAME,
      );
      const member = mossClass?.members.find(
        (candidate) => candidate.name !== undefined && candidate.name.getStart() === related.start,
      );
      if (member !== undefined && this.#unreachableMossDeclaration(member) !== undefined) return true;
    }
    return false;
  }

  /**
   * Whether the snippet names a member of a host-declared class (the module's or a package's, not the snippet's own)
   * that the one visibility rule (membrane/visibility.ts) hides: the isolate's proxy and the host half refuse it.
   */
  #isUnreachableMember(program: ts.Program, checker: ts.TypeChecker, reached: ReachedMember): boolean {
    // The scope file holds the context module's own source: it is host-declared; the snippet's files are not.
    const own = new Set([this.#files.previous, this.#files.snippet, this.#files.sandboxGlobals]);
    const isHostFile = (file: ts.SourceFile): boolean =>
      !own.has(file.fileName) && !program.isSourceFileDefaultLibrary(file);
    let receiver = checker.getTypeAtLocation(reached.receiver);
    receiver = checker.getApparentType(checker.getNonNullableType(receiver));
    const parts = receiver.isUnionOrIntersection() ? receiver.types : [receiver];
    for (const part of parts) {
      const hostClass = (part.getSymbol()?.declarations ?? []).some(
        (declaration) => ts.isClassLike(declaration) && isHostFile(declaration.getSourceFile()),
      );
      if (!hostClass) continue;
      const member = checker.getPropertyOfType(part, reached.name);
      const declarations = member?.declarations ?? [];
      // A member only the snippet declares (its own subclass's or merged member) is the snippet's own object.
      if (declarations.length > 0 && declarations.every((node) => own.has(node.getSourceFile().fileName)))
        continue;
      const flags = declarations.reduce((all, node) => all | ts.getCombinedModifierFlags(node), 0);
      const reachable = isReachableMember({
        name: reached.name,
        private: (flags & ts.ModifierFlags.Private) !== 0,
        protected: (flags & ts.ModifierFlags.Protected) !== 0,
      });
      if (!reachable) return true;
    }
    return false;
  }

  /**
   * A `__moss_` name (visibility.ts's `isReachableGlobalName`) that the snippet uses without defining it: a free name
   * or a member the snippet's own code (this snippet or an accepted one) does not declare. An ambient (`declare`)
   * declaration defines nothing at run time. The name of a declaration itself is not a use.
   */
  #isMossName(checker: ts.TypeChecker, name: string, at: ts.Node, receiver: ts.Node | undefined): boolean {
    if (isReachableGlobalName(name)) return false;
    let declarations: ts.Declaration[];
    if (receiver === undefined) {
      const parent = at.parent;
      if (ts.getNameOfDeclaration(parent as ts.Declaration) === at) return false;
      declarations = checker.getSymbolAtLocation(at)?.declarations ?? [];
      // A name the module hides, and nothing else declares, has its own diagnostic (hiddenName).
      if (declarations.length === 0 && this.#hiddenNames.has(name)) return false;
    } else {
      const type = checker.getApparentType(checker.getNonNullableType(checker.getTypeAtLocation(receiver)));
      const parts = type.isUnionOrIntersection() ? type.types : [type];
      declarations = parts.flatMap((part) => checker.getPropertyOfType(part, name)?.declarations ?? []);
      // A key of the snippet's own dictionary (`Record<string, T>`): nothing of moss-ts is reached through it.
      if (declarations.length === 0 && parts.every((part) => part.getStringIndexType() !== undefined))
        return false;
    }
    const own = new Set([this.#files.previous, this.#files.snippet]);
    return !declarations.some(
      (declaration) => own.has(declaration.getSourceFile().fileName) && !isAmbient(declaration),
    );
  }

  /**
   * A free name the sandbox does not have: a Node.js or web global (by name, whatever declares it), or a global
   * that only some package's `.d.ts` declares (the program holds them when the context module imports it).
   */
  #isHostGlobal(checker: ts.TypeChecker, identifier: ts.Identifier): boolean {
    if (!isFreeName(identifier)) return false;
    const declarations = checker.getSymbolAtLocation(identifier)?.declarations ?? [];
    if (declarations.length === 0) return false;
    const own = new Set([
      this.#files.scope,
      this.#files.previous,
      this.#files.snippet,
      this.#files.sandboxGlobals,
    ]);
    const files = declarations.map((declaration) => declaration.getSourceFile().fileName);
    if (files.some((fileName) => own.has(fileName))) return false;
    const name = identifier.text;
    if (isHostGlobalName(name)) return true;
    return files.every((fileName) => fileName.includes("/node_modules/"));
  }
}

/** A member the snippet reaches by a name it writes out, on a receiver expression. */
interface ReachedMember {
  name: string;
  receiver: ts.Node;
  /** Where to point the diagnostic (the member's name as written). */
  at: ts.Node;
}

/**
 * The member a node reaches by a name it spells: `a.b`, `a?.b`, `a["b"]` (or a key whose type is one string
 * literal), `"b" in a`, a `{ b }` binding pattern destructuring `a`, or `({ b } = a)`.
 */
function reachedMember(node: ts.Node, checker: ts.TypeChecker): ReachedMember | undefined {
  if (ts.isPropertyAccessExpression(node)) {
    return { name: node.name.text, receiver: node.expression, at: node.name };
  }
  if (ts.isElementAccessExpression(node)) {
    const name = keyName(node.argumentExpression, checker);
    return name === undefined ? undefined : { name, receiver: node.expression, at: node.argumentExpression };
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InKeyword) {
    const name = keyName(node.left, checker);
    return name === undefined ? undefined : { name, receiver: node.right, at: node.left };
  }
  if (ts.isBindingElement(node) && ts.isObjectBindingPattern(node.parent) && !node.dotDotDotToken) {
    const key = node.propertyName ?? node.name;
    const name = ts.isIdentifier(key) || isLiteralKey(key) ? key.text : undefined;
    if (name === undefined) return undefined;
    return { name, receiver: node.parent, at: key };
  }
  if (
    (ts.isPropertyAssignment(node) || ts.isShorthandPropertyAssignment(node)) &&
    ts.isObjectLiteralExpression(node.parent)
  ) {
    let target: ts.Node = node.parent;
    while (ts.isParenthesizedExpression(target.parent)) target = target.parent;
    const assignment = target.parent;
    if (
      !ts.isBinaryExpression(assignment) ||
      assignment.operatorToken.kind !== ts.SyntaxKind.EqualsToken ||
      assignment.left !== target
    ) {
      return undefined;
    }
    const name = ts.isIdentifier(node.name) || isLiteralKey(node.name) ? node.name.text : undefined;
    return name === undefined ? undefined : { name, receiver: assignment.right, at: node.name };
  }
  return undefined;
}

/** The name a key expression spells: a literal, or an expression whose type is one string literal. */
function keyName(key: ts.Expression, checker: ts.TypeChecker): string | undefined {
  if (isLiteralKey(key)) return key.text;
  const type = checker.getTypeAtLocation(key);
  return type.isStringLiteral() ? type.value : undefined;
}

function isLiteralKey(
  node: ts.Node,
): node is ts.StringLiteral | ts.NoSubstitutionTemplateLiteral | ts.NumericLiteral {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isNumericLiteral(node);
}

/** An identifier that names something by itself (not a member, a property key or a declaration's name). */
function isFreeName(identifier: ts.Identifier): boolean {
  const parent = identifier.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === identifier) return false;
  return !(
    ts.isTypeReferenceNode(parent) ||
    ts.isQualifiedName(parent) ||
    ts.isTypeQueryNode(parent) ||
    ts.isExpressionWithTypeArguments(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isBindingElement(parent) ||
    ts.isMethodDeclaration(parent) ||
    ts.isPropertyDeclaration(parent) ||
    ts.isPropertySignature(parent)
  );
}

/** Declared with `declare`, or inside a `declare` declaration: nothing of it exists at run time. */
function isAmbient(node: ts.Node): boolean {
  for (let current: ts.Node | undefined = node; current !== undefined; current = current.parent) {
    if ((ts.getCombinedModifierFlags(current as ts.Declaration) & ts.ModifierFlags.Ambient) !== 0)
      return true;
  }
  return false;
}

function mossNameMessage(name: string): string {
  return `'${name}' is not available to your code: names starting with ${MOSS_NAME_PREFIX} belong to moss-ts (the context module's hooks), and the sandbox defines none of them. Use moss and the names the prompt shows.`;
}

export function hostGlobalMessage(name: string): string {
  return REMOVED_GLOBALS.has(name)
    ? `'${name}' is not available in the sandbox.`
    : `'${name}' is not available in the sandbox (it is a Node.js global): use moss and the names of the context module.`;
}

function isPromiseLike(checker: ts.TypeChecker, type: ts.Type): boolean {
  const parts = type.isUnion() ? type.types : [type];
  return parts.some((part) => {
    const then = checker.getPropertyOfType(part, "then");
    return (
      then !== undefined &&
      (part.getSymbol()?.getName() === "Promise" || part.getSymbol()?.getName() === "PromiseLike")
    );
  });
}
