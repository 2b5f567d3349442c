import { builtinModules } from "node:module";
import path from "node:path";
import {
  type ClassDeclaration,
  type ImportDeclaration,
  Node,
  type Project,
  type PropertyDeclaration,
  type SourceFile,
  type Symbol as TsSymbol,
  type Type,
  ts,
} from "ts-morph";
import { diagnosticText, locatedMessage, MossError } from "../errors.ts";
import {
  isMossOwnMember,
  isReachableMember,
  isReachableMossMember,
  MOSS_OWN_MEMBERS,
} from "../membrane/index.ts";
import { findHiddenRegions, type HiddenRegion, isLineHidden } from "./hidden-regions.ts";
import { MODULE_SURFACE_PATH } from "./module-project.ts";

/** The lifecycle hooks a context module may export. */
export const HOOK_NAMES = [
  "__moss_compile__",
  "__moss_compiled__",
  "__moss_attr_prompts__",
  "__moss_module_prompt__",
  "__moss_exec__",
  "__moss_test_cases__",
  "__moss_policy__",
  "__moss_test_setup__",
] as const;
export type HookName = (typeof HOOK_NAMES)[number];

/** How a service field is looked up in the container. */
export type TokenSpec =
  /** The class (or abstract class) value named `name` in the module's scope. */
  | { kind: "class"; name: string }
  /** A string token: an interface or type alias name, or a `@token` override. */
  | { kind: "string"; name: string };

/** One field of the module's `Moss` class, classified statically. */
export interface MossField {
  name: string;
  kind: "service" | "data";
  token?: TokenSpec;
  optional: boolean;
  hasInitializer: boolean;
  typeText: string;
  line: number;
  column: number;
  /** For services: the public members of the declared type, the only ones model code may reach. */
  members?: string[];
}

/** A method or accessor of the module's `Moss` class that model code cannot reach (see `isReachableMossMember`). */
export interface UnreachableMossMember {
  name: string;
  kind: "method" | "accessor";
  line: number;
  column: number;
  /** Offsets in the module's source of the declaration, its JSDoc included: what the prompt leaves out. */
  start: number;
  end: number;
}

/** A top-level name of the module. */
export interface TopLevelName {
  name: string;
  kind: "import" | "function" | "class" | "variable" | "enum" | "interface" | "type" | "namespace";
  /** Whether the name has a run-time value (not type-only). */
  value: boolean;
  hidden: boolean;
  line: number;
  /** For imports: the module specifier and the imported name (`default`, `*` for a namespace import). */
  moduleSpecifier?: string;
  importedName?: string;
  /** For visible values: public members of the value's type (static members of a class). */
  members?: string[];
}

/** Everything the compiler and prompter need to know about a module, read statically with ts-morph. */
export interface ModuleAnalysis {
  path: string;
  source: string;
  sourceFile: SourceFile;
  regions: HiddenRegion[];
  markerLines: Set<number>;
  names: TopLevelName[];
  hooks: Map<HookName, { line: number; column: number }>;
  mossClass?: {
    line: number;
    fields: MossField[];
    /**
     * Visible public methods and accessors of the class: `isReachableMossMember` keeps them from model code, so the
     * prompt leaves them out, the checker refuses them and the compile warns the author.
     */
    unreachable: UnreachableMossMember[];
  };
  /**
   * Declared types (compile-time checker types) of the visible value names and of the `Moss` fields: the membrane
   * exposes a handle only as far as its declared type goes (see `DeclaredTypes`).
   */
  declaredTypes: {
    /** The program and checker these types belong to (a later program would not know them). */
    program: ts.Program;
    names: Map<string, ts.Type>;
    fields: Map<string, ts.Type>;
    /** Declared types of the data fields: a stored value must fit its field's (see `restoreContext`). */
    data: Map<string, ts.Type>;
    /**
     * Set by `readCheckedModule`: a hash of the module's text, the author files it imports and its lib kind. Two
     * analyses with one key declare the same types, so their runtimes share one resolution (`moduleDeclarations`).
     */
    key?: string;
  };
}

const MOSS_CLASS_NAME = "Moss";

/** Reads a module (the file, or `code` instead of it) into `project` and analyses it; throws MossError on bad input. */
export function analyzeModule(project: Project, modulePath: string, code: string): ModuleAnalysis {
  const sourceFile = project.createSourceFile(modulePath, code, { overwrite: true });
  reportSyntaxErrors(project, sourceFile, modulePath, code);
  const { regions, markerLines } = findHiddenRegions(code);
  const hiddenAt = (node: Node) => isLineHidden(node.getStartLineNumber(), regions, markerLines);
  const names: TopLevelName[] = [];
  const hooks = new Map<HookName, { line: number; column: number }>();

  for (const importDeclaration of sourceFile.getImportDeclarations()) {
    checkImportResolves(importDeclaration, modulePath, code);
    collectImportNames(importDeclaration, hiddenAt(importDeclaration), names);
  }
  for (const statement of sourceFile.getStatements()) {
    const hidden = hiddenAt(statement);
    const line = statement.getStartLineNumber();
    if (Node.isFunctionDeclaration(statement) && statement.getName()) {
      names.push({ name: statement.getName()!, kind: "function", value: true, hidden, line });
    } else if (Node.isClassDeclaration(statement) && statement.getName()) {
      names.push({ name: statement.getName()!, kind: "class", value: true, hidden, line });
    } else if (Node.isEnumDeclaration(statement)) {
      names.push({ name: statement.getName(), kind: "enum", value: !statement.isConstEnum(), hidden, line });
    } else if (Node.isInterfaceDeclaration(statement)) {
      names.push({ name: statement.getName(), kind: "interface", value: false, hidden, line });
    } else if (Node.isTypeAliasDeclaration(statement)) {
      names.push({ name: statement.getName(), kind: "type", value: false, hidden, line });
    } else if (Node.isModuleDeclaration(statement)) {
      names.push({ name: statement.getName(), kind: "namespace", value: true, hidden, line });
    } else if (Node.isVariableStatement(statement)) {
      for (const declaration of statement.getDeclarations()) {
        const nameNode = declaration.getNameNode();
        const bound = Node.isIdentifier(nameNode)
          ? [nameNode.getText()]
          : nameNode.getDescendantsOfKind(ts.SyntaxKind.Identifier).map((identifier) => identifier.getText());
        for (const name of bound) names.push({ name, kind: "variable", value: true, hidden, line });
      }
    }
  }
  for (const [name, declarations] of sourceFile.getExportedDeclarations()) {
    if (!(HOOK_NAMES as readonly string[]).includes(name)) continue;
    const declaration = declarations[0];
    if (declaration) {
      const position = sourceFile.getLineAndColumnAtPos(declaration.getStart());
      hooks.set(name as HookName, { line: position.line, column: position.column });
    }
  }

  const declaredTypes: ModuleAnalysis["declaredTypes"] = {
    program: project.getProgram().compilerObject,
    names: new Map(),
    fields: new Map(),
    data: new Map(),
  };
  for (const name of names) {
    if (!name.value || name.hidden) continue;
    const node = sourceFile.getLocal(name.name)?.getDeclarations()[0];
    if (!node) continue;
    const type = node.getType();
    name.members = publicMembers(type);
    // A class declaration's own type is its instance type; the value the name holds is the class (`typeof C`).
    const valueType = Node.isClassDeclaration(node)
      ? (node.getSymbol()?.getTypeAtLocation(node) ?? type)
      : type;
    declaredTypes.names.set(name.name, valueType.compilerType);
  }

  const mossDeclaration = sourceFile.getClass(MOSS_CLASS_NAME);
  const analysis: ModuleAnalysis = {
    path: modulePath,
    source: code,
    sourceFile,
    regions,
    markerLines,
    names,
    hooks,
    declaredTypes,
  };
  if (mossDeclaration) {
    checkOwnMemberNames(project, mossDeclaration, modulePath, code);
    analysis.mossClass = {
      line: mossDeclaration.getStartLineNumber(),
      fields: classifyFields(project, mossDeclaration),
      unreachable: unreachableMossMembers(mossDeclaration, hiddenAt),
    };
    for (const field of analysis.mossClass.fields) {
      const property = mossDeclaration.getProperty(field.name);
      if (!property) continue;
      const types = field.kind === "service" ? declaredTypes.fields : declaredTypes.data;
      types.set(field.name, property.getType().compilerType);
    }
  }
  return analysis;
}

function reportSyntaxErrors(
  project: Project,
  sourceFile: SourceFile,
  modulePath: string,
  code: string,
): void {
  const diagnostics = project.getProgram().compilerObject.getSyntacticDiagnostics(sourceFile.compilerNode);
  const first = diagnostics[0];
  if (!first) return;
  const position = sourceFile.getLineAndColumnAtPos(first.start ?? 0);
  const message = ts.flattenDiagnosticMessageText(first.messageText, "\n");
  throw new MossError(
    "module-syntax",
    locatedMessage(
      modulePath,
      code,
      position.line,
      position.column,
      `syntax ${diagnosticText("error", first.code, message)}`,
    ),
    { file: modulePath, line: position.line, column: position.column, count: diagnostics.length },
  );
}

function checkImportResolves(importDeclaration: ImportDeclaration, modulePath: string, code: string): void {
  const specifier = importDeclaration.getModuleSpecifierValue();
  if (specifier.startsWith("node:") || builtinModules.includes(specifier)) return;
  if (importDeclaration.getModuleSpecifierSourceFile()) return;
  const position = importDeclaration
    .getSourceFile()
    .getLineAndColumnAtPos(importDeclaration.getModuleSpecifier().getStart());
  const hint = specifier.startsWith(".")
    ? `no file ${path.resolve(path.dirname(modulePath), specifier)} (with a .ts/.d.ts/.js extension or index)`
    : `package "${specifier}" is not installed where ${path.dirname(modulePath)} can see it`;
  throw new MossError(
    "module-import",
    locatedMessage(
      modulePath,
      code,
      position.line,
      position.column,
      `cannot resolve import "${specifier}": ${hint}`,
    ),
    { file: modulePath, line: position.line, column: position.column, specifier },
  );
}

function collectImportNames(
  importDeclaration: ImportDeclaration,
  hidden: boolean,
  names: TopLevelName[],
): void {
  const moduleSpecifier = importDeclaration.getModuleSpecifierValue();
  const line = importDeclaration.getStartLineNumber();
  const declarationTypeOnly = importDeclaration.isTypeOnly();
  const defaultImport = importDeclaration.getDefaultImport();
  if (defaultImport) {
    names.push({
      name: defaultImport.getText(),
      kind: "import",
      value: !declarationTypeOnly && hasValue(defaultImport.getSymbol()),
      hidden,
      line,
      moduleSpecifier,
      importedName: "default",
    });
  }
  const namespaceImport = importDeclaration.getNamespaceImport();
  if (namespaceImport) {
    names.push({
      name: namespaceImport.getText(),
      kind: "import",
      value: !declarationTypeOnly,
      hidden,
      line,
      moduleSpecifier,
      importedName: "*",
    });
  }
  for (const named of importDeclaration.getNamedImports()) {
    const local = named.getAliasNode()?.getText() ?? named.getName();
    names.push({
      name: local,
      kind: "import",
      value: !declarationTypeOnly && !named.isTypeOnly() && hasValue(named.getNameNode().getSymbol()),
      hidden,
      line,
      moduleSpecifier,
      importedName: named.getName(),
    });
  }
}

function hasValue(symbol: TsSymbol | undefined): boolean {
  if (!symbol) return false;
  const target = symbol.isAlias() ? (symbol.getAliasedSymbol() ?? symbol) : symbol;
  return (target.getFlags() & ts.SymbolFlags.Value) !== 0;
}

/**
 * Refuses a member of the module's `Moss` named like one of moss-ts's own members of `moss` (`MOSS_OWN_MEMBERS`),
 * unless it re-declares that member: in the sandbox `moss.show` is moss-ts's, so a data field `show` would be shadowed
 * (its value never reaches model code, each run warns it was not persisted), a service `ask` would shadow moss-ts's
 * `ask`, and a method would have the type-check refuse `moss.show()`; the prompt and the checker would promise what
 * the run does not do. Throws MossError `moss-member-reserved` naming the member's place.
 */
function checkOwnMemberNames(
  project: Project,
  mossClass: ClassDeclaration,
  modulePath: string,
  code: string,
): void {
  for (const member of mossClass.getMembers()) {
    const isAccessor = Node.isGetAccessorDeclaration(member) || Node.isSetAccessorDeclaration(member);
    if (!(Node.isPropertyDeclaration(member) || Node.isMethodDeclaration(member) || isAccessor)) continue;
    const name = member.getName();
    if (member.isStatic() || !isMossOwnMember(name)) continue;
    const clash = Node.isPropertyDeclaration(member)
      ? ownMemberFieldClash(project, mossClass, member, name)
      : `this ${isAccessor ? "accessor" : "method"} would take its place in the prompt and the type-check (which refuse a method of Moss), while model code's moss.${name} is moss-ts's`;
    if (clash === undefined) continue;
    const position = member.getSourceFile().getLineAndColumnAtPos(member.getNameNode().getStart());
    throw new MossError(
      "moss-member-reserved",
      locatedMessage(
        modulePath,
        code,
        position.line,
        position.column,
        `${name} is moss-ts's own member of moss (${MOSS_OWN_MEMBERS.map((own) => `moss.${own}`).join(", ")}): ${clash}; ` +
          `rename it (a Moss that extends moss-ts's Moss may re-declare it only as moss-ts does: declare ${name} with its type)`,
      ),
      { file: modulePath, member: name, line: position.line, column: position.column },
    );
  }
}

/** Why a field named like moss-ts's own member clashes with it, or undefined for a re-declaration of that member. */
function ownMemberFieldClash(
  project: Project,
  mossClass: ClassDeclaration,
  property: PropertyDeclaration,
  name: string,
): string | undefined {
  if (property.hasDeclareKeyword()) {
    const own = mossTsMoss(project)?.getProperty(name);
    if (!own || !extendsClass(mossClass, own.getParentOrThrow())) {
      return "this declare field is not moss-ts's member, since Moss does not extend moss-ts's Moss";
    }
    if (own.getType().isAssignableTo(property.getType())) return undefined;
    return `this declare field's type is not one moss-ts's ${name} satisfies`;
  }
  const isService =
    tokenTag(property) !== undefined ||
    (!property.hasInitializer() && serviceToken(project.getProgram().compilerObject, property) !== undefined);
  return isService
    ? `this service field would shadow moss-ts's moss.${name} in the sandbox`
    : `this data field would be shadowed by moss-ts's moss.${name} in the sandbox: its value would never reach model code nor be saved, while the prompt and the type-check show the field`;
}

/** moss-ts's `Moss` class as context modules see it (`import { Moss } from "moss-ts"`), if the project has read it. */
function mossTsMoss(project: Project): ClassDeclaration | undefined {
  const declaration = project.getSourceFile(MODULE_SURFACE_PATH)?.getExportedDeclarations().get("Moss")?.[0];
  return declaration && Node.isClassDeclaration(declaration) ? declaration : undefined;
}

/** Whether `derived` extends `base`, directly or through other classes. */
function extendsClass(derived: ClassDeclaration, base: Node): boolean {
  for (let current = derived.getBaseClass(); current; current = current.getBaseClass()) {
    if (current.compilerNode === base.compilerNode) return true;
  }
  return false;
}

function classifyFields(project: Project, mossClass: ClassDeclaration): MossField[] {
  const program = project.getProgram().compilerObject;
  const fields: MossField[] = [];
  for (const property of mossClass.getProperties()) {
    const name = property.getName();
    // Only a re-declaration of moss-ts's own member is left by checkOwnMemberNames: moss-ts's, not a field.
    if (!property.isStatic() && isMossOwnMember(name)) continue;
    const reachable = isReachableMossMember({
      name,
      kind: "field",
      static: property.isStatic(),
      private: property.hasModifier(ts.SyntaxKind.PrivateKeyword),
      protected: property.hasModifier(ts.SyntaxKind.ProtectedKeyword),
    });
    if (!reachable) continue;
    const position = property.getSourceFile().getLineAndColumnAtPos(property.getNameNode().getStart());
    const typeNode = property.getTypeNode();
    const typeText = typeNode?.getText() ?? property.getType().getText(property);
    const tokenOverride = tokenTag(property);
    const base: Omit<MossField, "kind" | "token"> = {
      name,
      optional: property.hasQuestionToken(),
      hasInitializer: property.hasInitializer(),
      typeText,
      line: position.line,
      column: position.column,
    };
    if (tokenOverride) {
      const members = publicMembers(property.getType().getNonNullableType());
      fields.push({ ...base, kind: "service", token: { kind: "string", name: tokenOverride }, members });
      continue;
    }
    const token = property.hasInitializer() ? undefined : serviceToken(program, property);
    fields.push(
      token
        ? { ...base, kind: "service", token, members: publicMembers(property.getType().getNonNullableType()) }
        : { ...base, kind: "data" },
    );
  }
  return fields;
}

/**
 * The visible methods and accessors of the `Moss` class that look reachable (a public instance member whose name
 * `isReachableMember` allows) but are not: model code reaches only `moss`'s fields.
 */
function unreachableMossMembers(
  mossClass: ClassDeclaration,
  hiddenAt: (node: Node) => boolean,
): UnreachableMossMember[] {
  const members: UnreachableMossMember[] = [];
  for (const member of mossClass.getMembers()) {
    const isAccessor = Node.isGetAccessorDeclaration(member) || Node.isSetAccessorDeclaration(member);
    if (!(Node.isMethodDeclaration(member) || isAccessor)) continue;
    const kind = isAccessor ? "accessor" : "method";
    if (hiddenAt(member) || member.isStatic()) continue;
    const name = member.getName();
    const looksReachable = isReachableMember({
      name,
      private: member.hasModifier(ts.SyntaxKind.PrivateKeyword),
      protected: member.hasModifier(ts.SyntaxKind.ProtectedKeyword),
    });
    if (!looksReachable || isReachableMossMember({ name, kind })) continue;
    const position = member.getSourceFile().getLineAndColumnAtPos(member.getNameNode().getStart());
    members.push({
      name,
      kind,
      line: position.line,
      column: position.column,
      start: leadingCommentsStart(member),
      end: member.getEnd(),
    });
  }
  return members;
}

/** Where a member's own comments start (JSDoc or `//` lines above it, after any hide marker), else the member. */
function leadingCommentsStart(member: Node): number {
  let start = member.getStart(true);
  for (const comment of [...member.getLeadingCommentRanges()].reverse()) {
    if (findHiddenRegions(comment.getText()).markerLines.size > 0) break;
    start = Math.min(start, comment.getPos());
  }
  return start;
}

function tokenTag(property: PropertyDeclaration): string | undefined {
  for (const doc of property.getJsDocs()) {
    for (const tag of doc.getTags()) {
      if (tag.getTagName() === "token") {
        const text = tag.getCommentText()?.trim();
        if (text) return text.split(/\s+/)[0];
      }
    }
  }
  return undefined;
}

/**
 * A field is a service when its declared type (minus undefined/null) is a class, an abstract class, or an
 * interface / type alias that has methods; built-in library types (Date, Map, …) and data-shaped
 * interfaces are data.
 */
function serviceToken(program: ts.Program, property: PropertyDeclaration): TokenSpec | undefined {
  const type = property.getType().getNonNullableType();
  if (type.isUnion() || type.isIntersection() || type.isArray() || type.isTuple()) return undefined;
  const symbol = type.getAliasSymbol() ?? type.getSymbol();
  if (!symbol) return undefined;
  const declarations = symbol.getDeclarations();
  const declaration = declarations[0];
  if (!declaration) return undefined;
  if (declarations.some((node) => program.isSourceFileDefaultLibrary(node.getSourceFile().compilerNode))) {
    return undefined;
  }
  const typeNodeName = referencedName(property);
  if (Node.isClassDeclaration(declaration)) return { kind: "class", name: typeNodeName ?? symbol.getName() };
  if (Node.isInterfaceDeclaration(declaration) || Node.isTypeAliasDeclaration(declaration)) {
    return hasCallableMembers(type, property) ? { kind: "string", name: symbol.getName() } : undefined;
  }
  return undefined;
}

function referencedName(property: PropertyDeclaration): string | undefined {
  const typeNode = property.getTypeNode();
  if (!typeNode) return undefined;
  const reference = Node.isTypeReference(typeNode)
    ? typeNode
    : typeNode.getFirstDescendantByKind(ts.SyntaxKind.TypeReference);
  return reference?.getTypeName().getText();
}

function hasCallableMembers(type: Type, node: Node): boolean {
  if (type.getCallSignatures().length > 0) return true;
  return type.getProperties().some((member) => {
    const memberType = member.getTypeAtLocation(node).getNonNullableType();
    return memberType.getCallSignatures().length > 0;
  });
}

/** Whether a member may be shown and reached: `isReachableMember` (membrane/visibility.ts) on its modifiers. */
export function isPublicMember(symbol: ts.Symbol): boolean {
  const declarations = symbol.declarations ?? [];
  const flags = declarations.reduce((all, node) => all | ts.getCombinedModifierFlags(node), 0);
  return isReachableMember({
    name: symbol.getName(),
    private: (flags & ts.ModifierFlags.Private) !== 0,
    protected: (flags & ts.ModifierFlags.Protected) !== 0,
  });
}

/** Public member names of a type (see `isPublicMember`), sorted. */
export function publicMembers(type: Type): string[] {
  return type
    .getProperties()
    .filter((symbol) => isPublicMember(symbol.compilerSymbol))
    .map((symbol) => symbol.getName())
    .sort();
}
