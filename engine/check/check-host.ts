import { type Project, ts } from "ts-morph";
import { isSurfacePackageImport } from "../module-surface.ts";

/** Parsed real files, shared by every checker of the process with the same compiler options. */
const SHARED_FILES = new Map<string, Map<string, ts.SourceFile>>();
/** Where ts-morph's file system serves TypeScript's lib files. */
const TS_MORPH_LIB_FOLDER = "/node_modules/typescript/lib";
/** Where this host shows them: outside any node_modules, so TypeScript does not look for their package.json. */
const LIB_FOLDER = "/__moss_check_lib__";

/**
 * TypeScript internals a program's own type-reference and lib resolution runs on (the hooks below call them with
 * caches kept across programs). Another TypeScript without them keeps its default: caches made per program.
 */
const TYPESCRIPT_INTERNALS = ts as unknown as {
  loadWithModeAwareCache?: (
    entries: readonly (ts.FileReference | string)[],
    containingFile: string,
    redirectedReference: ts.ResolvedProjectReference | undefined,
    options: ts.CompilerOptions,
    containingSourceFile: ts.SourceFile | undefined,
    host: ts.ModuleResolutionHost,
    cache: ts.TypeReferenceDirectiveResolutionCache,
    createLoader: unknown,
  ) => readonly ts.ResolvedTypeReferenceDirectiveWithFailedLookupLocations[];
  createTypeReferenceResolutionLoader?: unknown;
  resolveLibrary?: (
    libraryName: string,
    resolveFrom: string,
    options: ts.CompilerOptions,
    host: ts.ModuleResolutionHost,
    cache: ts.ModuleResolutionCache,
  ) => ts.ResolvedModuleWithFailedLookupLocations;
};

/** A compiler host with TypeScript's internal hook for lib replacements (`@typescript/lib-*` packages). */
type CompilerHostWithLibrary = ts.CompilerHost & {
  resolveLibrary?: (
    libraryName: string,
    resolveFrom: string,
    options: ts.CompilerOptions,
  ) => ts.ResolvedModuleWithFailedLookupLocations;
};

/**
 * A compiler host over a ts-morph project's file system plus in-memory virtual files, which keeps one
 * program warm: each `program()` reuses the previous program's structure, the parsed files and one module
 * resolution cache, so only changed virtual files are parsed and bound again.
 */
export class CheckHost {
  readonly options: ts.CompilerOptions;
  readonly #virtual = new Map<string, string>();
  /** Files holding the model's code, and where the checker's own import prelude ends in each. */
  readonly #modelFiles = new Map<string, number>();
  readonly #files = new Map<string, ts.SourceFile>();
  readonly #shared: Map<string, ts.SourceFile>;
  readonly #compilerHost: ts.CompilerHost;
  #program: ts.Program | undefined;
  #combinedLib: CombinedLib | undefined;

  /** A project shared by the caller: its already parsed files are reused when their text and options match. */
  readonly #project: Project | undefined;

  constructor(project: Project, shared: boolean) {
    this.#project = shared ? project : undefined;
    this.options = project.getCompilerOptions();
    const files = project.getModuleResolutionHost();
    const currentDirectory = files.getCurrentDirectory?.() ?? process.cwd();
    const sharedKey = JSON.stringify(this.options, Object.keys(this.options).sort());
    this.#shared = SHARED_FILES.get(sharedKey) ?? new Map();
    SHARED_FILES.set(sharedKey, this.#shared);
    const canonical = (fileName: string): string => fileName;
    const moduleCache = ts.createModuleResolutionCache(currentDirectory, canonical, this.options);
    const host: ts.CompilerHost = {
      getSourceFile: (fileName, languageVersionOrOptions) =>
        this.#sourceFile(fileName, languageVersionOrOptions, host),
      getDefaultLibFileName: (options) => `${LIB_FOLDER}/${ts.getDefaultLibFileName(options)}`,
      getDefaultLibLocation: () => LIB_FOLDER,
      writeFile: () => {},
      getCurrentDirectory: () => currentDirectory,
      getCanonicalFileName: canonical,
      useCaseSensitiveFileNames: () => true,
      getNewLine: () => "\n",
      fileExists: (fileName) => this.#virtual.has(fileName) || files.fileExists(libPath(fileName)),
      readFile: (fileName) => this.#virtual.get(fileName) ?? files.readFile(libPath(fileName)),
      directoryExists: (directoryName) => files.directoryExists?.(directoryName) ?? true,
      realpath: files.realpath ? (path) => files.realpath!(path) : undefined,
      getDirectories: (path) => files.getDirectories?.(path) ?? [],
      getModuleResolutionCache: () => moduleCache,
      resolveModuleNameLiterals: (
        literals,
        containingFile,
        redirectedReference,
        options,
        containingSourceFile,
      ) =>
        literals.map((literal) =>
          !this.#resolves(literal, containingFile, containingSourceFile)
            ? { resolvedModule: undefined }
            : ts.resolveModuleName(
                literal.text,
                containingFile,
                options,
                host,
                moduleCache,
                redirectedReference,
                ts.getModeForUsageLocation(containingSourceFile, literal, options),
              ),
        ),
    };
    // Type references and lib replacements resolve as a program resolves them by default, through caches kept across
    // programs like the module cache: without these hooks each check's new program builds two caches of its own.
    const { loadWithModeAwareCache, createTypeReferenceResolutionLoader, resolveLibrary } =
      TYPESCRIPT_INTERNALS;
    if (
      loadWithModeAwareCache !== undefined &&
      createTypeReferenceResolutionLoader !== undefined &&
      resolveLibrary !== undefined
    ) {
      const packageJsonCache = moduleCache.getPackageJsonInfoCache();
      const typeReferenceCache = ts.createTypeReferenceDirectiveResolutionCache(
        currentDirectory,
        canonical,
        undefined,
        packageJsonCache,
      );
      const libraryCache = ts.createModuleResolutionCache(
        currentDirectory,
        canonical,
        this.options,
        packageJsonCache,
      );
      host.resolveTypeReferenceDirectiveReferences = (
        references,
        containingFile,
        redirectedReference,
        options,
        containingSourceFile,
      ) =>
        loadWithModeAwareCache(
          references,
          containingFile,
          redirectedReference,
          options,
          containingSourceFile,
          host,
          typeReferenceCache,
          createTypeReferenceResolutionLoader,
        );
      (host as CompilerHostWithLibrary).resolveLibrary = (libraryName, resolveFrom, options) =>
        resolveLibrary(libraryName, resolveFrom, options, host, libraryCache);
    }
    this.#compilerHost = host;
  }

  /**
   * Sets the text of an in-memory file (created on first use). A file given `modelPreludeEnd` holds the model's
   * code: only the imports of the checker's own prelude (the statements ending before that offset) are resolved,
   * and its triple-slash directives are ignored, so it sees no file but the ones the checker chose.
   */
  setVirtual(fileName: string, text: string, options: { modelPreludeEnd?: number } = {}): void {
    const modelFile = options.modelPreludeEnd !== undefined;
    if (modelFile) this.#modelFiles.set(fileName, options.modelPreludeEnd!);
    else this.#modelFiles.delete(fileName);
    if (this.#virtual.get(fileName) === text) return;
    this.#virtual.set(fileName, text);
    this.#files.delete(fileName);
  }

  /** Forgets an in-memory file. */
  deleteVirtual(fileName: string): void {
    this.#virtual.delete(fileName);
    this.#modelFiles.delete(fileName);
    this.#files.delete(fileName);
  }

  /**
   * Whether a module name is resolved: in host files always, but for the packages moss-ts's own declarations import
   * (`isSurfacePackageImport`); in a model file only in the prelude's imports.
   */
  #resolves(literal: ts.StringLiteralLike, containingFile: string, sourceFile: ts.SourceFile): boolean {
    const preludeEnd = this.#modelFiles.get(containingFile);
    if (preludeEnd === undefined) return !isSurfacePackageImport(literal.text, containingFile);
    const statement = literal.parent;
    return (
      ts.isImportDeclaration(statement) &&
      statement.moduleSpecifier === literal &&
      statement.parent === sourceFile &&
      statement.end <= preludeEnd
    );
  }

  /** A program over the given root files, reusing everything unchanged since the previous one. */
  program(rootNames: string[]): ts.Program {
    this.#program = ts.createProgram({
      rootNames,
      options: this.options,
      host: this.#compilerHost,
      oldProgram: this.#program,
    });
    return this.#program;
  }

  /**
   * A lib file as this host serves it: the first entry of `lib` holds the text of every lib file it references
   * (transitively), in the order a program would list them; those referenced files are empty. Each check's new
   * type checker then merges one file's globals, already merged by the binder once, instead of some sixty files'.
   * Other lib files (one a package's `/// <reference lib>` adds) are served as they are.
   */
  #libText(fileName: string, host: ts.CompilerHost): string | undefined {
    this.#combinedLib ??= combinedLib(this.options, (name) => host.readFile(`${LIB_FOLDER}/${name}`));
    const name = fileName.slice(LIB_FOLDER.length + 1);
    if (name === this.#combinedLib.entry) return this.#combinedLib.text;
    if (this.#combinedLib.members.has(name)) return "";
    return host.readFile(fileName);
  }

  /** Drops the warm program and every parsed file this host owns. */
  clear(): void {
    this.#program = undefined;
    this.#virtual.clear();
    this.#modelFiles.clear();
    this.#files.clear();
  }

  #sourceFile(
    fileName: string,
    languageVersionOrOptions: ts.ScriptTarget | ts.CreateSourceFileOptions,
    host: ts.CompilerHost,
  ): ts.SourceFile | undefined {
    const own = this.#files.get(fileName);
    if (own) return own;
    const virtual = this.#virtual.get(fileName);
    if (virtual !== undefined) {
      const sourceFile = ts.createSourceFile(fileName, virtual, languageVersionOrOptions, true);
      if (this.#modelFiles.has(fileName)) withoutDirectives(sourceFile);
      this.#files.set(fileName, sourceFile);
      return sourceFile;
    }
    const languageVersion =
      typeof languageVersionOrOptions === "object"
        ? languageVersionOrOptions.languageVersion
        : languageVersionOrOptions;
    const impliedNodeFormat =
      typeof languageVersionOrOptions === "object" ? languageVersionOrOptions.impliedNodeFormat : undefined;
    const sharedKey = `${fileName}|${impliedNodeFormat}`;
    const shared = this.#shared.get(sharedKey);
    // lib and node_modules files are trusted not to change; other files are reused only while their text is the same.
    const trusted = fileName.startsWith(LIB_FOLDER) || fileName.includes("/node_modules/");
    const text =
      shared && trusted
        ? shared.text
        : fileName.startsWith(LIB_FOLDER)
          ? this.#libText(fileName, host)
          : host.readFile(fileName);
    if (text === undefined) return undefined;
    const fits = (candidate: ts.SourceFile | undefined): candidate is ts.SourceFile =>
      candidate !== undefined &&
      candidate.text === text &&
      candidate.languageVersion === languageVersion &&
      candidate.impliedNodeFormat === impliedNodeFormat;
    let sourceFile = fits(shared) ? shared : undefined;
    if (!sourceFile) {
      const seeded = this.#project?.getSourceFile(fileName)?.compilerNode;
      sourceFile = fits(seeded) ? seeded : ts.createSourceFile(fileName, text, languageVersionOrOptions);
      this.#shared.set(sharedKey, sourceFile);
    }
    this.#files.set(fileName, sourceFile);
    return sourceFile;
  }
}

interface CombinedLib {
  /** The lib file name that holds the text of all. */
  entry: string;
  text: string;
  /** The other lib file names whose text it holds. */
  members: Set<string>;
}

/** TypeScript's table of lib names, in the order a program sorts lib files by (internal: absent, nothing is combined). */
const LIB_ORDER = (ts as unknown as { libs?: readonly string[] }).libs;

const LIB_REFERENCE = /^\/\/\/\s*<reference\s+lib=["']([^"']+)["']\s*\/>[^\n]*$/gm;

/**
 * The lib files of `options.lib` (or the target's default lib) and every lib file they reference, as one text: in
 * the order a program sorts its lib files (TypeScript's `libs` table), their `/// <reference lib>` lines removed.
 * Declarations merge in the same order as across the separate files.
 */
function combinedLib(options: ts.CompilerOptions, read: (name: string) => string | undefined): CombinedLib {
  if (LIB_ORDER === undefined) return { entry: "", text: "", members: new Set() };
  const libs = LIB_ORDER;
  const entries = options.lib?.length ? [...options.lib] : [ts.getDefaultLibFileName(options)];
  const texts = new Map<string, string>();
  const visit = (name: string): void => {
    if (texts.has(name)) return;
    const text = read(name);
    if (text === undefined) return;
    texts.set(name, text);
    for (const match of text.matchAll(LIB_REFERENCE)) visit(`lib.${match[1]!.toLowerCase()}.d.ts`);
  };
  for (const entry of entries) visit(entry);
  const priority = (name: string): number => {
    if (name === "lib.d.ts" || name === "lib.es6.d.ts") return 0;
    const index = libs.indexOf(name.slice("lib.".length, -".d.ts".length));
    return index === -1 ? libs.length + 1 : index + 1;
  };
  const ordered = [...texts.keys()].sort((a, b) => priority(a) - priority(b));
  return {
    entry: entries[0]!,
    text: ordered.map((name) => texts.get(name)!.replace(LIB_REFERENCE, "")).join("\n"),
    members: new Set(ordered.filter((name) => name !== entries[0])),
  };
}

function libPath(fileName: string): string {
  return fileName.startsWith(LIB_FOLDER) ? TS_MORPH_LIB_FOLDER + fileName.slice(LIB_FOLDER.length) : fileName;
}

/** Drops a model file's `/// <reference path|types|lib>` and `no-default-lib` directives: they would add files. */
function withoutDirectives(sourceFile: ts.SourceFile): void {
  const mutable = sourceFile as unknown as {
    -readonly [K in
      | "referencedFiles"
      | "typeReferenceDirectives"
      | "libReferenceDirectives"]: ts.FileReference[];
  } & { hasNoDefaultLib: boolean };
  mutable.referencedFiles = [];
  mutable.typeReferenceDirectives = [];
  mutable.libReferenceDirectives = [];
  mutable.hasNoDefaultLib = false;
}
