import { type ClassDeclaration, Node, ts } from "ts-morph";
import { isReachableMember } from "../membrane/index.ts";

/** A text edit relative to the start of the rendered node. */
interface Edit {
  start: number;
  end: number;
  text: string;
}

const DROPPED_MODIFIERS = new Set([
  ts.SyntaxKind.ExportKeyword,
  ts.SyntaxKind.DefaultKeyword,
  ts.SyntaxKind.DeclareKeyword,
]);

type Renderer = (node: Node) => string | undefined;

/** Renders a declaration as the prompt shows it, keyed by declaration kind; undefined for kinds not reflected. */
export function renderDeclaration(node: Node): string | undefined {
  const renderer = RENDERERS.find(([guard]) => guard(node));
  return renderer?.[1](node);
}

const RENDERERS: Array<[(node: Node) => boolean, Renderer]> = [
  [
    Node.isFunctionDeclaration,
    (node) => renderFunction(node as Extract<Node, { getOverloads: unknown }> & Node),
  ],
  [Node.isClassDeclaration, (node) => renderClass(node as ClassDeclaration)],
  [Node.isInterfaceDeclaration, (node) => renderWithEdits(node, modifierEdits(node))],
  [Node.isTypeAliasDeclaration, (node) => renderWithEdits(node, modifierEdits(node))],
  [Node.isEnumDeclaration, (node) => renderWithEdits(node, modifierEdits(node))],
  [Node.isModuleDeclaration, (node) => renderWithEdits(node, modifierEdits(node))],
  [Node.isVariableDeclaration, (node) => renderConstant(node)],
];

function renderFunction(node: Node): string | undefined {
  if (!Node.isFunctionDeclaration(node)) return undefined;
  const overloads = node.isImplementation() ? node.getOverloads() : [];
  if (overloads.length > 0) return overloads.map((overload) => renderFunction(overload)).join("\n");
  const edits = modifierEdits(node);
  const body = node.getBody();
  if (body) edits.push(edit(node, body.getPos(), body.getEnd(), ";"));
  const text = renderWithEdits(node, edits);
  return body ? text : ensureSemicolon(text);
}

function renderClass(node: ClassDeclaration): string {
  const edits = modifierEdits(node);
  for (const member of node.getMembers()) {
    if (isNonPublicMember(member)) {
      edits.push(edit(node, member.getPos(), member.getEnd(), ""));
      continue;
    }
    if (Node.isModifierable(member)) {
      for (const modifier of member.getModifiers()) {
        if (modifier.getKind() === ts.SyntaxKind.DeclareKeyword) {
          edits.push(edit(node, modifier.getStart(), modifier.getEnd() + 1, ""));
        }
      }
    }
    if (
      Node.isMethodDeclaration(member) ||
      Node.isConstructorDeclaration(member) ||
      Node.isGetAccessorDeclaration(member) ||
      Node.isSetAccessorDeclaration(member)
    ) {
      const body = member.getBody();
      if (body) edits.push(edit(node, body.getPos(), body.getEnd(), ";"));
    } else if (Node.isPropertyDeclaration(member)) {
      const initializer = member.getInitializer();
      if (initializer) {
        const typeNode = member.getTypeNode();
        const from = typeNode ? typeNode.getEnd() : member.getNameNode().getEnd();
        const typeText = typeNode
          ? ""
          : `: ${member.getType().getText(member, ts.TypeFormatFlags.NoTruncation)}`;
        edits.push(edit(node, from, initializer.getEnd(), typeText));
      }
    }
  }
  return renderWithEdits(node, edits);
}

/**
 * Whether a class member is left out of the prompt: `isReachableMember` (membrane/visibility.ts) says no. A
 * constructor is the class's construct signature, not a member model code reaches by name, so it is kept.
 */
export function isNonPublicMember(member: Node): boolean {
  if (Node.isConstructorDeclaration(member)) return false;
  const name = (member as { getName?: () => string }).getName?.();
  if (name === undefined) return false;
  const modifiable = Node.isModifierable(member);
  return !isReachableMember({
    name,
    private: modifiable && member.hasModifier(ts.SyntaxKind.PrivateKeyword),
    protected: modifiable && member.hasModifier(ts.SyntaxKind.ProtectedKeyword),
  });
}

function renderConstant(node: Node): string | undefined {
  if (!Node.isVariableDeclaration(node)) return undefined;
  const statement = node.getVariableStatement();
  const docs = statement
    ? statement
        .getJsDocs()
        .slice(-1)
        .map((doc) => doc.getText())
    : [];
  const typeNode = node.getTypeNode();
  const typeText = typeNode
    ? typeNode.getText()
    : node
        .getType()
        .getText(
          node,
          ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseAliasDefinedOutsideCurrentScope,
        );
  return [...docs, `declare const ${node.getName()}: ${typeText};`].join("\n");
}

function modifierEdits(node: Node): Edit[] {
  if (!Node.isModifierable(node)) return [];
  return node
    .getModifiers()
    .filter((modifier) => DROPPED_MODIFIERS.has(modifier.getKind()))
    .map((modifier) => edit(node, modifier.getStart(), modifier.getEnd() + 1, ""));
}

/** Where a declaration's text starts: its own (last) JSDoc block, not a file header that happens to precede it. */
function renderStart(node: Node): number {
  const docs = Node.isJSDocable(node) ? node.getJsDocs() : [];
  return docs.at(-1)?.getStart() ?? node.getStart();
}

function edit(node: Node, start: number, end: number, text: string): Edit {
  const origin = renderStart(node);
  return { start: Math.max(0, start - origin), end: end - origin, text };
}

function renderWithEdits(node: Node, edits: Edit[]): string {
  const text = node.getSourceFile().getFullText().slice(renderStart(node), node.getEnd());
  const sorted = [...edits].sort((a, b) => b.start - a.start);
  let result = text;
  for (const change of sorted)
    result = result.slice(0, change.start) + change.text + result.slice(change.end);
  return result.replace(/[ \t]+$/gm, "");
}

function ensureSemicolon(text: string): string {
  return text.trimEnd().endsWith(";") ? text : `${text.trimEnd()};`;
}
