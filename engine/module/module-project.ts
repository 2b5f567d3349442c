import { builtinModules, createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Project, type ResolutionHostFactory, ts } from "ts-morph";
import {
  ensureModuleSurface,
  isModuleSurfaceFile,
  isSurfacePackageImport,
  MODULE_SURFACE_PATH,
} from "../module-surface.ts";

/** Where analysis and checking resolve `moss-ts`: the public API's real declarations (see ../module-surface.ts). */
export { MODULE_SURFACE_PATH };

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

/**
 * Where Node's types are read from: moss-ts's own `@types/node` (a dependency), so a module that uses Node checks in
 * a project that never installed `@types/node`, whatever the working directory.
 */
const NODE_TYPE_ROOTS = [
  path.dirname(path.dirname(createRequire(import.meta.url).resolve("@types/node/package.json"))),
];

/** The compiler options that load Node's types (from moss-ts's own `@types/node`) or none. */
export function nodeTypeOptions(node: boolean): Pick<ts.CompilerOptions, "types" | "typeRoots"> {
  return node ? { types: ["node"], typeRoots: NODE_TYPE_ROOTS } : { types: [] };
}

/** The options of a module project, with or without Node's types. */
function projectCompilerOptions(node: boolean): ts.CompilerOptions {
  return { ...MODULE_COMPILER_OPTIONS, ...nodeTypeOptions(node) };
}

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
    project = createModuleProject({ node: key === "node" });
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
  ensureModuleSurface();
  return new Project({
    compilerOptions: projectCompilerOptions(options.node === true),
    skipAddingFilesFromTsConfig: true,
    resolutionHost: surfaceResolution,
  });
}

/**
 * Module resolution of a module project: TypeScript's own, except that the packages moss-ts's declarations import
 * stay unresolved (`isSurfacePackageImport`), as in the type-checker's programs. No cache outlives a call for the
 * module's own files: a module's project is refreshed from disk, and an import that failed once may resolve later.
 * The one exception is a relative import of a file of moss-ts's surface (module-surface.ts), which cannot change
 * while this process runs — dist/'s own declarations, or from the sources a folder named by their hash — and which
 * every program re-resolved: ~115 files and ~350 imports, 25–30 ms of each new program (a warm CLI command's
 * included, measured on Node 24).
 */
const surfaceResolution: ResolutionHostFactory = (moduleResolutionHost) => ({
  resolveModuleNames(
    moduleNames,
    containingFile,
    _reused,
    redirectedReference,
    options,
    containingSourceFile,
  ) {
    const inSurface = isModuleSurfaceFile(containingFile);
    return moduleNames.map((name, index) => {
      if (isSurfacePackageImport(name, containingFile)) return undefined;
      const mode = containingSourceFile
        ? ts.getModeForResolutionAtIndex(containingSourceFile, index, options)
        : undefined;
      // A relative import of a surface file names a file of the surface (found or not, for the process's life).
      const key =
        inSurface && name.startsWith(".") && redirectedReference === undefined
          ? `${containingFile}\0${name}\0${mode}`
          : undefined;
      if (key !== undefined && surfaceResolutions.has(key)) return surfaceResolutions.get(key);
      const resolved = ts.resolveModuleName(
        name,
        containingFile,
        options,
        moduleResolutionHost,
        undefined,
        redirectedReference,
        mode,
      ).resolvedModule;
      if (key !== undefined && (resolved === undefined || isModuleSurfaceFile(resolved.resolvedFileName)))
        surfaceResolutions.set(key, resolved);
      return resolved;
    });
  },
});

/** The relative imports of moss-ts's surface files, resolved (see surfaceResolution), for the process's life. */
const surfaceResolutions = new Map<string, ts.ResolvedModuleFull | undefined>();

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

/** Every file the programs of the process-wide module projects read (libs served from memory included by name). */
export function moduleProjectFiles(): string[] {
  const files = new Set<string>();
  for (const project of projects.values()) {
    for (const file of project.getProgram().compilerObject.getSourceFiles()) files.add(file.fileName);
  }
  return [...files].sort();
}
