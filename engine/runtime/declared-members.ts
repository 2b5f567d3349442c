import { type Project, ts } from "ts-morph";
import { isPublicMember } from "../compiler/module-analysis.ts";

/**
 * Resolves the members model code may reach on a host object the membrane has no declared type for (an object a
 * host method returned): the public members of the nearest class in its prototype chain that is declared in the
 * module's program (the module and everything it imports, `.d.ts` included). TypeScript's `private` does not
 * exist at run time, so without this a returned object's private fields would be reachable. Undefined when no
 * class in the chain is declared there.
 */
export function declaredMembersResolver(project: Project): (value: object) => readonly string[] | undefined {
  const byName = new Map<string, readonly string[] | null>();
  const membersOfClass = (name: string): readonly string[] | null => {
    let members = byName.get(name);
    if (members === undefined) {
      members = publicMembersOfClass(project.getProgram().compilerObject, name);
      byName.set(name, members);
    }
    return members;
  };
  return (value) => {
    if (typeof value !== "object") return undefined;
    for (
      let prototype = Object.getPrototypeOf(value);
      prototype && prototype !== Object.prototype;
      prototype = Object.getPrototypeOf(prototype)
    ) {
      const owner = Object.getOwnPropertyDescriptor(prototype, "constructor")?.value as unknown;
      const name = typeof owner === "function" ? owner.name : "";
      const members = name ? membersOfClass(name) : null;
      if (members) return members;
    }
    return undefined;
  };
}

function publicMembersOfClass(program: ts.Program, name: string): readonly string[] | null {
  for (const file of program.getSourceFiles()) {
    if (program.isSourceFileDefaultLibrary(file)) continue;
    const declaration = file.statements.find(
      (statement): statement is ts.ClassDeclaration =>
        ts.isClassDeclaration(statement) && statement.name?.text === name,
    );
    if (!declaration?.name) continue;
    return program
      .getTypeChecker()
      .getTypeAtLocation(declaration.name)
      .getProperties()
      .filter(isPublicMember)
      .map((symbol) => symbol.getName())
      .sort();
  }
  return null;
}
