import type { HandleShape } from "../protocol.ts";

/*
 * The wire encoding: everything that crosses host <-> sandbox process <-> isolate is a string in this format.
 *
 * The text is a JSON array of nodes; node 0 is the root. A node is a JSON string, boolean, null or finite
 * number standing for itself, or a tagged array whose children are indices of other nodes (so shared and
 * cyclic references survive):
 *   ["U"] undefined · ["N", "NaN" | "Infinity" | "-Infinity" | "-0"] · ["B", digits] bigint
 *   ["A", i...] array · ["O", key, i, key, i...] plain object · ["D", ms | null] Date · ["R", source, flags]
 *   ["M", k, v, ...] Map · ["S", i...] Set · ["E", name, message, code?] Error · ["H", shape] host handle
 *   ["T", kind, base64] a copy of binary data: a typed array of `kind`, an "ArrayBuffer" or a "DataView" (a Node
 *   Buffer travels as the Uint8Array of exactly its own bytes, never its pool)
 *
 * Limits bound the EXPANDED value, not the wire text: shared references are written once but a decoder that
 * builds them, or a host that formats or persists them, walks every occurrence. `measure` sizes every node once
 * (memoised, in linear time of the wire) as if shared nodes were copied, and stops at the first node past the
 * budget; bigints count their decimal digits and are capped at MAX_BIGINT_DIGITS, nesting at MAX_DEPTH levels.
 *
 * `createWireCodec` runs in both realms: on the host (sandbox/wire.ts wraps it) and inside the isolate, where the
 * isolate script (membrane/isolate/, bundled by esbuild) calls it before model code runs, so the intrinsics it
 * captures are the realm's own.
 */

/** What the codec reports about a value it cannot encode: its path (e.g. `moss.callback`) and what it is. */
export interface WireUnsupported {
  path: string;
  description: string;
}

/** Options of the raw codec `encode` (shared by the host module and the isolate bootstrap). */
export interface WireEncodeOptions {
  /** Path of the root in messages, e.g. `moss.notes` or `argument 0`. Default `value`. */
  rootPath?: string;
  /** Consulted first for every object: a handle for a known proxy, `null` for one that may not cross here. */
  knownHandle?: (value: object) => HandleShape | null | undefined;
  /** Turns a value that is not plain data into a handle, or returns undefined when it cannot cross. */
  handleOf?: (value: object, path: string) => HandleShape | undefined;
  /** Receives values that cannot cross; they are left out (undefined in arrays). Without it, encoding throws. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** Upper bound on the encoded length in characters; beyond it a `WireLimitError` is thrown. */
  maxLength?: number;
  /** Upper bound on the expanded size (see `measure`); beyond it a `WireLimitError` is thrown. */
  maxExpanded?: number;
}

/** Options of `encodeFields`: each field is bounded on its own and a field that does not fit is left out. */
export interface WireFieldsOptions extends Omit<WireEncodeOptions, "onUnsupported"> {
  /** A field left out: over a limit, or holding a value that cannot cross (`reason` says which). */
  onRefused: (field: string, reason: string) => void;
  /** Receives values inside a field that cannot cross; the field is kept without them. Without it, the field is refused. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
}

/** Options of the raw codec `decode`. */
export interface WireDecodeOptions {
  /** Builds the value standing for a handle (a proxy inside the isolate, the host object on the host). */
  onHandle?: (shape: HandleShape) => unknown;
  /** Upper bound on the expanded size, checked on the parsed wire before anything is built. */
  maxExpanded?: number;
  /** Decode a record field by field: a field over the budget is left out and reported here (root must be an object). */
  onRefused?: (field: string, reason: string) => void;
}

/** The codec produced by `createWireCodec`. */
export interface WireCodec {
  encode(value: unknown, options?: WireEncodeOptions): string;
  /** Encodes `record[field]` for each field into one wire object, refusing each field that does not fit on its own. */
  encodeFields(
    record: object,
    fields: readonly string[],
    options: WireFieldsOptions,
  ): { text: string; expanded: number };
  decode(text: string, options?: WireDecodeOptions): unknown;
  /** Expanded size of wire text (throws a `WireLimitError` past `maxExpanded`, a TypeError for malformed text). */
  measure(text: string, maxExpanded?: number): number;
  /** Readable description of a value that cannot cross ("a function", "an instance of Point", ...). */
  describe(value: unknown): string;
  /** The fixed bounds every value obeys. */
  readonly bounds: { readonly maxDepth: number; readonly maxBigIntDigits: number };
}

/** Builds the wire codec from the intrinsics of the realm it runs in; self-contained (see the file comment). */
export function createWireCodec(): WireCodec {
  /** Deepest nesting any value may have (the root is level 0). */
  const MAX_DEPTH = 1000;
  /** Longest bigint in decimal digits (Python's default int/str conversion limit): decimal conversion is quadratic. */
  const MAX_BIGINT_DIGITS = 4300;
  const ReflectApply = Reflect.apply;
  const ReflectDefineProperty = Reflect.defineProperty;
  const ReflectGetPrototypeOf = Reflect.getPrototypeOf;
  const ReflectSetPrototypeOf = Reflect.setPrototypeOf;
  const ObjectKeys = Object.keys;
  const ObjectPrototype = Object.prototype;
  const ObjectCreate = Object.create;
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ArrayPrototype = Array.prototype;
  const Uint8ArrayCtor = Uint8Array;
  const Uint16ArrayCtor = Uint16Array;
  const Float64ArrayCtor = Float64Array;
  const ArrayBufferCtor = ArrayBuffer;
  const ArrayIsArray = Array.isArray;
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const NumberIsFinite = Number.isFinite;
  const NumberIsInteger = Number.isInteger;
  const ObjectIs = Object.is;
  const StringCtor = String;
  const StringFromCharCode = String.fromCharCode;
  const StringCharCodeAt = String.prototype.charCodeAt;
  const BigIntCtor = BigInt;
  const BigIntToString = BigInt.prototype.toString;
  const DateCtor = Date;
  const RegExpCtor = RegExp;
  const MapCtor = Map;
  const SetCtor = Set;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const DateGetTime = Date.prototype.getTime;
  const getter = (target: object, key: PropertyKey): Function =>
    ObjectGetOwnPropertyDescriptor(target, key)!.get!;
  const RegExpSource = getter(RegExp.prototype, "source");
  const RegExpFlags = getter(RegExp.prototype, "flags");
  const MapSize = getter(Map.prototype, "size");
  const SetSize = getter(Set.prototype, "size");
  const TypedArrayPrototype = ReflectGetPrototypeOf(Uint8Array.prototype) as object;
  // Returns the kind of a real typed array (any subclass, a Node Buffer too) and undefined for anything else.
  const TypedArrayKind = getter(TypedArrayPrototype, Symbol.toStringTag);
  const TypedArrayBuffer = getter(TypedArrayPrototype, "buffer");
  const TypedArrayByteOffset = getter(TypedArrayPrototype, "byteOffset");
  const TypedArrayByteLength = getter(TypedArrayPrototype, "byteLength");
  const ArrayBufferByteLength = getter(ArrayBuffer.prototype, "byteLength");
  const SharedArrayBufferByteLength =
    typeof SharedArrayBuffer === "function" ? getter(SharedArrayBuffer.prototype, "byteLength") : undefined;
  const DataViewBuffer = getter(DataView.prototype, "buffer");
  const DataViewByteOffset = getter(DataView.prototype, "byteOffset");
  const DataViewByteLength = getter(DataView.prototype, "byteLength");
  const MapEntries = Map.prototype.entries;
  const MapSet = Map.prototype.set;
  const MapGet = Map.prototype.get;
  const MapDelete = Map.prototype.delete;
  const SetValues = Set.prototype.values;
  const SetAdd = Set.prototype.add;
  const IteratorNext = Object.getPrototypeOf(new Map().entries()).next;
  const SetIteratorNext = Object.getPrototypeOf(new Set().values()).next;
  const ObjectToString = Object.prototype.toString;
  const FunctionToString = Function.prototype.toString;
  const errorConstructors: Record<string, ErrorConstructor> = {
    __proto__: null,
    Error,
    TypeError,
    RangeError,
    SyntaxError,
    ReferenceError,
    EvalError,
    URIError,
  } as unknown as Record<string, ErrorConstructor>;
  type BinaryConstructor = new (buffer: ArrayBuffer) => ArrayBufferView;
  const binaryConstructors: Record<string, BinaryConstructor> = {
    __proto__: null,
    Int8Array,
    Uint8Array,
    Uint8ClampedArray,
    Int16Array,
    Uint16Array,
    Int32Array,
    Uint32Array,
    Float32Array,
    Float64Array,
    BigInt64Array,
    BigUint64Array,
    DataView,
  } as unknown as Record<string, BinaryConstructor>;
  const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const base64Codes = new Uint8ArrayCtor(64);
  const base64Values = new Uint8ArrayCtor(128);
  for (let i = 0; i < 128; i++) base64Values[i] = 255;
  for (let i = 0; i < 64; i++) {
    base64Codes[i] = ReflectApply(StringCharCodeAt, BASE64, [i]) as number;
    base64Values[base64Codes[i]!] = i;
  }

  function define(target: object, key: PropertyKey, value: unknown): void {
    ReflectDefineProperty(target, key, {
      __proto__: null,
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    } as PropertyDescriptor);
  }

  /**
   * A wire node: an array without a prototype, so writing into it with plain assignment can never reach a setter
   * that model code planted on `Array.prototype`, and `JSON.stringify` finds no inherited `toJSON` on it.
   */
  function nullArray(...items: unknown[]): unknown[] {
    ReflectSetPrototypeOf(items, null);
    return items;
  }

  /** A prototype-less copy of a handle shape (copied by index: no iterator model code could have replaced). */
  function plainShape(shape: HandleShape): HandleShape {
    const copy = ObjectCreate(null) as HandleShape;
    copy.id = shape.id;
    copy.kind = shape.kind;
    copy.methods = copyStrings(shape.methods);
    copy.properties = copyStrings(shape.properties);
    return copy;
  }

  function copyStrings(list: readonly string[]): string[] {
    const copy = nullArray() as string[];
    for (let i = 0; i < list.length; i++) copy[i] = StringCtor(list[i]);
    return copy;
  }

  function hasBrand(method: Function, value: unknown): boolean {
    try {
      ReflectApply(method, value, []);
      return true;
    } catch {
      return false;
    }
  }

  function isErrorLike(value: object): boolean {
    return ReflectApply(ObjectToString, value, []) === "[object Error]";
  }

  function isPlainObject(value: object): boolean {
    const prototype = ReflectGetPrototypeOf(value);
    return prototype === ObjectPrototype || prototype === null;
  }

  function limitError(message: string): Error {
    const error = new ErrorCtor(message);
    error.name = "WireLimitError";
    return error;
  }

  function constructorName(value: object): string | undefined {
    try {
      const prototype = ReflectGetPrototypeOf(value) as { constructor?: unknown } | null;
      const ctor = prototype?.constructor;
      if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "") return ctor.name;
    } catch {}
    return undefined;
  }

  function describe(value: unknown): string {
    if (typeof value === "function") {
      let source = "";
      try {
        source = ReflectApply(FunctionToString, value, []) as string;
      } catch {}
      if (source.startsWith("class")) return "a class";
      return "a function";
    }
    if (typeof value === "symbol") return "a symbol";
    if (typeof value === "object" && value !== null) {
      if (typeof (value as { then?: unknown }).then === "function") return "a Promise (await it first)";
      const name = constructorName(value);
      return name === undefined ? "an object that is not plain data" : `an instance of ${name}`;
    }
    return `a ${typeof value}`;
  }

  // ---- binary data: always a copy of exactly the bytes the view shows ------------------------------------------
  /** `[kind, bytes]` for a typed array, ArrayBuffer or DataView (a view of exactly its bytes), else undefined. */
  function binaryOf(object: object, tag: string): [string, Uint8Array] | undefined {
    const kind = ReflectApply(TypedArrayKind, object, []) as string | undefined;
    if (typeof kind === "string") {
      const buffer = ReflectApply(TypedArrayBuffer, object, []) as ArrayBuffer;
      const offset = ReflectApply(TypedArrayByteOffset, object, []) as number;
      const length = ReflectApply(TypedArrayByteLength, object, []) as number;
      return [kind, bytesOf(buffer, offset, length)];
    }
    if (tag === "[object ArrayBuffer]" && hasBrand(ArrayBufferByteLength, object)) {
      const length = ReflectApply(ArrayBufferByteLength, object, []) as number;
      return ["ArrayBuffer", bytesOf(object as ArrayBuffer, 0, length)];
    }
    if (
      tag === "[object SharedArrayBuffer]" &&
      SharedArrayBufferByteLength !== undefined &&
      hasBrand(SharedArrayBufferByteLength, object)
    ) {
      const length = ReflectApply(SharedArrayBufferByteLength, object, []) as number;
      return ["ArrayBuffer", bytesOf(object as ArrayBuffer, 0, length)];
    }
    if (tag === "[object DataView]" && hasBrand(DataViewByteLength, object)) {
      const buffer = ReflectApply(DataViewBuffer, object, []) as ArrayBuffer;
      const offset = ReflectApply(DataViewByteOffset, object, []) as number;
      const length = ReflectApply(DataViewByteLength, object, []) as number;
      return ["DataView", bytesOf(buffer, offset, length)];
    }
    return undefined;
  }

  /** A byte view of exactly the bytes shown (never the rest of the buffer); it is read once, into base64. */
  function bytesOf(buffer: ArrayBuffer, offset: number, length: number): Uint8Array {
    if (length === 0) return new Uint8ArrayCtor(0);
    return new Uint8ArrayCtor(buffer, offset, length);
  }

  function toBase64(bytes: Uint8Array): string {
    let text = "";
    let chunk = nullArray() as number[];
    const length = bytes.length;
    for (let i = 0; i < length; i += 3) {
      const a = bytes[i]!;
      const b = i + 1 < length ? bytes[i + 1]! : 0;
      const c = i + 2 < length ? bytes[i + 2]! : 0;
      chunk[chunk.length] = base64Codes[a >> 2]!;
      chunk[chunk.length] = base64Codes[((a & 3) << 4) | (b >> 4)]!;
      chunk[chunk.length] = i + 1 < length ? base64Codes[((b & 15) << 2) | (c >> 6)]! : 61;
      chunk[chunk.length] = i + 2 < length ? base64Codes[c & 63]! : 61;
      if (chunk.length >= 8192) {
        text += ReflectApply(StringFromCharCode, null, chunk) as string;
        chunk = nullArray() as number[];
      }
    }
    if (chunk.length > 0) text += ReflectApply(StringFromCharCode, null, chunk) as string;
    return text;
  }

  /** Byte length of valid base64 text, or -1. */
  function base64Length(text: unknown): number {
    if (typeof text !== "string" || text.length % 4 !== 0) return -1;
    let padding = 0;
    if (text.length > 0 && ReflectApply(StringCharCodeAt, text, [text.length - 1]) === 61) padding++;
    if (text.length > 1 && ReflectApply(StringCharCodeAt, text, [text.length - 2]) === 61) padding++;
    return (text.length / 4) * 3 - padding;
  }

  function fromBase64(text: string, length: number): ArrayBuffer {
    const buffer = new ArrayBufferCtor(length);
    const bytes = new Uint8ArrayCtor(buffer);
    let out = 0;
    for (let i = 0; i < text.length; i += 4) {
      let group = 0;
      for (let j = 0; j < 4; j++) {
        const code = ReflectApply(StringCharCodeAt, text, [i + j]) as number;
        let value = code < 128 ? base64Values[code]! : 255;
        if (code === 61 && i + 4 === text.length && (j === 3 || (j === 2 && length % 3 === 1))) value = 0;
        if (value === 255) throw new TypeErrorCtor("invalid wire text: bad base64 data");
        group = (group << 6) | value;
      }
      if (out < length) bytes[out++] = (group >> 16) & 255;
      if (out < length) bytes[out++] = (group >> 8) & 255;
      if (out < length) bytes[out++] = group & 255;
    }
    return buffer;
  }

  /** The element size of a binary kind (1 for ArrayBuffer and DataView), or 0 for an unknown kind. */
  function elementSize(kind: unknown): number {
    if (kind === "ArrayBuffer" || kind === "DataView") return 1;
    if (typeof kind !== "string") return 0;
    const ctor = binaryConstructors[kind] as unknown as { BYTES_PER_ELEMENT?: number } | undefined;
    return ctor === undefined ? 0 : (ctor.BYTES_PER_ELEMENT ?? 0);
  }

  function isDecimal(text: unknown): text is string {
    if (typeof text !== "string") return false;
    const start = text.length > 1 && ReflectApply(StringCharCodeAt, text, [0]) === 45 ? 1 : 0;
    if (start === text.length) return false;
    for (let i = start; i < text.length; i++) {
      const code = ReflectApply(StringCharCodeAt, text, [i]) as number;
      if (code < 48 || code > 57) return false;
    }
    return true;
  }

  function messageOf(error: unknown): string {
    try {
      const message = (error as { message?: unknown } | null)?.message;
      return typeof message === "string" ? message : StringCtor(error);
    } catch {
      return "an error that cannot be shown";
    }
  }

  function isLimit(error: unknown): boolean {
    try {
      return (error as { name?: unknown } | null)?.name === "WireLimitError";
    } catch {
      return false;
    }
  }

  // ---- expanded size ------------------------------------------------------------------------------------------
  /**
   * Sizes nodes of a wire table as if every shared node were copied at each use (what a host that formats or
   * persists the value walks): a back edge (a cycle) counts as a reference, and the size of every node whose
   * subtree has no back edge above it is memoised, so each such node is sized once. A node inside a cycle is sized
   * again at each use (its expansion depends on the path), which stays bounded: every node sized adds at least 4 to
   * a total that stops at the budget. `measure` throws a `WireLimitError` at the first node past the budget or past
   * MAX_DEPTH, and a TypeError for a malformed node; nodes that were being sized when it threw are refused for good.
   */
  function createMeasurer(table: unknown[]) {
    // Per node, grown with the table (the encoder's table grows while it is measured field by field).
    let capacity = 0;
    let state = new Uint8ArrayCtor(0); // 0: new · 1: being sized · 2: sized · 3: refused
    let sizes = new Float64ArrayCtor(0);
    let heights = new Uint16ArrayCtor(0);
    let positions = new Uint16ArrayCtor(0);
    const refusals = new MapCtor<number, Error>();
    const stack = nullArray() as number[];

    function grow(): void {
      if (table.length <= capacity) return;
      capacity = table.length * 2;
      const grownState = new Uint8ArrayCtor(capacity);
      const grownSizes = new Float64ArrayCtor(capacity);
      const grownHeights = new Uint16ArrayCtor(capacity);
      const grownPositions = new Uint16ArrayCtor(capacity);
      for (let i = 0; i < state.length; i++) {
        grownState[i] = state[i]!;
        grownSizes[i] = sizes[i]!;
        grownHeights[i] = heights[i]!;
        grownPositions[i] = positions[i]!;
      }
      state = grownState;
      sizes = grownSizes;
      heights = grownHeights;
      positions = grownPositions;
    }
    let budget = 0;
    // The lowest stack position a back edge in the last sized subtree reached (Infinity: none, the size is final).
    let reached = Infinity;

    function tooLarge(): Error {
      return limitError(`is larger than the limit of ${budget} bytes once expanded`);
    }

    function tooDeep(): Error {
      return limitError(`is nested deeper than ${MAX_DEPTH} levels`);
    }

    function bad(index: number): Error {
      return new TypeErrorCtor(`invalid wire text: bad node ${index}`);
    }

    function text(value: unknown, index: number): number {
      if (typeof value !== "string") throw bad(index);
      return value.length;
    }

    // Height of the node last sized (levels below it).
    let lastHeight = 0;
    // For the node being sized: the lowest stack position its children reached, and its height so far.
    let low = Infinity;
    let height = 0;

    // Sizes a child and folds what it reached and its height into the node being sized.
    function sizeChild(child: unknown, depth: number): number {
      const result = size(child, depth);
      if (reached < low) low = reached;
      if (lastHeight + 1 > height) height = lastHeight + 1;
      return result;
    }

    function size(index: unknown, depth: number): number {
      if (typeof index !== "number" || !NumberIsInteger(index) || index < 0 || index >= table.length) {
        throw new TypeErrorCtor(`invalid wire text: bad node index ${StringCtor(index)}`);
      }
      const known = state[index];
      reached = Infinity;
      lastHeight = 0;
      if (known === 2) {
        lastHeight = heights[index]!;
        if (depth + heights[index]! > MAX_DEPTH) throw tooDeep();
        if (sizes[index]! > budget) throw tooLarge();
        return sizes[index]!;
      }
      if (known === 1) {
        reached = positions[index]!;
        return 8;
      }
      if (known === 3) throw ReflectApply(MapGet, refusals, [index]) as Error;
      if (depth > MAX_DEPTH) throw tooDeep();
      const node = table[index];
      let total: number;
      if (node === null || typeof node !== "object") {
        if (node === null) total = 4;
        else if (typeof node === "string") total = node.length + 2;
        else if (typeof node === "number") total = 12;
        else if (typeof node === "boolean") total = 5;
        else throw bad(index);
        if (total > budget) throw tooLarge();
        heights[index] = 0;
      } else {
        if (!ArrayIsArray(node) || typeof node[0] !== "string") throw bad(index);
        const parts = node as unknown[];
        const count = parts.length;
        state[index] = 1;
        const position = stack.length;
        positions[index] = position;
        stack[position] = index;
        const outerLow = low;
        const outerHeight = height;
        low = Infinity;
        height = 0;
        total = 2;
        switch (parts[0]) {
          case "U":
            total = 9;
            break;
          case "N":
            total = 12;
            break;
          case "B": {
            const digits = text(parts[1], index);
            const sign = digits > 0 && ReflectApply(StringCharCodeAt, parts[1], [0]) === 45 ? 1 : 0;
            if (digits - sign > MAX_BIGINT_DIGITS) {
              throw limitError(`holds a bigint of more than ${MAX_BIGINT_DIGITS} digits`);
            }
            total = digits + 1;
            break;
          }
          case "D":
            total = 26;
            break;
          case "R":
            total = text(parts[1], index) + text(parts[2], index) + 4;
            break;
          case "E":
            total = text(parts[1], index) + text(parts[2], index) + 24;
            break;
          case "H":
            total = 16;
            break;
          case "T": {
            const bytes = base64Length(parts[2]);
            const unit = elementSize(parts[1]);
            if (bytes < 0 || unit === 0 || bytes % unit !== 0) throw bad(index);
            total = bytes + 16;
            break;
          }
          case "A":
          case "S":
            for (let i = 1; i < count; i++) {
              total += 1 + sizeChild(parts[i], depth + 1);
              if (total > budget) throw tooLarge();
            }
            break;
          case "O":
            for (let i = 1; i + 1 < count; i += 2) {
              total += text(parts[i], index) + 4 + sizeChild(parts[i + 1], depth + 1);
              if (total > budget) throw tooLarge();
            }
            break;
          case "M":
            for (let i = 1; i + 1 < count; i += 2) {
              total += 2 + sizeChild(parts[i], depth + 1) + sizeChild(parts[i + 1], depth + 1);
              if (total > budget) throw tooLarge();
            }
            break;
          default:
            throw bad(index);
        }
        if (total > budget) throw tooLarge();
        stack.length--;
        const nodeLow = low;
        const nodeHeight = height;
        low = outerLow;
        height = outerHeight;
        lastHeight = nodeHeight;
        if (nodeLow < position) {
          // Part of a cycle through a node above it: its size holds for this path only.
          state[index] = 0;
          reached = nodeLow;
          return total;
        }
        heights[index] = nodeHeight;
      }
      state[index] = 2;
      sizes[index] = total;
      reached = Infinity;
      return total;
    }

    return {
      /** Expanded size of node `index` reached at `depth`, within `limit`. */
      measure(index: number, depth: number, limit: number): number {
        budget = limit;
        grow();
        try {
          return size(index, depth);
        } catch (error) {
          for (let i = 0; i < stack.length; i++) {
            state[stack[i]!] = 3;
            ReflectApply(MapSet, refusals, [stack[i], error]);
          }
          stack.length = 0;
          low = Infinity;
          height = 0;
          throw error;
        }
      },
      /** Forgets nodes from `start` on (the encoder took them back). */
      forget(start: number): void {
        for (let i = start; i < capacity; i++) state[i] = 0;
      },
    };
  }

  // ---- encode -------------------------------------------------------------------------------------------------
  function createEncoder(options: WireEncodeOptions) {
    const nodes = nullArray();
    const seen = new MapCtor<unknown, number>();
    // Objects in the order they were registered, so a refused field can be taken back.
    const registered = nullArray() as object[];
    const handleOf = options.handleOf;
    const knownHandle = options.knownHandle;
    const onUnsupported = options.onUnsupported;
    const maxLength = options.maxLength ?? Infinity;
    const rootPath = options.rootPath ?? "value";
    // Where the visit is: numbers are array indices, strings object keys, [text] a literal segment. A path string is
    // only built when something is reported, so large values pay nothing for it.
    const segments = nullArray();
    let length = 2;

    // The encoded text is a first, cheap bound: with an expanded-size budget its slack is wide enough that text past
    // it always stands for a value past the budget, so it is reported as such.
    const tooLong =
      options.maxExpanded === undefined
        ? `exceeds the limit of ${maxLength} characters once encoded`
        : `is larger than the limit of ${options.maxExpanded} bytes once expanded`;

    function charge(amount: number): void {
      length += amount;
      if (length > maxLength) throw limitError(tooLong);
    }

    function currentPath(): string {
      let path = rootPath;
      for (let i = 0; i < segments.length; i++) {
        const segment = segments[i];
        if (typeof segment === "number") path = `${path}[${segment}]`;
        else if (typeof segment === "string") path = path === "" ? segment : `${path}.${segment}`;
        else path = `${path}${(segment as string[])[0]}`;
      }
      return path;
    }

    function push(node: unknown): number {
      const index = nodes.length;
      nodes[index] = node;
      return index;
    }

    function visitAt(segment: unknown, value: unknown): number {
      segments[segments.length] = segment;
      if (segments.length > MAX_DEPTH) throw limitError(`is nested deeper than ${MAX_DEPTH} levels`);
      const index = visit(value);
      segments.length--;
      return index;
    }

    function bigint(value: bigint): string {
      // Decimal conversion is quadratic: a hexadecimal one (linear) tells the size first.
      const hex = ReflectApply(BigIntToString, value, [16]) as string;
      const tooLong = limitError(`holds a bigint of more than ${MAX_BIGINT_DIGITS} digits`);
      if ((hex.length - 2) * 1.2 > MAX_BIGINT_DIGITS) throw tooLong;
      const digits = StringCtor(value);
      if (digits.length - (value < 0n ? 1 : 0) > MAX_BIGINT_DIGITS) throw tooLong;
      return digits;
    }

    // Returns the node index, or -1 when the value cannot cross (reported through onUnsupported).
    function visit(value: unknown): number {
      switch (typeof value) {
        case "string":
          charge(value.length + 3);
          return push(value);
        case "boolean":
          charge(6);
          return push(value);
        case "number":
          charge(24);
          if (NumberIsFinite(value) && !ObjectIs(value, -0)) return push(value);
          return push(nullArray("N", ObjectIs(value, -0) ? "-0" : StringCtor(value)));
        case "bigint": {
          const digits = bigint(value);
          charge(digits.length + 8);
          return push(nullArray("B", digits));
        }
        case "undefined":
          charge(6);
          return push(nullArray("U"));
        case "object":
        case "function":
          break;
        default:
          return unsupported(value);
      }
      if (value === null) {
        charge(5);
        return push(null);
      }
      const known = ReflectApply(MapGet, seen, [value]) as number | undefined;
      if (known !== undefined) return known;
      const object = value as object;
      if (knownHandle !== undefined) {
        const shape = knownHandle(object);
        if (shape === null) return unsupported(object, "a host object");
        if (shape !== undefined) return registerHandle(object, shape);
      }
      if (typeof object === "function") return handleOrUnsupported(object);
      charge(8);
      if (ArrayIsArray(object)) {
        const node = nullArray("A");
        const index = register(object, node);
        const items = object as unknown[];
        const count = items.length;
        for (let i = 0; i < count; i++) {
          const item = visitAt(i, items[i]);
          node[node.length] = item === -1 ? visit(undefined) : item;
        }
        return index;
      }
      // Plain data first: brand checks throw for every other object, which made large values very slow.
      if (isPlainObject(object) && !isErrorLike(object)) return encodePlainObject(object);
      const tag = ReflectApply(ObjectToString, object, []) as string;
      const binary = binaryOf(object, tag);
      if (binary !== undefined) {
        charge(binary[1].length + 16);
        return register(object, nullArray("T", binary[0], toBase64(binary[1])));
      }
      if (tag === "[object Date]" && hasBrand(DateGetTime, object)) {
        const time = ReflectApply(DateGetTime, object, []) as number;
        return register(object, nullArray("D", NumberIsFinite(time) ? time : null));
      }
      if (tag === "[object RegExp]" && hasBrand(RegExpSource, object)) {
        const source = ReflectApply(RegExpSource, object, []) as string;
        const flags = ReflectApply(RegExpFlags, object, []) as string;
        charge(source.length + flags.length);
        return register(object, nullArray("R", source, flags));
      }
      if (tag === "[object Map]" && hasBrand(MapSize, object)) {
        const node = nullArray("M");
        const index = register(object, node);
        const iterator = ReflectApply(MapEntries, object, []);
        let position = 0;
        for (;;) {
          const step = ReflectApply(IteratorNext, iterator, []) as IteratorResult<[unknown, unknown]>;
          if (step.done) break;
          const key = visitAt([`.<key ${position}>`], step.value[0]);
          const entryValue = visitAt([`.get(${describeKey(step.value[0])})`], step.value[1]);
          position++;
          if (key === -1 || entryValue === -1) continue;
          node[node.length] = key;
          node[node.length] = entryValue;
        }
        return index;
      }
      if (tag === "[object Set]" && hasBrand(SetSize, object)) {
        const node = nullArray("S");
        const index = register(object, node);
        const iterator = ReflectApply(SetValues, object, []);
        let position = 0;
        for (;;) {
          const step = ReflectApply(SetIteratorNext, iterator, []) as IteratorResult<unknown>;
          if (step.done) break;
          const item = visitAt([`.<item ${position}>`], step.value);
          position++;
          if (item !== -1) node[node.length] = item;
        }
        return index;
      }
      if (isErrorLike(object)) {
        const error = object as { name?: unknown; message?: unknown; code?: unknown };
        const name = StringCtor(error.name ?? "Error");
        const message = StringCtor(error.message ?? "");
        charge(name.length + message.length);
        const node = nullArray("E", name, message);
        const code = error.code;
        if (typeof code === "string" || typeof code === "number") node[3] = code;
        return register(object, node);
      }
      return handleOrUnsupported(object);
    }

    function encodePlainObject(object: object): number {
      const node = nullArray("O");
      const index = register(object, node);
      const keys = ObjectKeys(object);
      const record = object as Record<string, unknown>;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        const child = visitAt(key, record[key]);
        if (child === -1) continue;
        charge(key.length + 3);
        node[node.length] = key;
        node[node.length] = child;
      }
      return index;
    }

    function register(object: object, node: unknown[]): number {
      const index = push(node);
      ReflectApply(MapSet, seen, [object, index]);
      registered[registered.length] = object;
      return index;
    }

    function handleOrUnsupported(object: object): number {
      const shape = handleOf === undefined ? undefined : handleOf(object, currentPath());
      if (shape === undefined) return unsupported(object);
      return registerHandle(object, shape);
    }

    function registerHandle(object: object, shape: HandleShape): number {
      charge(64);
      return register(object, nullArray("H", plainShape(shape)));
    }

    function unsupported(value: unknown, description = describe(value)): number {
      const path = currentPath();
      if (onUnsupported === undefined) {
        throw new TypeErrorCtor(`${path} is ${description} and cannot be copied`);
      }
      onUnsupported({ path, description });
      return -1;
    }

    return {
      nodes,
      visit,
      visitAt,
      push,
      /** Where the encoding is, to take back what a refused field added. */
      mark(): number[] {
        return nullArray(nodes.length, registered.length, length) as number[];
      },
      rollback(mark: number[]): void {
        for (let i = mark[1]!; i < registered.length; i++) ReflectApply(MapDelete, seen, [registered[i]]);
        registered.length = mark[1]!;
        nodes.length = mark[0]!;
        length = mark[2]!;
        segments.length = 0;
      },
    };
  }

  function encode(root: unknown, options: WireEncodeOptions = {}): string {
    const encoder = createEncoder(options);
    const maxExpanded = options.maxExpanded;
    try {
      if (encoder.visit(root) === -1) encoder.push(nullArray("U"));
      if (maxExpanded !== undefined) createMeasurer(encoder.nodes).measure(0, 0, maxExpanded);
    } catch (error) {
      // A bound names the value it refused: "returns is nested deeper than 1000 levels".
      if (isLimit(error)) throw limitError(`${options.rootPath ?? "value"} ${messageOf(error)}`);
      throw error;
    }
    return JSONStringify(encoder.nodes);
  }

  function encodeFields(
    record: object,
    fields: readonly string[],
    options: WireFieldsOptions,
  ): { text: string; expanded: number } {
    const rootPath = options.rootPath ?? "value";
    let unsupportedInField = false;
    let fieldPath = "";
    const onUnsupported = options.onUnsupported;
    const encoder = createEncoder({
      __proto__: null,
      knownHandle: options.knownHandle,
      handleOf: options.handleOf,
      maxLength: options.maxLength,
      maxExpanded: options.maxExpanded,
      rootPath,
      onUnsupported: (unsupported: WireUnsupported) => {
        if (onUnsupported === undefined) {
          throw limitError(
            unsupported.path === fieldPath
              ? `is ${unsupported.description}, which has no plain-data form`
              : `holds ${unsupported.description} at ${unsupported.path}, which has no plain-data form`,
          );
        }
        unsupportedInField = true;
        onUnsupported(unsupported);
      },
    } as WireEncodeOptions);
    const measurer = createMeasurer(encoder.nodes);
    const root = nullArray("O");
    encoder.push(root);
    let remaining = options.maxExpanded ?? Infinity;
    let expanded = 2;
    for (let i = 0; i < fields.length; i++) {
      const field = StringCtor(fields[i]);
      let value: unknown;
      try {
        value = (record as Record<string, unknown>)[field];
      } catch (error) {
        options.onRefused(field, `could not be read (${messageOf(error)})`);
        continue;
      }
      const mark = encoder.mark();
      unsupportedInField = false;
      fieldPath = rootPath === "" ? field : `${rootPath}.${field}`;
      try {
        const index = encoder.visitAt(field, value);
        if (index === -1) {
          encoder.rollback(mark);
          measurer.forget(mark[0]!);
          if (!unsupportedInField) options.onRefused(field, "cannot be copied");
          continue;
        }
        const size = measurer.measure(index, 1, remaining - field.length - 4) + field.length + 4;
        remaining -= size;
        expanded += size;
        root[root.length] = field;
        root[root.length] = index;
      } catch (error) {
        encoder.rollback(mark);
        measurer.forget(mark[0]!);
        const message = messageOf(error);
        options.onRefused(field, isLimit(error) ? message : `could not be copied (${message})`);
      }
    }
    return { text: JSONStringify(encoder.nodes), expanded };
  }

  function describeKey(key: unknown): string {
    return typeof key === "string"
      ? JSONStringify(key)
      : StringCtor(typeof key === "symbol" ? "symbol" : key);
  }

  // ---- decode -------------------------------------------------------------------------------------------------
  function parse(text: string): unknown[] {
    let nodes: unknown;
    try {
      nodes = JSONParse(text);
    } catch (error) {
      throw new TypeErrorCtor(`invalid wire text: ${(error as Error).message}`);
    }
    if (!ArrayIsArray(nodes) || nodes.length === 0)
      throw new TypeErrorCtor("invalid wire text: expected a non-empty array");
    return nodes as unknown[];
  }

  function measure(text: string, maxExpanded = Infinity): number {
    const table = parse(text);
    try {
      return createMeasurer(table).measure(0, 0, maxExpanded);
    } catch (error) {
      if (isLimit(error)) throw limitError(`value ${messageOf(error)}`);
      throw error;
    }
  }

  function decode(text: string, options: WireDecodeOptions = {}): unknown {
    const table = parse(text);
    const values = nullArray();
    const built = new Uint8ArrayCtor(table.length);
    const onHandle = options.onHandle;
    const maxExpanded = options.maxExpanded ?? Infinity;
    const onRefused = options.onRefused;

    function child(index: unknown): unknown {
      if (typeof index !== "number" || !NumberIsInteger(index) || index < 0 || index >= table.length) {
        throw new TypeErrorCtor(`invalid wire text: bad node index ${StringCtor(index)}`);
      }
      if (built[index] === 1) return values[index];
      return build(index);
    }

    function remember(index: number, value: unknown): unknown {
      values[index] = value;
      built[index] = 1;
      return value;
    }

    function build(index: number): unknown {
      const node = table[index];
      if (
        node === null ||
        typeof node === "string" ||
        typeof node === "number" ||
        typeof node === "boolean"
      ) {
        return remember(index, node);
      }
      if (!ArrayIsArray(node) || typeof node[0] !== "string")
        throw new TypeErrorCtor(`invalid wire text: bad node ${index}`);
      const parts = node as unknown[];
      switch (parts[0]) {
        case "U":
          return remember(index, undefined);
        case "N": {
          const special = parts[1];
          const value =
            special === "-0"
              ? -0
              : special === "NaN"
                ? NaN
                : special === "Infinity"
                  ? Infinity
                  : special === "-Infinity"
                    ? -Infinity
                    : fail(index);
          return remember(index, value);
        }
        case "B":
          if (!isDecimal(parts[1])) fail(index);
          return remember(index, BigIntCtor(parts[1] as string));
        case "A": {
          // Filled while prototype-less (plain assignment reaches no setter), then given its real prototype.
          const array = nullArray();
          remember(index, array);
          for (let i = 1; i < parts.length; i++) array[i - 1] = child(parts[i]);
          ReflectSetPrototypeOf(array, ArrayPrototype);
          return array;
        }
        case "O": {
          // Prototype-less while filled, so a "__proto__" key stays an ordinary own property.
          const object = ObjectCreate(null) as Record<string, unknown>;
          remember(index, object);
          for (let i = 1; i + 1 < parts.length; i += 2) {
            if (typeof parts[i] !== "string") fail(index);
            object[parts[i] as string] = child(parts[i + 1]);
          }
          ReflectSetPrototypeOf(object, ObjectPrototype);
          return object;
        }
        case "D":
          return remember(index, new DateCtor(typeof parts[1] === "number" ? parts[1] : NaN));
        case "R": {
          let pattern: RegExp;
          try {
            pattern = new RegExpCtor(StringCtor(parts[1]), StringCtor(parts[2]));
          } catch {
            return fail(index);
          }
          return remember(index, pattern);
        }
        case "M": {
          const map = new MapCtor<unknown, unknown>();
          remember(index, map);
          for (let i = 1; i + 1 < parts.length; i += 2)
            ReflectApply(MapSet, map, [child(parts[i]), child(parts[i + 1])]);
          return map;
        }
        case "S": {
          const set = new SetCtor<unknown>();
          remember(index, set);
          for (let i = 1; i < parts.length; i++) ReflectApply(SetAdd, set, [child(parts[i])]);
          return set;
        }
        case "E": {
          const name = StringCtor(parts[1]);
          const ctor = errorConstructors[name] ?? ErrorCtor;
          const error = new ctor(StringCtor(parts[2])) as Error & { code?: unknown };
          if (ctor === ErrorCtor && name !== "Error") define(error, "name", name);
          error.stack = `${name}: ${StringCtor(parts[2])}`;
          if (parts.length > 3) define(error, "code", parts[3]);
          return remember(index, error);
        }
        case "T": {
          const kind = parts[1];
          const length = base64Length(parts[2]);
          const unit = elementSize(kind);
          if (length < 0 || unit === 0 || length % unit !== 0) return fail(index);
          const buffer = fromBase64(parts[2] as string, length);
          if (kind === "ArrayBuffer") return remember(index, buffer);
          return remember(index, new binaryConstructors[kind as string]!(buffer));
        }
        case "H": {
          const shape = parts[1] as HandleShape;
          if (onHandle === undefined)
            throw new TypeErrorCtor("invalid wire text: a handle where none is accepted");
          if (typeof shape !== "object" || shape === null || typeof shape.id !== "number") fail(index);
          return remember(index, onHandle(shape));
        }
        default:
          return fail(index);
      }
    }

    function fail(index: number): never {
      throw new TypeErrorCtor(`invalid wire text: bad node ${index}`);
    }

    const measurer = createMeasurer(table);
    if (onRefused === undefined) {
      // Without a budget (values the host sent into the isolate) there is nothing to bound.
      if (maxExpanded === Infinity) return child(0);
      try {
        measurer.measure(0, 0, maxExpanded);
      } catch (error) {
        if (isLimit(error)) throw limitError(`value ${messageOf(error)}`);
        throw error;
      }
      return child(0);
    }
    // Field by field: the root is a record and each field is bounded and built on its own.
    const root = table[0];
    if (!ArrayIsArray(root) || root[0] !== "O")
      throw new TypeErrorCtor("invalid wire text: expected a record");
    const record = ObjectCreate(null) as Record<string, unknown>;
    let remaining = maxExpanded;
    for (let i = 1; i + 1 < root.length; i += 2) {
      const field = root[i];
      if (typeof field !== "string") fail(0);
      try {
        const index = root[i + 1] as number;
        remaining -= measurer.measure(index, 1, remaining - field.length - 4) + field.length + 4;
        define(record, field, child(index));
      } catch (error) {
        if (!isLimit(error)) throw error;
        onRefused(field, messageOf(error));
      }
    }
    ReflectSetPrototypeOf(record, ObjectPrototype);
    return record;
  }

  return {
    encode,
    encodeFields,
    decode,
    measure,
    describe,
    bounds: { maxDepth: MAX_DEPTH, maxBigIntDigits: MAX_BIGINT_DIGITS },
  };
}
