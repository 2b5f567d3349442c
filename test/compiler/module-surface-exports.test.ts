import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ts } from "ts-morph";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  createModuleProject,
  MODULE_COMPILER_OPTIONS,
  nodeTypeOptions,
} from "../../engine/module/module-project.ts";
import {
  ensureModuleSurface,
  isModuleSurfaceFile,
  isSurfacePackageImport,
} from "../../engine/module-surface.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText, writeModule } from "../helpers/compile-from-text.ts";
import { runMoss } from "../helpers/moss-cli.ts";

// Issue 24 §1: `import { provide, type MossCompiler } from "moss-ts"` in a module's hidden region failed with TS2724:
// the surface a context module is checked against lacked public values the front door exports. Every name of the
// package's "." export (read from package.json with TypeScript's own resolution of the package's self-name) must be
// in the surface with its real declaration, and a module importing all of them must compile.
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The file package.json's "." export names, as TypeScript resolves `moss-ts` from inside the package. */
function frontDoor(): string {
  const resolved = ts.resolveModuleName(
    "moss-ts",
    path.join(ROOT, "test", "__front_door_probe__.ts"),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      customConditions: ["moss-ts-source"],
      allowImportingTsExtensions: true,
      noEmit: true,
    },
    ts.sys,
  ).resolvedModule;
  if (resolved === undefined) throw new Error('TypeScript does not resolve "moss-ts" from package.json');
  return resolved.resolvedFileName;
}

interface Export {
  name: string;
  value: boolean;
  type: boolean;
  typeParameters: number;
  /** The source file of its declaration, without extension, relative to the root it was read from. */
  declaredIn: string;
  kinds: string;
}

function exportsOf(program: ts.Program, file: string, root: string): Map<string, Export> {
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  const found = new Map<string, Export>();
  for (const symbol of checker.getExportsOfModule(module)) {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const declarations = target.declarations ?? [];
    const generic = declarations.find(
      (node) =>
        ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node) || ts.isClassDeclaration(node),
    ) as ts.InterfaceDeclaration | ts.TypeAliasDeclaration | ts.ClassDeclaration | undefined;
    const declaredIn = path
      .relative(root, declarations[0]?.getSourceFile().fileName ?? "")
      .replace(/(\.d)?\.ts$/, "");
    found.set(symbol.name, {
      name: symbol.name,
      value: (target.flags & ts.SymbolFlags.Value) !== 0,
      type: (target.flags & ts.SymbolFlags.Type) !== 0,
      typeParameters: generic?.typeParameters?.length ?? 0,
      declaredIn,
      kinds: declarations.map((node) => ts.SyntaxKind[node.kind]).join(","),
    });
  }
  return found;
}

const PRINT = ts.TypeFormatFlags.NoTruncation;

/**
 * A signature, parameter by parameter: an optional parameter's type without the `| undefined` strict mode adds to a
 * declared `x?: T` (the sources' `x: T = value` is the same parameter).
 */
function signatureText(checker: ts.TypeChecker, signature: ts.Signature): string {
  const typeParameters = signature.getTypeParameters()?.length ?? 0;
  const parameters = signature.getParameters().map((parameter) => {
    const declaration = parameter.valueDeclaration as ts.ParameterDeclaration | undefined;
    const optional = declaration !== undefined && checker.isOptionalParameter(declaration);
    const rest = declaration?.dotDotDotToken ? "..." : "";
    const type = declaration?.type
      ? checker.getTypeFromTypeNode(declaration.type)
      : checker.getTypeOfSymbol(parameter);
    const text = checker.typeToString(type, undefined, PRINT);
    return `${rest}${parameter.name}${optional ? "?" : ""}: ${optional ? text.replace(/ \| undefined$/, "") : text}`;
  });
  const returns = checker.typeToString(signature.getReturnType(), undefined, PRINT);
  return `${typeParameters ? `<${typeParameters}>` : ""}(${parameters.join(", ")}) => ${returns}`;
}

/** A public member of a type, for comparing: name, optionality and type (private and `#` members are no API). */
function membersOf(checker: ts.TypeChecker, type: ts.Type): string[] {
  const lines: string[] = [];
  for (const property of checker.getPropertiesOfType(type)) {
    // `#` members are no API; symbol-keyed ones (moss-ts's brand) print by an id of their program.
    if (property.escapedName.toString().startsWith("__")) continue;
    const declaration = property.valueDeclaration ?? property.declarations?.[0];
    if (declaration && ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Private) continue;
    const optional = property.flags & ts.SymbolFlags.Optional ? "?" : "";
    const propertyType = checker.getTypeOfSymbol(property);
    const signatures = checker.getSignaturesOfType(propertyType, ts.SignatureKind.Call);
    const text =
      property.flags & ts.SymbolFlags.Method
        ? signatures.map((signature) => signatureText(checker, signature)).join(" & ")
        : checker.typeToString(propertyType, undefined, PRINT);
    lines.push(`${property.name}${optional}: ${text}`);
  }
  for (const kind of [ts.SignatureKind.Call, ts.SignatureKind.Construct]) {
    for (const signature of checker.getSignaturesOfType(type, kind)) {
      lines.push(`${kind === ts.SignatureKind.Construct ? "new " : ""}${signatureText(checker, signature)}`);
    }
  }
  for (const info of checker.getIndexInfosOfType(type)) {
    if (!(info.keyType.flags & ts.TypeFlags.String)) continue;
    lines.push(
      `[${checker.typeToString(info.keyType)}]: ${checker.typeToString(info.type, undefined, PRINT)}`,
    );
  }
  return lines.sort();
}

/** What an export is, as the checker sees it: its value's members and signatures, its type's members or text. */
function shapeOf(checker: ts.TypeChecker, symbol: ts.Symbol): string {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const parts: string[] = [];
  if (target.flags & ts.SymbolFlags.Value) {
    const type = checker.getTypeOfSymbol(target);
    parts.push("value", ...membersOf(checker, type));
  }
  if (target.flags & ts.SymbolFlags.Type) {
    const type = checker.getDeclaredTypeOfSymbol(target);
    const parameters = checker.symbolToTypeParameterDeclarations(target, undefined, undefined);
    const text = checker.typeToString(type, undefined, PRINT | ts.TypeFormatFlags.InTypeAlias);
    parts.push(`type${parameters ? `<${parameters.length}>` : ""} ${text}`);
    if (type.flags & ts.TypeFlags.Object) parts.push(...membersOf(checker, type));
  }
  return parts.join("\n");
}

const typeUse = (entry: Export): string =>
  entry.typeParameters === 0
    ? entry.name
    : `${entry.name}<${Array(entry.typeParameters).fill("any").join(", ")}>`;

describe("every name the public API exports type-checks in a context module", () => {
  const FRONT_DOOR = frontDoor();
  const SURFACE = ensureModuleSurface();
  const SURFACE_ROOT = path.dirname(path.dirname(SURFACE));
  // The surface as a context module's program reads it (the packages moss-ts's declarations import unresolved).
  const project = createModuleProject({ node: true });
  project.addSourceFileAtPath(FRONT_DOOR);
  project.addSourceFileAtPath(SURFACE);
  const program = project.getProgram().compilerObject;
  const front = exportsOf(program, FRONT_DOOR, ROOT);
  const surface = exportsOf(program, SURFACE, SURFACE_ROOT);

  test('the front door is package.json\'s "." export, and the surface its own declaration emit', () => {
    expect(path.relative(ROOT, FRONT_DOOR)).toBe(path.join("engine", "index.ts"));
    expect(isModuleSurfaceFile(SURFACE)).toBe(true);
    expect(front.size).toBeGreaterThan(80);
  });

  test("the surface exports every front-door name, each from its real declaration", () => {
    const missing = [...front.keys()].filter((name) => !surface.has(name));
    expect(missing).toEqual([]);
    expect([...surface.keys()].sort()).toEqual([...front.keys()].sort());
    for (const entry of front.values()) expect(surface.get(entry.name), entry.name).toEqual(entry);
  });

  test("each export's declaration in the surface has the real one's shape, member by member", () => {
    // Both read in one program where the packages moss-ts's files import stay unresolved (as in a context module's
    // program), so the comparison is of moss-ts's own declarations: the sources against their declaration emit.
    const options: ts.CompilerOptions = {
      ...MODULE_COMPILER_OPTIONS,
      ...nodeTypeOptions(true),
      paths: {},
    };
    const host = ts.createCompilerHost(options, true);
    const ownFolders = ["engine", "container"].map((folder) => path.join(ROOT, folder, path.sep));
    host.resolveModuleNameLiterals = (literals, containingFile, redirected, compilerOptions) =>
      literals.map((literal) => {
        const bare = !/^(\.|\/|node:)/.test(literal.text);
        const own = ownFolders.some((folder) => containingFile.startsWith(folder));
        if (bare && (own || isSurfacePackageImport(literal.text, containingFile)))
          return { resolvedModule: undefined };
        return ts.resolveModuleName(
          literal.text,
          containingFile,
          compilerOptions,
          host,
          undefined,
          redirected,
        );
      });
    const shapes = ts.createProgram([FRONT_DOOR, SURFACE], options, host);
    const checker = shapes.getTypeChecker();
    const describeExports = (file: string): Map<string, string> => {
      const module = checker.getSymbolAtLocation(shapes.getSourceFile(file)!)!;
      return new Map(
        checker.getExportsOfModule(module).map((symbol) => [symbol.name, shapeOf(checker, symbol)]),
      );
    };
    const real = describeExports(FRONT_DOOR);
    const emitted = describeExports(SURFACE);
    expect(real.size).toBe(front.size);
    const differing = [...real].filter(([name, shape]) => emitted.get(name) !== shape);
    expect(differing.map(([name, shape]) => ({ name, real: shape, surface: emitted.get(name) }))).toEqual([]);
    expect(real.get("MossCompiler")).toContain("compile: (modulePath: string) => Promise<MossRuntime>");
    expect(real.get("provide")).toContain("options?: { singleton?: boolean");
  }, 180_000);

  describe("a module importing every one of them (values and types)", () => {
    // `Moss` is imported already, as the module's base class.
    const named = [...front.values()].filter((entry) => entry.name !== "Moss");
    const values = named.filter((entry) => entry.value);
    const types = named.filter((entry) => !entry.value);
    // The README's pattern: a provider registered in a hidden `__moss_compile__`.
    const source = `import { Moss as Parent } from "moss-ts";

/** The oracle service. */
export abstract class Oracle {
  abstract value(): number;
}

export class Moss extends Parent {
  oracle!: Oracle;
  count = 0;
}
// <moss-hide>
import { ${values.map((entry) => entry.name).join(", ")} } from "moss-ts";
import type { ${types.map((entry) => entry.name).join(", ")} } from "moss-ts";

class FortyTwo extends Oracle {
  value(): number {
    return 42;
  }
}
export const __every_value__ = [${values.map((entry) => entry.name).join(", ")}];
export type EveryType = [${types.map(typeUse).join(", ")}];
export function __moss_compile__(compiler: MossCompiler): void {
  compiler.register(provide(Oracle, (_container: Container) => new FortyTwo(), { singleton: true }));
  const error: MossErrorCode = new MossError("invalid-argument", "typed").code;
  void error;
}
export async function __moss_exec__(
  runtime: MossRuntime,
  request: ExecuteRequest,
  next: (request: ExecuteRequest) => Promise<Execution>,
): Promise<Execution> {
  void (runtime.prompter() satisfies MossPrompter);
  return next({ ...request, timeoutMs: request.timeoutMs ?? 10_000 });
}
// </moss-hide>
`;
    let runtime: MossRuntime | undefined;
    beforeAll(async () => {
      runtime = await compileFromText(source);
    }, 180_000);
    afterAll(async () => {
      await runtime?.close();
    });

    test("compiles through the strict module type-check, and its provider serves the service field", async () => {
      expect(values.map((entry) => entry.name)).toEqual(
        expect.arrayContaining(["MossCompiler", "MossAgent", "provide", "Container", "FileContextStore"]),
      );
      const execution = await runtime!.execute({
        code: "async function main(moss: Moss) {\n  return moss.oracle.value();\n}",
      });
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toBe(42);
    });

    test("a misuse of a moss-ts name there is a located type error", async () => {
      await expect(
        compileFromText(source.replace('new MossError("invalid-argument"', 'new MossError("no-such-code"')),
      ).rejects.toMatchObject({
        code: "module-type-error",
        message: expect.stringMatching(/error TS2345: Argument of type '"no-such-code"'/),
      });
      await expect(
        compileFromText(source.replace("compiler.register(", "compiler.registr(")),
      ).rejects.toMatchObject({
        code: "module-type-error",
        message: expect.stringMatching(/Property 'registr' does not exist on type 'MossCompiler'/),
      });
    }, 180_000);

    test("hidden, none of them reaches model code: the check names it unknown and the run cannot use it", async () => {
      const code = "async function main(moss: Moss) {\n  return typeof MossCompiler;\n}";
      const diagnostics = await runtime!.typecheck(code);
      expect(diagnostics.map((diagnostic) => diagnostic.message)).toContainEqual(
        expect.stringContaining("MossCompiler"),
      );
      const unchecked = await runtime!.execute({ code, typeCheck: "off" });
      expect(unchecked.returns).toBe("undefined");
    });

    test("`moss check` compiles it and checks code against it", async () => {
      const file = await writeModule(source);
      try {
        const checked = await runMoss(["check", file, "--code", "-", "--no-cache"], {
          input: "async function main(moss: Moss) {\n  return moss.oracle.value() + moss.count;\n}",
        });
        expect(checked.stderr).not.toContain("error");
        expect(checked.stdout).toContain("No errors.");
        expect(checked.code).toBe(0);
      } finally {
        await rm(file, { force: true });
      }
    }, 180_000);
  });

  test('a visible moss-ts import reaches model code as the author wrote it, labelled "moss-ts" in the prompt', async () => {
    const runtime = await compileFromText(`import { Moss as Parent, MossError } from "moss-ts";

export class Moss extends Parent {
  count = 0;
}

/** A moss-ts error for the model to inspect. */
export function failure(message: string): MossError {
  return new MossError("invalid-argument", message);
}
`);
    try {
      const prompt = await runtime.prompter().dumpAttrsPrompt();
      expect(prompt).toContain('// from "moss-ts"\n');
      expect(prompt).toContain("class MossError extends Error {");
      expect(prompt).not.toContain(path.dirname(SURFACE_ROOT));
      expect(prompt).not.toMatch(/\/\/ from "[^"]*module-surface/);
      const execution = await runtime.execute({
        code: 'async function main(moss: Moss) {\n  return failure("no").code;\n}',
      });
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toBe("invalid-argument");
      const misuse = await runtime.typecheck(
        'async function main(moss: Moss) {\n  return failure("no").cod;\n}',
      );
      expect(misuse.map((diagnostic) => diagnostic.message).join("\n")).toContain(
        "Property 'cod' does not exist on type 'MossError'",
      );
    } finally {
      await runtime.close();
    }
  }, 180_000);

  test("the surface names no package moss-ts's declarations import: a module program stays light", async () => {
    const text = await readFile(SURFACE, "utf8");
    expect(text).toContain("MossCompiler");
    const files = program
      .getSourceFiles()
      .map((file) => file.fileName)
      .filter((name) => isModuleSurfaceFile(name));
    expect(files.length).toBeGreaterThan(10);
    const light = createModuleProject();
    light.createSourceFile(
      path.join(ROOT, "test", "fixtures", ".tmp", `light-${process.pid}.ts`),
      'import { Moss as Parent, type MossCompiler, MossAgent } from "moss-ts";\nexport class Moss extends Parent {}\nexport type C = MossCompiler;\nexport const A = MossAgent;\n',
    );
    const heavy = light
      .getProgram()
      .compilerObject.getSourceFiles()
      .map((file) => file.fileName)
      .filter((name) =>
        /node_modules\/(@ts-morph|ts-morph|openai|inversify|@inversifyjs|@opentelemetry)\//.test(name),
      );
    expect(heavy).toEqual([]);
  });
});
