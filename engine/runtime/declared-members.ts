import { ts } from "ts-morph";
import { isPublicMember } from "../module/index.ts";

/**
 * What the membrane may expose of a host value at one position (a service field, a call result, a property, an
 * array item): the position's declared type, resolved statically from the module's program.
 * - `declared`: `members` lists what a handle there offers, each with the declared type of its value.
 * - `undeclared`: the declaration says `any`/`unknown`/`object`/a type parameter; a handle there offers the members
 *   of the nearest class in the value's prototype chain that the module's program declares, else nothing.
 * - `runtime`: a value the host handed over without a static type (`withLocals`): its public run-time members.
 */
export interface DeclaredType {
  readonly kind: "declared" | "undeclared" | "runtime";
  /** The declared type as TypeScript writes it (`Account`), when known: approval requests describe handles by it. */
  readonly name?: string | undefined;
  /** Members a handle offers, with the declared type of each member's value. Empty for data types. */
  readonly members: ReadonlyMap<string, DeclaredType>;
  /** Keys of a plain object not named in `members` (an index signature). */
  readonly rest: DeclaredType;
  /** Items of arrays and sets, values of maps. */
  readonly element: DeclaredType;
  /** What calling a handle here returns (Promise unwrapped); undefined: not callable. */
  readonly callResult: DeclaredType | undefined;
  /** What `new` on a handle here returns; undefined: not constructible. */
  readonly constructResult: DeclaredType | undefined;
  /** Data types (primitives, arrays, maps, dates, …): left out of the member intersection of a union. */
  readonly data: boolean;
  /** Members whose declaration carries the JSDoc tag `@approval`: each call from model code waits for a person. */
  readonly approvals: ReadonlySet<string>;
  /**
   * Members whose declaration carries the JSDoc tag `@idempotent`: a call of one that was in flight when its worker
   * died may run again on the worker that takes the run over (any other such call waits for a person's yes).
   */
  readonly idempotents: ReadonlySet<string>;
  /** Whether calling a handle here needs approval (a function declared with `@approval`). */
  readonly callApproval: boolean;
  /** Whether `new` on a handle here needs approval (a class whose constructor is declared with `@approval`). */
  readonly constructApproval: boolean;
  /**
   * Whether a call here may answer with a plain value rather than a Promise (a declared non-Promise return, or no
   * declaration at all): a call that waits for a person then stops the run at once, since no placeholder fits.
   */
  readonly callSync: boolean;
  /**
   * Whether every call here is declared to return a Promise (`Promise<T>`; not a type parameter, `any` or a union
   * with a plain value): model code gets a promise whatever happens, so the isolate may batch such calls.
   */
  readonly callPromise: boolean;
  /**
   * What a person reads of a call before approving it: member `member` of a handle here, or (`member` null) calling
   * (`construct` false) or constructing a handle here. Undefined when nothing declares it.
   */
  readonly about?: ((member: string | null, construct: boolean) => MemberAbout | undefined) | undefined;
}

/** A member's declaration as an approval request shows it: its parameter names and its doc comment. */
export interface MemberAbout {
  parameters?: string[];
  doc?: string;
}

/** The most of a member's doc comment an approval request carries, in UTF-8 bytes (a longer one is cut, marked). */
export const MAX_REQUEST_DOC_BYTES = 2048;

const EMPTY: ReadonlyMap<string, DeclaredType> = new Map();
const NO_APPROVALS: ReadonlySet<string> = new Set();
/** The JSDoc tag that makes every call of a member from model code wait for a person's yes. */
export const APPROVAL_TAG = "approval";
/** The JSDoc tag that lets a call interrupted by a dead worker run again on the worker that takes its run over. */
export const IDEMPOTENT_TAG = "idempotent";

function fixedType(kind: DeclaredType["kind"], callable: boolean): DeclaredType {
  const type: DeclaredType = {
    kind,
    members: EMPTY,
    approvals: NO_APPROVALS,
    idempotents: NO_APPROVALS,
    callApproval: false,
    constructApproval: false,
    callSync: kind !== "declared",
    callPromise: false,
    data: kind === "declared",
    get rest() {
      return kind === "declared" ? NOTHING : type;
    },
    get element() {
      return kind === "declared" ? NOTHING : type;
    },
    get callResult() {
      return callable ? UNDECLARED : undefined;
    },
    get constructResult() {
      return callable ? UNDECLARED : undefined;
    },
  };
  return type;
}

/** A position whose declaration names no type: handles get the nearest declared class's members, or nothing. */
export const UNDECLARED: DeclaredType = fixedType("undeclared", false);
/** A data position (string, number, …): a host object arriving there offers nothing. */
export const NOTHING: DeclaredType = fixedType("declared", false);
/** A value the host handed over itself, without a static type (`withLocals`): its public run-time members. */
export const RUNTIME: DeclaredType = fixedType("runtime", true);

interface Parts {
  members?: ReadonlyMap<string, DeclaredType>;
  rest?: DeclaredType;
  element?: DeclaredType;
  callResult?: DeclaredType;
  constructResult?: DeclaredType;
  data?: boolean;
  approvals?: ReadonlySet<string>;
  idempotents?: ReadonlySet<string>;
  callApproval?: boolean;
  constructApproval?: boolean;
  callSync?: boolean;
  callPromise?: boolean;
  about?: DeclaredType["about"];
}

/** A declared type whose parts are computed on first use, once. */
class LazyType implements DeclaredType {
  readonly kind = "declared" as const;
  name: string | undefined;
  #parts: Parts | undefined;
  readonly #compute: () => Parts;

  constructor(compute: () => Parts) {
    this.#compute = compute;
  }

  #get(): Parts {
    this.#parts ??= this.#compute();
    return this.#parts;
  }

  get members(): ReadonlyMap<string, DeclaredType> {
    return this.#get().members ?? EMPTY;
  }
  get rest(): DeclaredType {
    return this.#get().rest ?? NOTHING;
  }
  get element(): DeclaredType {
    return this.#get().element ?? NOTHING;
  }
  get callResult(): DeclaredType | undefined {
    return this.#get().callResult;
  }
  get constructResult(): DeclaredType | undefined {
    return this.#get().constructResult;
  }
  get data(): boolean {
    return this.#get().data ?? false;
  }
  get approvals(): ReadonlySet<string> {
    return this.#get().approvals ?? NO_APPROVALS;
  }
  get idempotents(): ReadonlySet<string> {
    return this.#get().idempotents ?? NO_APPROVALS;
  }
  get callApproval(): boolean {
    return this.#get().callApproval ?? false;
  }
  get constructApproval(): boolean {
    return this.#get().constructApproval ?? false;
  }
  get callSync(): boolean {
    return this.#get().callSync ?? true;
  }
  get callPromise(): boolean {
    return this.#get().callPromise ?? false;
  }
  about(member: string | null, construct: boolean): MemberAbout | undefined {
    return this.#get().about?.(member, construct);
  }
}

/** Copied by value: their members never become handles, only their items may. */
const ELEMENT_ARGUMENT: Record<string, number> = {
  Array: 0,
  ReadonlyArray: 0,
  Set: 0,
  ReadonlySet: 0,
  WeakSet: 0,
  Map: 1,
  ReadonlyMap: 1,
  WeakMap: 1,
};
const UNTYPED_LIBRARY = new Set(["Object", "Function", "CallableFunction", "NewableFunction"]);

const SCALAR_FLAGS =
  ts.TypeFlags.StringLike |
  ts.TypeFlags.NumberLike |
  ts.TypeFlags.BigIntLike |
  ts.TypeFlags.BooleanLike |
  ts.TypeFlags.EnumLike |
  ts.TypeFlags.ESSymbolLike |
  ts.TypeFlags.Void |
  ts.TypeFlags.Undefined |
  ts.TypeFlags.Null |
  ts.TypeFlags.Never;
const UNTYPED_FLAGS =
  ts.TypeFlags.Any | ts.TypeFlags.Unknown | ts.TypeFlags.NonPrimitive | ts.TypeFlags.TypeParameter;

/** The declared types of a module as its analysis gives them (`ModuleAnalysis["declaredTypes"]`). */
export interface ModuleDeclaredTypes {
  readonly program: ts.Program;
  readonly names: ReadonlyMap<string, ts.Type>;
  readonly fields: ReadonlyMap<string, ts.Type>;
  /** Equal for analyses that declare the same types (same module text, imported files and lib kind). */
  readonly key?: string | undefined;
}

/** One module's declared types and their resolution, shared by the runtimes of that module. */
export interface ModuleDeclarations {
  readonly types: DeclaredTypes;
  /** The declared type of a visible value name; `NOTHING` when the module declares none. */
  name(name: string): DeclaredType;
  /** The declared type of a `Moss` service field; `NOTHING` when the module declares none. */
  field(name: string): DeclaredType;
}

/**
 * Resolutions by key, held weakly: the runtimes of a module hold theirs, so a module no runtime uses any more lets its
 * resolution (and the program it came from) go.
 */
const declarationsByKey = new Map<string, WeakRef<ModuleDeclarations>>();
const declarationsByProgram = new WeakMap<ts.Program, ModuleDeclarations>();

/**
 * The resolution of a module's declared types, made once per module: runtimes compiled from one cached module (one
 * program) or from the same text (same key: module, imported author files, lib kind) share it, so a new session does
 * not resolve its services' types with a fresh checker again. It holds only what the declarations say, never a value
 * of a session: each runtime still has its own membrane, handles and classes.
 */
export function moduleDeclarations(declared: ModuleDeclaredTypes): ModuleDeclarations {
  const byProgram = declarationsByProgram.get(declared.program);
  if (byProgram !== undefined) return byProgram;
  let shared = declared.key === undefined ? undefined : declarationsByKey.get(declared.key)?.deref();
  if (shared === undefined) {
    // Resolved from the first program of this key, whose types the maps below come from.
    const types = new DeclaredTypes(declared.program);
    const { names, fields } = declared;
    shared = {
      types,
      name: (name) => {
        const type = names.get(name);
        return type ? types.of(type) : NOTHING;
      },
      field: (name) => {
        const type = fields.get(name);
        return type ? types.of(type) : NOTHING;
      },
    };
    if (declared.key !== undefined) {
      for (const [key, held] of declarationsByKey)
        if (held.deref() === undefined) declarationsByKey.delete(key);
      declarationsByKey.set(declared.key, new WeakRef(shared));
    }
  }
  declarationsByProgram.set(declared.program, shared);
  return shared;
}

/**
 * The declared types of one module's program, resolved with the compile-time checker and cached per type: a host
 * call pays a map lookup, never a type-check. Types are resolved lazily (first time a handle of that type crosses)
 * so a service typed with a large library does not cost its whole closure at compile.
 */
export class DeclaredTypes {
  readonly #checker: ts.TypeChecker;
  readonly #program: ts.Program;
  readonly #cache = new Map<ts.Type, DeclaredType>();
  readonly #classes = new Map<string, DeclaredType | null>();

  /** `program` must be the one the given types come from (the compile-time program of the module). */
  constructor(program: ts.Program) {
    this.#program = program;
    this.#checker = program.getTypeChecker();
  }

  /** The declared type standing for a TypeScript type (a service field's, a visible name's). */
  of(type: ts.Type): DeclaredType {
    let known = this.#cache.get(type);
    if (known === undefined) {
      known = this.#resolve(type);
      if (known instanceof LazyType && known.name === undefined)
        known.name = this.#checker.typeToString(type);
      this.#cache.set(type, known);
    }
    return known;
  }

  /** A plain record whose keys have the given declared types (how the module's globals and services cross). */
  record(members: ReadonlyMap<string, DeclaredType>): DeclaredType {
    return new LazyType(() => ({ members }));
  }

  /**
   * For positions whose declaration names no type: given the classes the module shows (its visible class values
   * and their declared types), answers with the instance type of the nearest of them in a value's prototype chain.
   * Classes are matched by identity, not by name, and only classes the prompt shows count.
   */
  nearestDeclaredClass(
    classes: ReadonlyMap<unknown, DeclaredType>,
  ): (value: object) => DeclaredType | undefined {
    return (value) => {
      if (typeof value !== "object") return undefined;
      for (
        let prototype = Object.getPrototypeOf(value);
        prototype && prototype !== Object.prototype;
        prototype = Object.getPrototypeOf(prototype)
      ) {
        const owner = Object.getOwnPropertyDescriptor(prototype, "constructor")?.value as unknown;
        const type = owner === undefined ? undefined : classes.get(owner)?.constructResult;
        if (type) return type;
      }
      return undefined;
    };
  }

  /**
   * For a value the host handed over without a static type (`withLocals`): the declared type of the nearest class in
   * its prototype chain declared anywhere in the module's program (by name), so TypeScript-`private` members, which
   * are ordinary properties at run time, stay out of reach. Undefined when none is declared.
   */
  programClass(value: object): DeclaredType | undefined {
    if (typeof value !== "object") return undefined;
    for (
      let prototype = Object.getPrototypeOf(value);
      prototype && prototype !== Object.prototype;
      prototype = Object.getPrototypeOf(prototype)
    ) {
      const owner = Object.getOwnPropertyDescriptor(prototype, "constructor")?.value as unknown;
      const name = typeof owner === "function" ? owner.name : "";
      const type = name ? this.#classNamed(name) : null;
      if (type) return type;
    }
    return undefined;
  }

  #classNamed(name: string): DeclaredType | null {
    let type = this.#classes.get(name);
    if (type !== undefined) return type;
    type = null;
    for (const file of this.#program.getSourceFiles()) {
      if (this.#program.isSourceFileDefaultLibrary(file)) continue;
      const declaration = file.statements.find(
        (statement): statement is ts.ClassDeclaration =>
          ts.isClassDeclaration(statement) && statement.name?.text === name,
      );
      if (!declaration?.name) continue;
      type = this.of(this.#checker.getTypeAtLocation(declaration.name));
      break;
    }
    this.#classes.set(name, type);
    return type;
  }

  #resolve(given: ts.Type): DeclaredType {
    const type = this.#checker.getAwaitedType(given) ?? given;
    if (type !== given) return this.of(type);
    if (type.flags & ts.TypeFlags.TypeParameter) {
      // `this` (fluent methods) and `T extends Ball` stand for their constraint; an unconstrained T says nothing.
      const constraint = this.#checker.getBaseConstraintOfType(type);
      return constraint && constraint !== type && !(constraint.flags & ts.TypeFlags.TypeParameter)
        ? this.of(constraint)
        : UNDECLARED;
    }
    if (type.flags & UNTYPED_FLAGS) return UNDECLARED;
    if (type.isUnion()) {
      const parts = type.types.filter((part) => !(part.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Null)));
      return combine(parts.map((part) => this.of(part)));
    }
    if (type.flags & SCALAR_FLAGS) return NOTHING;
    if (type.isIntersection() && type.types.some((part) => part.flags & SCALAR_FLAGS)) return NOTHING;
    if (!(type.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection))) return NOTHING;
    const checker = this.#checker;
    if (checker.isTupleType(type)) {
      const items = checker.getTypeArguments(type as ts.TypeReference);
      return new LazyType(() => ({ data: true, element: combine(items.map((item) => this.of(item))) }));
    }
    const library = this.#libraryName(type);
    if (library !== undefined) {
      if (UNTYPED_LIBRARY.has(library)) return UNDECLARED;
      const index = ELEMENT_ARGUMENT[library];
      const item =
        index === undefined ? undefined : checker.getTypeArguments(type as ts.TypeReference)[index];
      if (index !== undefined || isCopiedLibraryType(library)) {
        return new LazyType(() => ({ data: true, ...(item ? { element: this.of(item) } : {}) }));
      }
    }
    if (
      checker.getPropertiesOfType(type).length === 0 &&
      !checker.getIndexInfoOfType(type, ts.IndexKind.String) &&
      type.getCallSignatures().length === 0 &&
      type.getConstructSignatures().length === 0
    ) {
      return UNDECLARED; // `{}`: the declaration names no shape
    }
    return new LazyType(() => this.#objectParts(type));
  }

  #objectParts(type: ts.Type): Parts {
    const checker = this.#checker;
    const members = new Map<string, DeclaredType>();
    const symbols = new Map<string, ts.Symbol>();
    const approvals = new Set<string>();
    const idempotents = new Set<string>();
    for (const symbol of checker.getPropertiesOfType(type)) {
      if (!isPublicMember(symbol)) continue;
      symbols.set(symbol.getName(), symbol);
      const tagged = hasTag(symbol, checker, APPROVAL_TAG);
      if (tagged) approvals.add(symbol.getName());
      if (hasTag(symbol, checker, IDEMPOTENT_TAG)) idempotents.add(symbol.getName());
      const memberType = checker.getTypeOfSymbol(symbol);
      // A function reached through an @approval member (read as a property, or a plain-object service's function)
      // is a handle of its own: calling it needs the same approval as calling the member.
      members.set(
        symbol.getName(),
        lazyOf(() => this.of(memberType), tagged),
      );
    }
    const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
    const signatures = type.getCallSignatures();
    const calls = signatures.map((signature) => this.of(signature.getReturnType()));
    const callApproval = signatures.some((signature) =>
      signature.getJsDocTags().some((tag) => tag.name === APPROVAL_TAG),
    );
    const constructSignatures = isAbstractClass(type) ? [] : type.getConstructSignatures();
    const constructs = constructSignatures.map((signature) => this.of(signature.getReturnType()));
    return {
      members,
      approvals,
      idempotents,
      callApproval,
      about: (member, construct) => {
        if (member !== null) {
          const symbol = symbols.get(member);
          return symbol === undefined ? undefined : memberAbout(symbol, checker);
        }
        const signature = (construct ? constructSignatures : signatures)[0];
        return signature === undefined ? undefined : signatureAbout(signature, undefined, checker);
      },
      constructApproval: constructSignatures.some((signature) =>
        signature.getJsDocTags().some((tag) => tag.name === APPROVAL_TAG),
      ),
      // A signature returning a non-Promise (or `any`) may answer at once: no Promise placeholder can stand for it.
      callSync: signatures.some((signature) => {
        const returned = signature.getReturnType();
        return (checker.getAwaitedType(returned) ?? returned) === returned;
      }),
      callPromise:
        signatures.length > 0 &&
        signatures.every((signature) => isPromise(signature.getReturnType(), checker)),
      ...(index ? { rest: this.of(index.type) } : {}),
      ...(calls.length > 0 ? { callResult: combine(calls) } : {}),
      ...(constructs.length > 0 ? { constructResult: combine(constructs) } : {}),
    };
  }

  /** The name of a type declared only in TypeScript's default library (`Map`, `Date`, …), else undefined. */
  #libraryName(type: ts.Type): string | undefined {
    const symbol = type.getSymbol();
    const declarations = symbol?.getDeclarations();
    if (!symbol || !declarations || declarations.length === 0) return undefined;
    if (!declarations.every((node) => this.#program.isSourceFileDefaultLibrary(node.getSourceFile()))) {
      return undefined;
    }
    if (!declarations.some((node) => ts.isInterfaceDeclaration(node) || ts.isClassDeclaration(node))) {
      return undefined;
    }
    return symbol.getName();
  }
}

/**
 * Whether a member's declaration, or the declaration it re-declares in a base class or interface (`extends`,
 * `implements`), carries the JSDoc tag (`@approval`, `@idempotent`). TypeScript inherits JSDoc tags only when the
 * re-declaration has none of its own, so an override documenting its `@param` silently dropped the base's tag: a
 * person's say must not vanish because a subtype repeated a member.
 */
function hasTag(
  symbol: ts.Symbol,
  checker: ts.TypeChecker,
  tagName: string,
  seen = new Set<ts.Symbol>(),
): boolean {
  if (seen.has(symbol)) return false;
  seen.add(symbol);
  if (symbol.getJsDocTags(checker).some((tag) => tag.name === tagName)) return true;
  const name = symbol.getName();
  for (const declaration of symbol.getDeclarations() ?? []) {
    const owner = declaration.parent;
    if (!owner || !(ts.isClassLike(owner) || ts.isInterfaceDeclaration(owner))) continue;
    for (const clause of owner.heritageClauses ?? []) {
      for (const base of clause.types) {
        const inherited = checker.getTypeAtLocation(base).getProperty(name);
        if (inherited && hasTag(inherited, checker, tagName, seen)) return true;
      }
    }
  }
  return false;
}

/** `typeof SomeAbstractClass`: model code may not construct it (TypeScript would not let it either). */
function isAbstractClass(type: ts.Type): boolean {
  return (type.getSymbol()?.getDeclarations() ?? []).some(
    (node) =>
      ts.isClassDeclaration(node) && (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Abstract) !== 0,
  );
}

/** Types the wire copies (their methods never cross as handles). */
function isCopiedLibraryType(name: string): boolean {
  return (
    name === "Date" ||
    name === "RegExp" ||
    name.endsWith("Error") ||
    name.endsWith("Array") ||
    name === "ArrayBuffer" ||
    name === "DataView" ||
    name === "String" ||
    name === "Number" ||
    name === "Boolean" ||
    name === "BigInt" ||
    name === "Symbol"
  );
}

/**
 * A member type resolved on first use (a type's members may refer back to it); `approval`: calling a handle of it
 * needs a person's yes (the member was declared `@approval`).
 */
function lazyOf(resolve: () => DeclaredType, approval = false): DeclaredType {
  let resolved: DeclaredType | undefined;
  const get = () => {
    resolved ??= resolve();
    return resolved;
  };
  return {
    get kind() {
      return get().kind;
    },
    get name() {
      return get().name;
    },
    get members() {
      return get().members;
    },
    get rest() {
      return get().rest;
    },
    get element() {
      return get().element;
    },
    get callResult() {
      return get().callResult;
    },
    get constructResult() {
      return get().constructResult;
    },
    get data() {
      return get().data;
    },
    get approvals() {
      return get().approvals;
    },
    get idempotents() {
      return get().idempotents;
    },
    get callApproval() {
      return approval || get().callApproval;
    },
    get constructApproval() {
      return get().constructApproval;
    },
    get callSync() {
      return get().callSync;
    },
    get callPromise() {
      return get().callPromise;
    },
    about: (member, construct) => get().about?.(member, construct),
  };
}

/**
 * The type of a position declared as a union: a handle offers only the members every non-data alternative declares
 * (what TypeScript lets code use without narrowing), is callable only when every alternative is.
 */
export function combine(types: readonly DeclaredType[]): DeclaredType {
  const unique = [...new Set(types)];
  if (unique.length === 0) return NOTHING;
  if (unique.length === 1) return unique[0]!;
  if (unique.some((type) => type.kind !== "declared")) return UNDECLARED;
  return new LazyType(() => {
    const objects = unique.filter((type) => !type.data);
    const members = new Map<string, DeclaredType>();
    const [first, ...others] = objects;
    if (first) {
      for (const [name] of first.members) {
        if (others.every((other) => other.members.has(name))) {
          members.set(
            name,
            lazyOf(() => combine(objects.map((object) => object.members.get(name)!))),
          );
        }
      }
    }
    const all = <T>(pick: (type: DeclaredType) => T | undefined): T[] | undefined => {
      const picked = objects.map(pick);
      return objects.length > 0 && picked.every((value) => value !== undefined) ? (picked as T[]) : undefined;
    };
    const calls = all((type) => type.callResult);
    const constructs = all((type) => type.constructResult);
    // A member any alternative declares with @approval waits for a person whichever alternative it is.
    const approvals = new Set(objects.flatMap((type) => [...type.approvals]));
    // A member is idempotent only when every alternative says so.
    const idempotents = new Set(
      [...(objects[0]?.idempotents ?? [])].filter((name) =>
        objects.every((type) => type.idempotents.has(name)),
      ),
    );
    return {
      members,
      approvals,
      idempotents,
      callApproval: objects.some((type) => type.callApproval),
      constructApproval: objects.some((type) => type.constructApproval),
      callSync: objects.length === 0 || objects.some((type) => type.callSync),
      callPromise: objects.length > 0 && objects.every((type) => type.callPromise),
      // What the first alternative declaring the member says of it.
      about: (member, construct) => {
        for (const object of objects) {
          const about = object.about?.(member, construct);
          if (about !== undefined) return about;
        }
        return undefined;
      },
      data: objects.length === 0,
      rest:
        objects.length > 0 && objects.every((type) => type.rest !== NOTHING)
          ? combine(objects.map((type) => type.rest))
          : NOTHING,
      element: combine(unique.map((type) => type.element)),
      ...(calls ? { callResult: combine(calls) } : {}),
      ...(constructs ? { constructResult: combine(constructs) } : {}),
    };
  });
}

/** Whether a declared type is a Promise (each alternative of a union): never a type parameter or `any`. */
function isPromise(type: ts.Type, checker: ts.TypeChecker): boolean {
  if (type.isUnion()) return type.types.every((alternative) => isPromise(alternative, checker));
  return type.getSymbol()?.getName() === "Promise" && checker.getAwaitedType(type) !== type;
}

/** A member's parameters (of its first call signature, in declaration order) and doc comment, as declared. */
function memberAbout(symbol: ts.Symbol, checker: ts.TypeChecker): MemberAbout | undefined {
  const declaration = symbol.valueDeclaration ?? symbol.getDeclarations()?.[0];
  const signature =
    declaration === undefined
      ? undefined
      : checker.getTypeOfSymbolAtLocation(symbol, declaration).getCallSignatures()[0];
  return signatureAbout(signature, symbol, checker);
}

/** The parameters of `signature` and the doc comment of `symbol` (else of the signature's declaration). */
function signatureAbout(
  signature: ts.Signature | undefined,
  symbol: ts.Symbol | undefined,
  checker: ts.TypeChecker,
): MemberAbout | undefined {
  const parameters = signature?.getParameters().map(parameterName);
  const fromSymbol =
    symbol === undefined
      ? ""
      : docText(symbol.getDocumentationComment(checker), symbol.getJsDocTags(checker));
  const doc =
    fromSymbol !== "" || signature === undefined
      ? fromSymbol
      : docText(signature.getDocumentationComment(checker), signature.getJsDocTags());
  if (parameters === undefined && doc === "") return undefined;
  return {
    ...(parameters === undefined ? {} : { parameters }),
    ...(doc === "" ? {} : { doc: cutToBytes(doc, MAX_REQUEST_DOC_BYTES) }),
  };
}

/** A parameter's name as declared: `id`, `...ids`, or a destructuring pattern as written (`{ id, title }`). */
function parameterName(parameter: ts.Symbol): string {
  const declaration = parameter.valueDeclaration;
  if (declaration === undefined || !ts.isParameter(declaration)) return parameter.getName();
  const name = ts.isIdentifier(declaration.name)
    ? declaration.name.text
    : cutToBytes(declaration.name.getText().replace(/\s+/g, " "), 200);
  return `${declaration.dotDotDotToken ? "..." : ""}${name}`;
}

/** A doc comment as text: its description, then one line per tag (`@param id the todo's id`). */
function docText(description: ts.SymbolDisplayPart[], tags: readonly ts.JSDocTagInfo[]): string {
  const lines = [ts.displayPartsToString(description).trim()];
  for (const tag of tags) {
    const text = tag.text === undefined ? "" : ts.displayPartsToString(tag.text).trim();
    lines.push(`@${tag.name}${text === "" ? "" : ` ${text}`}`);
  }
  return lines.filter((line) => line !== "").join("\n");
}

/** `text` cut to at most `maxBytes` UTF-8 bytes, a cut one ending with a marker saying so. */
function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  const marker = ` … (cut at ${maxBytes} bytes)`;
  const budget = maxBytes - Buffer.byteLength(marker);
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (bytes + size > budget) break;
    bytes += size;
    end += char.length;
  }
  return `${text.slice(0, end)}${marker}`;
}
