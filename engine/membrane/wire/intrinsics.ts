export const ReflectApply = Reflect.apply;
export const ReflectDefineProperty = Reflect.defineProperty;
export const ReflectGetPrototypeOf = Reflect.getPrototypeOf;
export const ReflectSetPrototypeOf = Reflect.setPrototypeOf;
export const ObjectKeys = Object.keys;
export const ObjectPrototype = Object.prototype;
export const ObjectCreate = Object.create;
export const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
export const ArrayPrototype = Array.prototype;
export const Uint8ArrayCtor = Uint8Array;
export const Uint16ArrayCtor = Uint16Array;
export const Float64ArrayCtor = Float64Array;
export const ArrayBufferCtor = ArrayBuffer;
export const ArrayIsArray = Array.isArray;
export const JSONStringify = JSON.stringify;
export const JSONParse = JSON.parse;
export const NumberIsFinite = Number.isFinite;
export const NumberIsInteger = Number.isInteger;
export const ObjectIs = Object.is;
export const StringCtor = String;
export const StringFromCharCode = String.fromCharCode;
export const StringCharCodeAt = String.prototype.charCodeAt;
export const BigIntCtor = BigInt;
export const BigIntToString = BigInt.prototype.toString;
export const DateCtor = Date;
export const RegExpCtor = RegExp;
export const MapCtor = Map;
export const SetCtor = Set;
export const ErrorCtor = Error;
export const TypeErrorCtor = TypeError;
export const DateGetTime = Date.prototype.getTime;
export const getter = (target: object, key: PropertyKey): Function =>
  ObjectGetOwnPropertyDescriptor(target, key)!.get!;
export const RegExpSource = getter(RegExp.prototype, "source");
export const RegExpFlags = getter(RegExp.prototype, "flags");
/** Each flag's own getter, in the order `flags` lists them: `flags` itself reads them through `this`, which model code can shape. */
export const RegExpFlagGetters: ReadonlyArray<readonly [string, Function]> = [
  ["d", "hasIndices"],
  ["g", "global"],
  ["i", "ignoreCase"],
  ["m", "multiline"],
  ["s", "dotAll"],
  ["u", "unicode"],
  ["v", "unicodeSets"],
  ["y", "sticky"],
]
  .filter(([, name]) => Object.getOwnPropertyDescriptor(RegExp.prototype, name!)?.get !== undefined)
  .map(([flag, name]) => [flag!, getter(RegExp.prototype, name!)] as const);
/** The getter of a property found on an object or its prototypes (undefined for a data property): reads, never runs. */
export const ObjectLookupGetter = (Object.prototype as unknown as { __lookupGetter__: Function })
  .__lookupGetter__;
export const MapSize = getter(Map.prototype, "size");
export const SetSize = getter(Set.prototype, "size");
export const TypedArrayPrototype = ReflectGetPrototypeOf(Uint8Array.prototype) as object;
// Returns the kind of a real typed array (any subclass, a Node Buffer too) and undefined for anything else.
export const TypedArrayKind = getter(TypedArrayPrototype, Symbol.toStringTag);
export const TypedArrayBuffer = getter(TypedArrayPrototype, "buffer");
export const TypedArrayByteOffset = getter(TypedArrayPrototype, "byteOffset");
export const TypedArrayByteLength = getter(TypedArrayPrototype, "byteLength");
export const ArrayBufferByteLength = getter(ArrayBuffer.prototype, "byteLength");
export const SharedArrayBufferByteLength =
  typeof SharedArrayBuffer === "function" ? getter(SharedArrayBuffer.prototype, "byteLength") : undefined;
export const DataViewBuffer = getter(DataView.prototype, "buffer");
export const DataViewByteOffset = getter(DataView.prototype, "byteOffset");
export const DataViewByteLength = getter(DataView.prototype, "byteLength");
export const MapEntries = Map.prototype.entries;
export const MapSet = Map.prototype.set;
export const MapGet = Map.prototype.get;
export const MapDelete = Map.prototype.delete;
export const SetValues = Set.prototype.values;
export const SetAdd = Set.prototype.add;
export const IteratorNext = Object.getPrototypeOf(new Map().entries()).next;
export const SetIteratorNext = Object.getPrototypeOf(new Set().values()).next;
export const ObjectToString = Object.prototype.toString;
export const FunctionToString = Function.prototype.toString;
export const errorConstructors: Record<string, ErrorConstructor> = {
  __proto__: null,
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
} as unknown as Record<string, ErrorConstructor>;
export type BinaryConstructor = new (buffer: ArrayBuffer) => ArrayBufferView;
export const binaryConstructors: Record<string, BinaryConstructor> = {
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
export const ReflectGet = Reflect.get;
export const ReflectConstruct = Reflect.construct;
export const ReflectHas = Reflect.has;
export const ReflectSet = Reflect.set;
export const ReflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
export const ReflectDeleteProperty = Reflect.deleteProperty;
export const ReflectOwnKeys = Reflect.ownKeys;
export const ObjectFreeze = Object.freeze;
export const ObjectDefineProperty = Object.defineProperty;
export const ObjectDefineProperties = Object.defineProperties;
export const ObjectHasOwn = Object.hasOwn;
export const StringIncludesMethod = String.prototype.includes;
export const NumberCtor = Number;
export const NumberIsNaN = Number.isNaN;
export const MathMin = Math.min;
export const MathTrunc = Math.trunc;
export const WeakMapCtor = WeakMap;
export const PromiseCtor = Promise;
export const PromiseThen = Promise.prototype.then;
export const ReferenceErrorCtor = ReferenceError;
export const FunctionBind = Function.prototype.bind;
export const StringSlice = String.prototype.slice;
export const StringStartsWith = String.prototype.startsWith;
export const StringReplace = String.prototype.replace;
export const StringIndexOf = String.prototype.indexOf;
export const StringSplit = String.prototype.split;
export const ArrayJoin = Array.prototype.join;
export const MapClear = Map.prototype.clear;
export const WeakMapGet = WeakMap.prototype.get;
export const WeakSetCtor = WeakSet;
export const WeakSetAdd = WeakSet.prototype.add;
export const WeakSetHas = WeakSet.prototype.has;
export const ProxyRevocable = Proxy.revocable;
export const WeakMapSet = WeakMap.prototype.set;
export const DateNow = Date.now;
export const DateToString = Date.prototype.toString;
export const MathObject = Math;
export const MathRandom = Math.random;
export const ProxyCtor = Proxy;
export const DateToISOString = Date.prototype.toISOString;
export const RegExpToString = RegExp.prototype.toString;
export const SymbolToString = Symbol.prototype.toString;
