import { ts } from "ts-morph";
import { SNIPPET_FILE } from "../snippet-file.ts";

/** A name declared at the top level of a file, with where its identifier starts and ends. */
export interface DeclaredName {
  name: string;
  start: number;
  end: number;
}

/** A top-level declaration statement and the names it declares. */
export interface TopLevelDeclaration {
  statement: ts.Statement;
  names: DeclaredName[];
  /** Offset where the statement's text starts once `export`/`default` modifiers are skipped. */
  textStart: number;
}

/** A text insertion at an offset of the original snippet (the only edit that shifts positions). */
export interface Insertion {
  at: number;
  text: string;
}

/** A finding of the snippet's syntactic pre-pass, by offset in the original snippet. */
export interface SnippetFinding {
  /** `import`: any way of naming another module; `ambient`: augmentations and triple-slash directives. */
  kind: "import" | "top-level-await" | "ambient";
  start: number;
  end: number;
}

/** A range of the snippet hidden from the checker, optionally replaced by a short text of at most its length. */
export interface Blank {
  start: number;
  end: number;
  text?: string;
}

/** A triple-slash directive (`/// <reference …>`, `/// <amd-…>`), which would make the checker read another file. */
const TRIPLE_SLASH = /^[ \t]*\/\/\/[ \t]*<(?:reference|amd-module|amd-dependency)\b[^\r\n]*/gm;

/** What the checker needs to know about a snippet before type-checking it. */
export interface SnippetAnalysis {
  sourceFile: ts.SourceFile;
  declarations: TopLevelDeclaration[];
  /** Every top-level name the snippet declares. */
  declaredNames: Set<string>;
  /** Every identifier text the snippet contains (a superset of the outer names it uses). */
  referencedNames: Set<string>;
  /**
   * Ranges the checker never sees (replaced by spaces, newlines kept; `text`, if any, written at the start):
   * import statements, type-level `import("…")`, augmentations and triple-slash directives.
   */
  blanks: Blank[];
  /** `: Moss` annotations for an untyped first parameter of `main`, in ascending order. */
  insertions: Insertion[];
  findings: SnippetFinding[];
}

/** Parses a snippet (no type information) and finds its declarations, imports and the untyped `main` parameter. */
export function analyzeSnippet(
  snippet: string,
  fileName = SNIPPET_FILE,
  mossTypeName = "Moss",
): SnippetAnalysis {
  const sourceFile = ts.createSourceFile(fileName, snippet, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const declarations = topLevelDeclarations(sourceFile);
  const declaredNames = new Set(
    declarations.flatMap((declaration) => declaration.names.map((item) => item.name)),
  );
  const blanks: Blank[] = [];
  const findings: SnippetFinding[] = [];
  for (const statement of sourceFile.statements) {
    if (isImportLike(statement)) {
      const start = statement.getStart(sourceFile);
      blanks.push({ start, end: statement.end });
      findings.push({ kind: "import", start, end: statement.end });
    }
  }
  for (const match of snippet.matchAll(TRIPLE_SLASH)) {
    const start = match.index + match[0].indexOf("/");
    const end = match.index + match[0].length;
    blanks.push({ start, end });
    findings.push({ kind: "ambient", start, end });
  }
  const referencedNames = new Set<string>();
  const visit = (node: ts.Node, topLevel: boolean): void => {
    if (ts.isIdentifier(node)) referencedNames.add(node.text);
    if (ts.isImportTypeNode(node)) {
      // `import("…").T` and `typeof import("…")`: the checker gets `any` in its place and never reads the file.
      const start = node.getStart(sourceFile);
      blanks.push({ start, end: node.end, text: "any" });
      findings.push({ kind: "import", start, end: node.end });
      return;
    }
    if (isAugmentation(node)) {
      const start = node.getStart(sourceFile);
      blanks.push({ start, end: node.end });
      findings.push({ kind: "ambient", start, end: node.end });
      return;
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      // A dynamic import would still find ambient modules (`declare module "…"` in a .d.ts): the checker sees none.
      const start = node.getStart(sourceFile);
      blanks.push({ start, end: node.end, text: "null!" });
      findings.push({ kind: "import", start, end: node.end });
      return;
    }
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === "require") {
      findings.push({ kind: "import", start: node.getStart(sourceFile), end: node.end });
    }
    if (ts.isMetaProperty(node) && node.keywordToken === ts.SyntaxKind.ImportKeyword) {
      findings.push({ kind: "import", start: node.getStart(sourceFile), end: node.end });
    }
    if (topLevel && ts.isAwaitExpression(node)) {
      findings.push({ kind: "top-level-await", start: node.getStart(sourceFile), end: node.end });
    }
    if (topLevel && ts.isForOfStatement(node) && node.awaitModifier) {
      findings.push({
        kind: "top-level-await",
        start: node.getStart(sourceFile),
        end: node.awaitModifier.end,
      });
    }
    const nextTopLevel = topLevel && !ts.isFunctionLike(node) && !ts.isClassLike(node);
    ts.forEachChild(node, (child) => visit(child, nextTopLevel));
  };
  for (const statement of sourceFile.statements) {
    if (!isImportLike(statement)) visit(statement, true);
  }
  blanks.sort((a, b) => a.start - b.start);
  findings.sort((a, b) => a.start - b.start);
  return {
    sourceFile,
    declarations,
    declaredNames,
    referencedNames,
    blanks,
    insertions: mainParameterInsertions(sourceFile, mossTypeName),
    findings,
  };
}

function isImportLike(statement: ts.Statement): boolean {
  return (
    ts.isImportDeclaration(statement) ||
    (ts.isImportEqualsDeclaration(statement) && ts.isExternalModuleReference(statement.moduleReference)) ||
    (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined)
  );
}

/** `declare global { … }` and `declare module "…" { … }`: declarations that change other files' declarations. */
export function isAugmentation(node: ts.Node): boolean {
  return (
    ts.isModuleDeclaration(node) &&
    (ts.isStringLiteral(node.name) || (node.flags & ts.NodeFlags.GlobalAugmentation) !== 0)
  );
}

/** The declaration statements at the top level of a file and the names each declares. */
export function topLevelDeclarations(sourceFile: ts.SourceFile): TopLevelDeclaration[] {
  const result: TopLevelDeclaration[] = [];
  for (const statement of sourceFile.statements) {
    const names: DeclaredName[] = [];
    const add = (identifier: ts.Identifier | ts.StringLiteral | undefined): void => {
      if (identifier && ts.isIdentifier(identifier)) {
        names.push({ name: identifier.text, start: identifier.getStart(sourceFile), end: identifier.end });
      }
    };
    if (
      ts.isFunctionDeclaration(statement) ||
      ts.isClassDeclaration(statement) ||
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      ts.isEnumDeclaration(statement)
    ) {
      add(statement.name);
    } else if (
      ts.isModuleDeclaration(statement) &&
      ts.isIdentifier(statement.name) &&
      !isAugmentation(statement)
    ) {
      add(statement.name);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations)
        collectBindingNames(declaration.name, add);
    }
    if (names.length === 0) continue;
    result.push({ statement, names, textStart: textStartAfterExport(statement, sourceFile) });
  }
  return result;
}

function collectBindingNames(name: ts.BindingName, add: (identifier: ts.Identifier) => void): void {
  if (ts.isIdentifier(name)) {
    add(name);
    return;
  }
  for (const element of name.elements) {
    if (ts.isBindingElement(element)) collectBindingNames(element.name, add);
  }
}

function textStartAfterExport(statement: ts.Statement, sourceFile: ts.SourceFile): number {
  const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
  let start = statement.getStart(sourceFile);
  for (const modifier of modifiers) {
    if (modifier.kind === ts.SyntaxKind.ExportKeyword || modifier.kind === ts.SyntaxKind.DefaultKeyword) {
      start = modifier.end;
    }
  }
  return start;
}

/** Where to insert `: Moss` when `main`'s first parameter has no type (function or arrow/function expression). */
function mainParameterInsertions(sourceFile: ts.SourceFile, mossTypeName: string): Insertion[] {
  const insertions: Insertion[] = [];
  const annotate = (fn: ts.SignatureDeclarationBase): void => {
    const parameter = fn.parameters[0];
    if (!parameter || parameter.type || parameter.dotDotDotToken) return;
    const nameEnd = parameter.questionToken?.end ?? parameter.name.end;
    const annotation = `: ${mossTypeName}`;
    if (ts.isArrowFunction(fn) && fn.parameters.length === 1 && !hasParenthesis(fn, sourceFile)) {
      insertions.push({ at: parameter.getStart(sourceFile), text: "(" });
      insertions.push({ at: nameEnd, text: `${annotation})` });
    } else {
      insertions.push({ at: nameEnd, text: annotation });
    }
  };
  for (const statement of sourceFile.statements) {
    if (ts.isFunctionDeclaration(statement) && statement.name?.text === "main" && statement.body) {
      annotate(statement);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) {
        if (!ts.isIdentifier(declaration.name) || declaration.name.text !== "main" || declaration.type)
          continue;
        let initializer = declaration.initializer;
        while (initializer && ts.isParenthesizedExpression(initializer)) initializer = initializer.expression;
        if (initializer && (ts.isArrowFunction(initializer) || ts.isFunctionExpression(initializer))) {
          annotate(initializer);
        }
      }
    }
  }
  return insertions;
}

function hasParenthesis(fn: ts.ArrowFunction, sourceFile: ts.SourceFile): boolean {
  const first = fn.parameters[0];
  if (!first) return true;
  const before = sourceFile.text.slice(fn.getStart(sourceFile), first.getStart(sourceFile));
  return before.includes("(");
}

/** Applies blanks (same length) and insertions to the snippet text. */
export function applySnippetEdits(snippet: string, analysis: SnippetAnalysis): string {
  let text = snippet;
  for (const blank of analysis.blanks) {
    const blanked = text.slice(blank.start, blank.end).replace(/[^\r\n]/g, " ");
    const replaced = blank.text ? blank.text + blanked.slice(blank.text.length) : blanked;
    text = text.slice(0, blank.start) + replaced + text.slice(blank.end);
  }
  let result = "";
  let cursor = 0;
  for (const insertion of analysis.insertions) {
    result += text.slice(cursor, insertion.at) + insertion.text;
    cursor = insertion.at;
  }
  return result + text.slice(cursor);
}

/** Maps an offset of the edited snippet back to the original snippet. */
export function originalOffset(edited: number, insertions: readonly Insertion[]): number {
  let shift = 0;
  for (const insertion of insertions) {
    const insertedAt = insertion.at + shift;
    if (edited < insertedAt) break;
    if (edited < insertedAt + insertion.text.length) return insertion.at;
    shift += insertion.text.length;
  }
  return edited - shift;
}
