import { ts } from "ts-morph";
import { topLevelDeclarations } from "./snippet-analysis.ts";

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
