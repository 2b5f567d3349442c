import { builtinModules } from "node:module";
import { fileURLToPath } from "node:url";
import { Project, ts } from "ts-morph";

/** Where analysis and checking resolve `moss-ts`: the slim surface a context module uses (see module-surface.ts). */
export const MODULE_SURFACE_PATH = fileURLToPath(
  new URL(
    import.meta.url.endsWith(".ts") ? "../module-surface.ts" : "../module-surface.d.ts",
    import.meta.url,
  ),
);

/** Where analysis and checking resolve `moss-ts/files`: the Files service as the model sees it, no host code. */
export const FILES_SURFACE_PATH = fileURLToPath(
  new URL(
    import.meta.url.endsWith(".ts")
      ? "../../moss-modules/files/files-surface.ts"
      : "../../moss-modules/files/files-surface.d.ts",
    import.meta.url,
  ),
);

/** Compiler options used to read context modules: strict, ESM, `.ts` extension imports allowed. */
export const MODULE_COMPILER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2023.d.ts"],
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  strict: true,
  noEmit: true,
  allowImportingTsExtensions: true,
  experimentalDecorators: true,
  skipLibCheck: true,
  resolveJsonModule: true,
  esModuleInterop: true,
  types: [],
  paths: { "moss-ts": [MODULE_SURFACE_PATH], "moss-ts/files": [FILES_SURFACE_PATH] },
};

const projects = new Map<string, Project>();

/**
 * The process-wide ts-morph project for reading modules (real file system, so imports and node_modules `.d.ts`
 * resolve as Node would). Building lib and `.d.ts` programs is the expensive part, so projects are shared; Node's
 * types are loaded only for modules that import a Node builtin (or when `options.node` asks for them, see
 * `readCheckedModule`). Files read earlier are refreshed from disk.
 */
export function moduleProject(source: string, options: { node?: boolean } = {}): Project {
  const key = options.node === true || importsNodeBuiltin(source) ? "node" : "plain";
  let project = projects.get(key);
  if (!project) {
    project = new Project({
      compilerOptions: { ...MODULE_COMPILER_OPTIONS, types: key === "node" ? ["node"] : [] },
      skipAddingFilesFromTsConfig: true,
    });
    projects.set(key, project);
    return project;
  }
  // The program's files, not getSourceFiles(): that one leaves out the files the module's imports brought in.
  for (const compilerFile of project.getProgram().compilerObject.getSourceFiles()) {
    if (compilerFile.isDeclarationFile || compilerFile.fileName.includes("/node_modules/")) continue;
    project.getSourceFile(compilerFile.fileName)?.refreshFromFileSystemSync();
  }
  return project;
}

/** A fresh project with the same options, for work that must not share state (the type-checker's virtual files). */
export function createModuleProject(options: { node?: boolean } = {}): Project {
  return new Project({
    compilerOptions: { ...MODULE_COMPILER_OPTIONS, types: options.node ? ["node"] : [] },
    skipAddingFilesFromTsConfig: true,
  });
}

const NODE_IMPORT = /(?:from\s+|import\s*\(\s*|require\s*\(\s*)["'](node:[^"']+|[^"'./][^"']*)["']/g;

/** Whether the source imports a Node builtin (`node:fs`, `fs`, …). */
export function importsNodeBuiltin(source: string): boolean {
  for (const match of source.matchAll(NODE_IMPORT)) {
    const specifier = match[1]!;
    if (specifier.startsWith("node:") || builtinModules.includes(specifier.split("/")[0]!)) return true;
  }
  return false;
}

/** Whether a project made by `moduleProject` has Node's types. */
export function hasNodeTypes(project: Project): boolean {
  return project.getCompilerOptions().types?.includes("node") === true;
}
