import { ts } from "ts-morph";
import { propertyAccess } from "../property-access.ts";

/** Built-in classes a data field may hold, by the name of their type: a value fits when it is an instance. */
const BUILT_IN_CLASSES: Record<string, (value: object) => boolean> = {
  Date: (value) => value instanceof Date,
  RegExp: (value) => value instanceof RegExp,
  URL: (value) => value instanceof URL,
  Map: (value) => value instanceof Map,
  ReadonlyMap: (value) => value instanceof Map,
  Set: (value) => value instanceof Set,
  ReadonlySet: (value) => value instanceof Set,
  ArrayBuffer: (value) => value instanceof ArrayBuffer,
  DataView: (value) => value instanceof DataView,
  Buffer: (value) => value instanceof Uint8Array,
  ...Object.fromEntries(
    [
      "Int8Array",
      "Uint8Array",
      "Uint8ClampedArray",
      "Int16Array",
      "Uint16Array",
      "Int32Array",
      "Uint32Array",
      "Float32Array",
      "Float64Array",
      "BigInt64Array",
      "BigUint64Array",
    ].map((name) => [name, (value: object) => Object.prototype.toString.call(value) === `[object ${name}]`]),
  ),
};

const MAX_SHOWN_TEXT = 40;

/**
 * Whether a decoded value fits a declared TypeScript type: primitives, literal types, enums, unions, intersections,
 * optional (undefined), arrays, tuples, records (index signatures), object types, Date/Map/Set and the other
 * built-ins a context stores. Returns the first misfit as `path: expected T, got …`, or undefined when it fits.
 * Types that cannot be checked against a value (type parameters, conditional types, functions) are accepted.
 */
export function declaredTypeProblem(
  value: unknown,
  type: ts.Type,
  checker: ts.TypeChecker,
  path: string,
): string | undefined {
  return new TypeFit(checker).problem(value, type, path);
}

/** A data field whose value does not fit its declared type, and why (`properties.when: expected Date, got null`). */
export interface DataFieldMisfit {
  field: string;
  problem: string;
}

/**
 * The one rule of what a context may hold: each data field's value fits the field's declared type. Reading a
 * context (`restoreContext`) and writing one (the runtime at the end of a run, the compiler for the host's data)
 * both call it, so a context the engine wrote always loads again. `valueOfField` is called only for a field whose type
 * says something (not `any`/`unknown`), so a caller holding wire text decodes only the fields the rule looks at.
 */
export function dataFieldMisfits(
  declaredTypes: { program: ts.Program; data: ReadonlyMap<string, ts.Type> },
  fields: Iterable<string>,
  valueOfField: (field: string) => unknown,
): DataFieldMisfit[] {
  const misfits: DataFieldMisfit[] = [];
  let fit: TypeFit | undefined;
  for (const field of fields) {
    const type = declaredTypes.data.get(field);
    if (type === undefined || type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) continue;
    fit ??= new TypeFit(declaredTypes.program.getTypeChecker());
    const problem = fit.problem(valueOfField(field), type, `properties${propertyAccess(field)}`);
    if (problem !== undefined) misfits.push({ field, problem });
  }
  return misfits;
}

class TypeFit {
  readonly #checker: ts.TypeChecker;
  /** Objects being checked against a type, on the current path: a circular reference ends there. */
  readonly #visiting = new Map<object, Set<ts.Type>>();

  constructor(checker: ts.TypeChecker) {
    this.#checker = checker;
  }

  problem(value: unknown, type: ts.Type, path: string): string | undefined {
    const flags = type.flags;
    if (flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return undefined;
    if (type.isUnion()) {
      const fits = type.types.some((member) => this.problem(value, member, path) === undefined);
      if (fits) return undefined;
      // One object-like member: its own, deeper message says more than "expected A | B".
      const objects = type.types.filter((member) => !(member.flags & NULLISH_OR_PRIMITIVE));
      if (objects.length === 1 && typeof value === "object" && value !== null)
        return this.problem(value, objects[0]!, path);
      return this.#misfit(value, type, path);
    }
    if (type.isIntersection()) {
      for (const member of type.types) {
        const problem = this.problem(value, member, path);
        if (problem !== undefined) return problem;
      }
      return undefined;
    }
    if (flags & ts.TypeFlags.Never) return this.#misfit(value, type, path);
    if (flags & (ts.TypeFlags.TypeParameter | ts.TypeFlags.Conditional | ts.TypeFlags.Substitution))
      return undefined;
    if (flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void))
      return this.#expect(value === undefined, value, type, path);
    if (flags & ts.TypeFlags.Null) return this.#expect(value === null, value, type, path);
    if (type.isStringLiteral() || type.isNumberLiteral())
      return this.#expect(value === type.value, value, type, path);
    if (flags & ts.TypeFlags.BooleanLiteral) {
      const expected = this.#checker.typeToString(type) === "true";
      return this.#expect(value === expected, value, type, path);
    }
    if (flags & ts.TypeFlags.BigIntLiteral) {
      const literal = (type as ts.BigIntLiteralType).value;
      const text = `${literal.negative ? "-" : ""}${literal.base10Value}`;
      return this.#expect(typeof value === "bigint" && value.toString() === text, value, type, path);
    }
    if (flags & ts.TypeFlags.StringLike) return this.#expect(typeof value === "string", value, type, path);
    if (flags & ts.TypeFlags.NumberLike) return this.#expect(typeof value === "number", value, type, path);
    if (flags & ts.TypeFlags.BooleanLike) return this.#expect(typeof value === "boolean", value, type, path);
    if (flags & ts.TypeFlags.BigIntLike) return this.#expect(typeof value === "bigint", value, type, path);
    if (flags & ts.TypeFlags.ESSymbolLike) return this.#expect(typeof value === "symbol", value, type, path);
    if (flags & ts.TypeFlags.NonPrimitive)
      return this.#expect(typeof value === "object" && value !== null, value, type, path);
    if (flags & ts.TypeFlags.Object) return this.#objectProblem(value, type as ts.ObjectType, path);
    return undefined;
  }

  #objectProblem(value: unknown, type: ts.ObjectType, path: string): string | undefined {
    if (type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) return undefined;
    if (typeof value !== "object" || value === null) return this.#misfit(value, type, path);
    // A value met again while it is being checked against the same type (a cycle) fits as far as this path goes.
    const visiting = this.#visiting.get(value) ?? new Set<ts.Type>();
    if (visiting.has(type)) return undefined;
    visiting.add(type);
    this.#visiting.set(value, visiting);
    try {
      return this.#shapeProblem(value, type, path);
    } finally {
      visiting.delete(type);
    }
  }

  #shapeProblem(value: object, type: ts.ObjectType, path: string): string | undefined {
    if (this.#checker.isTupleType(type)) return this.#tupleProblem(value, type as ts.TypeReference, path);
    if (this.#checker.isArrayType(type)) {
      if (!Array.isArray(value)) return this.#misfit(value, type, path);
      const [element] = this.#checker.getTypeArguments(type as ts.TypeReference);
      // `never[]` is what TypeScript infers for `field = []`: it says nothing about the elements.
      if (!element || element.flags & ts.TypeFlags.Never) return undefined;
      for (let index = 0; index < value.length; index++) {
        const problem = this.problem(value[index], element, `${path}[${index}]`);
        if (problem !== undefined) return problem;
      }
      return undefined;
    }
    const builtIn = builtInName(type);
    if (builtIn !== undefined) {
      if (!BUILT_IN_CLASSES[builtIn]!(value)) return this.#misfit(value, type, path);
      return this.#collectionProblem(value, type, path);
    }
    if (Array.isArray(value) || isBuiltInInstance(value)) return this.#misfit(value, type, path);
    return this.#membersProblem(value as Record<string, unknown>, type, path);
  }

  #tupleProblem(value: object, type: ts.TypeReference, path: string): string | undefined {
    if (!Array.isArray(value)) return this.#misfit(value, type, path);
    const target = type.target as ts.TupleType;
    const elements = this.#checker.getTypeArguments(type);
    const required = target.minLength;
    const rest = target.elementFlags.findIndex((flag) => (flag & ts.ElementFlags.Variable) !== 0);
    if (value.length < required || (rest === -1 && value.length > elements.length))
      return this.#misfit(value, type, path);
    for (let index = 0; index < value.length; index++) {
      const element = rest !== -1 && index >= rest ? elements[rest] : elements[index];
      if (!element) continue;
      const problem = this.problem(value[index], element, `${path}[${index}]`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }

  #collectionProblem(value: object, type: ts.ObjectType, path: string): string | undefined {
    const argumentsOf = (type as ts.TypeReference).target
      ? this.#checker.getTypeArguments(type as ts.TypeReference)
      : [];
    if (value instanceof Map) {
      const [keyType, valueType] = argumentsOf;
      for (const [key, entry] of value) {
        const keyProblem = keyType && this.problem(key, keyType, `${path} (key ${keyText(key)})`);
        if (keyProblem !== undefined) return keyProblem;
        const entryProblem = valueType && this.problem(entry, valueType, `${path}.get(${keyText(key)})`);
        if (entryProblem !== undefined) return entryProblem;
      }
    } else if (value instanceof Set) {
      const [elementType] = argumentsOf;
      for (const element of value) {
        const problem =
          elementType && this.problem(element, elementType, `${path} (element ${keyText(element)})`);
        if (problem !== undefined) return problem;
      }
    }
    return undefined;
  }

  #membersProblem(value: Record<string, unknown>, type: ts.ObjectType, path: string): string | undefined {
    const declared = new Set<string>();
    for (const property of this.#checker.getPropertiesOfType(type)) {
      const name = property.getName();
      declared.add(name);
      const optional = (property.flags & ts.SymbolFlags.Optional) !== 0;
      if (!Object.hasOwn(value, name)) {
        if (optional) continue;
        const expected = this.#checker.typeToString(this.#checker.getTypeOfSymbol(property));
        return `${path}${propertyAccess(name)}: expected ${expected}, missing`;
      }
      const problem = this.problem(
        value[name],
        this.#checker.getTypeOfSymbol(property),
        `${path}${propertyAccess(name)}`,
      );
      if (problem !== undefined) return problem;
    }
    const stringIndex = this.#checker.getIndexInfoOfType(type, ts.IndexKind.String)?.type;
    const numberIndex = this.#checker.getIndexInfoOfType(type, ts.IndexKind.Number)?.type;
    for (const [key, entry] of Object.entries(value)) {
      if (declared.has(key)) continue;
      const indexType = numberIndex && /^-?\d+(\.\d+)?$/.test(key) ? numberIndex : stringIndex;
      if (!indexType) continue;
      const problem = this.problem(entry, indexType, `${path}${propertyAccess(key)}`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }

  #expect(fits: boolean, value: unknown, type: ts.Type, path: string): string | undefined {
    return fits ? undefined : this.#misfit(value, type, path);
  }

  #misfit(value: unknown, type: ts.Type, path: string): string {
    return `${path}: expected ${this.#checker.typeToString(type)}, got ${describe(value)}`;
  }
}

const NULLISH_OR_PRIMITIVE =
  ts.TypeFlags.Undefined |
  ts.TypeFlags.Null |
  ts.TypeFlags.Void |
  ts.TypeFlags.StringLike |
  ts.TypeFlags.NumberLike |
  ts.TypeFlags.BooleanLike |
  ts.TypeFlags.BigIntLike |
  ts.TypeFlags.ESSymbolLike;

/** The name of a built-in class type (Date, Map, …) declared by a library `.d.ts`, or undefined. */
function builtInName(type: ts.Type): string | undefined {
  const symbol = type.getSymbol();
  if (!symbol || !Object.hasOwn(BUILT_IN_CLASSES, symbol.getName())) return undefined;
  const fromLibrary = (symbol.getDeclarations() ?? []).every(
    (declaration) => declaration.getSourceFile().isDeclarationFile,
  );
  return fromLibrary ? symbol.getName() : undefined;
}

function isBuiltInInstance(value: object): boolean {
  return Object.values(BUILT_IN_CLASSES).some((test) => test(value));
}

/** A Map key or Set element as it reads in a path: `"a"`, `3`, or its description. */
function keyText(key: unknown): string {
  if (typeof key === "string") return JSON.stringify(key);
  if (typeof key === "number" || typeof key === "boolean") return String(key);
  if (typeof key === "bigint") return `${key}n`;
  return describe(key);
}

/** A short description of a value for a message: its kind and, for scalars, the value itself. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (typeof value === "string") {
    const shown = value.length > MAX_SHOWN_TEXT ? `${value.slice(0, MAX_SHOWN_TEXT)}…` : value;
    return `string ${JSON.stringify(shown)}`;
  }
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  if (typeof value === "bigint") return `bigint ${value}n`;
  if (typeof value === "symbol" || typeof value === "function") return `a ${typeof value}`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  for (const name of Object.keys(BUILT_IN_CLASSES))
    if (name !== "Buffer" && !name.startsWith("Readonly") && BUILT_IN_CLASSES[name]!(value as object))
      return `a ${name}`;
  return "an object";
}
