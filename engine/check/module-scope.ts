import { ts } from "ts-morph";
import { findHiddenRegions, isLineHidden } from "../module/index.ts";
import { isAugmentation, topLevelDeclarations } from "./snippet-analysis.ts";

/** The names a context module puts in scope for the model's code, and how to expose them from a scope file. */
export interface ModuleScope {
  /** Visible top-level names (imports and declarations), in source order. */
  visibleNames: string[];
  /** Text appended to the module source so that every visible name is exported under its own name. */
  exportSuffix: string;
}

/** Collects the visible top-level names of a module's source (hidden names excluded). */
export function moduleScope(
  source: string,
  hiddenNames: readonly string[],
  fileName = "module.ts",
): ModuleScope {
  const sourceFile = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const hidden = new Set(hiddenNames);
  const declared: string[] = [];
  const exported = new Set<string>();
  for (const statement of sourceFile.statements) {
    if (ts.isImportDeclaration(statement) && statement.importClause) {
      const clause = statement.importClause;
      if (clause.name) declared.push(clause.name.text);
      const bindings = clause.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) declared.push(bindings.name.text);
      if (bindings && ts.isNamedImports(bindings)) {
        for (const element of bindings.elements) declared.push(element.name.text);
      }
    } else if (ts.isImportEqualsDeclaration(statement)) {
      declared.push(statement.name.text);
    } else if (ts.isExportDeclaration(statement) && !statement.moduleSpecifier && statement.exportClause) {
      if (ts.isNamedExports(statement.exportClause)) {
        for (const element of statement.exportClause.elements) exported.add(element.name.text);
      }
    }
  }
  for (const declaration of topLevelDeclarations(sourceFile)) {
    const modifiers = ts.canHaveModifiers(declaration.statement)
      ? (ts.getModifiers(declaration.statement) ?? [])
      : [];
    const isExported = modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword);
    const isDefault = modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.DefaultKeyword);
    for (const item of declaration.names) {
      declared.push(item.name);
      if (isExported && !isDefault) {
        exported.add(item.name);
      }
    }
  }
  const visibleNames = [...new Set(declared)].filter((name) => !hidden.has(name));
  const toExport = visibleNames.filter((name) => !exported.has(name));
  const exportSuffix = toExport.length > 0 ? `\n;export { ${toExport.join(", ")} };\n` : "\n";
  return { visibleNames, exportSuffix };
}

/**
 * The module source as the checker's scope file holds it: hidden statements that would change what visible names
 * look like are blanked (newlines kept): augmentations (`declare global`, `declare module "…"`) and declarations
 * that merge into a visible name (a hidden `interface Moss { … }` or `namespace Ball { … }`). Other hidden
 * declarations stay, since visible ones may reference them, but no model code can name them.
 */
export function scopeSource(source: string, visibleNames: readonly string[], fileName = "module.ts"): string {
  const { regions, markerLines } = findHiddenRegions(source);
  if (regions.length === 0) return source;
  const sourceFile = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const visible = new Set(visibleNames);
  const blanks: Array<{ start: number; end: number }> = [];
  const declarations = new Map(topLevelDeclarations(sourceFile).map((item) => [item.statement, item.names]));
  for (const statement of sourceFile.statements) {
    const start = statement.getStart(sourceFile);
    const line = sourceFile.getLineAndCharacterOfPosition(start).line + 1;
    if (!isLineHidden(line, regions, markerLines)) continue;
    const merges = (declarations.get(statement) ?? []).some((item) => visible.has(item.name));
    if (isAugmentation(statement) || merges) blanks.push({ start, end: statement.end });
  }
  let text = source;
  for (const blank of blanks) {
    text =
      text.slice(0, blank.start) +
      text.slice(blank.start, blank.end).replace(/[^\r\n]/g, " ") +
      text.slice(blank.end);
  }
  return text;
}

/** Every identifier written on a visible line of the module: names the prompt shows, so no secret. */
export function shownIdentifiers(source: string, fileName = "module.ts"): Set<string> {
  const { regions, markerLines } = findHiddenRegions(source);
  const sourceFile = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const names = new Set<string>();
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node)) {
      const line = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile)).line + 1;
      if (!isLineHidden(line, regions, markerLines)) names.add(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return names;
}
