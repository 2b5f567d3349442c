// The isolate's console formatting (a compact util.inspect), built on intrinsics captured before model code runs.
import {
  ArrayIsArray,
  ArrayJoin,
  DateGetTime,
  DateToISOString,
  FunctionToString,
  IteratorNext,
  JSONStringify,
  MapEntries,
  MapSize,
  MathMin,
  MathTrunc,
  NumberCtor,
  NumberIsNaN,
  ObjectIs,
  ObjectKeys,
  ObjectPrototype,
  ObjectToString,
  ReflectApply,
  ReflectGetPrototypeOf,
  RegExpToString,
  SetIteratorNext,
  SetSize,
  SetValues,
  StringCtor,
  StringIndexOf,
  StringReplace,
  StringSplit,
  StringStartsWith,
  SymbolToString,
  WeakMapGet,
} from "../wire/intrinsics.ts";
import { shapeOfProxy } from "./proxy-shapes.ts";
import { append, hasBrand, slice } from "./records.ts";

// ---- formatting (a compact util.inspect) ---------------------------------------------------------------
export function quote(text: string): string {
  const json = JSONStringify(text);
  return `'${ReflectApply(StringReplace, slice(json, 1, json.length - 1), [/'/g, "\\'"])}'`;
}

export function keyText(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? key : quote(key);
}

export function functionText(value: Function): string {
  if (ReflectApply(WeakMapGet, shapeOfProxy, [value]) !== undefined) return "[host function]";
  let source = "";
  try {
    source = ReflectApply(FunctionToString, value, []);
  } catch {}
  let name = "";
  try {
    const own = (value as any).name;
    name = typeof own === "string" ? own : "";
  } catch {}
  if (ReflectApply(StringStartsWith, source, ["class"])) return `[class ${name || "(anonymous)"}]`;
  return name === "" ? "[Function (anonymous)]" : `[Function: ${name}]`;
}

export function errorText(value: any): string {
  try {
    const stack = value.stack;
    if (typeof stack === "string" && stack !== "") {
      const lines = ReflectApply(StringSplit, stack, ["\n"]) as string[];
      const kept: string[] = [];
      for (let i = 0; i < lines.length; i++) {
        if (ReflectApply(StringIndexOf, lines[i], ["moss-sandbox-bootstrap"]) === -1) append(kept, lines[i]);
      }
      return ReflectApply(ArrayJoin, kept, ["\n"]);
    }
    return `${StringCtor(value.name)}: ${StringCtor(value.message)}`;
  } catch {
    return "[Error]";
  }
}

export function inspect(
  value: unknown,
  pretty: boolean,
  depth: number,
  seen: unknown[],
  indent: string,
): string {
  switch (typeof value) {
    case "string":
      return depth === 0 ? value : quote(value);
    case "number":
      return ObjectIs(value, -0) ? "-0" : StringCtor(value);
    case "bigint":
      return `${StringCtor(value)}n`;
    case "boolean":
    case "undefined":
      return StringCtor(value);
    case "symbol":
      return ReflectApply(SymbolToString, value, []);
    case "function":
      return functionText(value);
  }
  if (value === null) return "null";
  const object = value as object;
  for (let i = 0; i < seen.length; i++) if (seen[i] === object) return "[Circular]";
  if (ReflectApply(WeakMapGet, shapeOfProxy, [object]) !== undefined) return "[host object]";
  if (hasBrand(DateGetTime, object)) {
    const time = ReflectApply(DateGetTime, object, []);
    return NumberIsNaN(time) ? "Invalid Date" : ReflectApply(DateToISOString, object, []);
  }
  if (hasBrand(RegExpToString, object) && ReflectApply(ObjectToString, object, []) === "[object RegExp]") {
    return ReflectApply(RegExpToString, object, []);
  }
  if (ReflectApply(ObjectToString, object, []) === "[object Error]")
    return depth === 0 ? errorText(object) : `[${errorText(object)}]`;
  const nested = depth >= (pretty ? 4 : 2);
  const parts: string[] = [];
  let open = "{";
  let close = "}";
  let prefix = "";
  const inner = [...seen, object];
  const childIndent = `${indent}  `;
  const show = (item: unknown) => inspect(item, pretty, depth + 1, inner, childIndent);
  try {
    if (ArrayIsArray(object)) {
      if (nested) return "[Array]";
      open = "[";
      close = "]";
      const items = object as unknown[];
      const shown = MathMin(items.length, 100);
      for (let i = 0; i < shown; i++) append(parts, show(items[i]));
      if (items.length > shown) append(parts, `... ${items.length - shown} more items`);
    } else if (hasBrand(MapSize, object)) {
      const size = ReflectApply(MapSize, object, []);
      prefix = `Map(${size}) `;
      if (nested) return "[Map]";
      const iterator = ReflectApply(MapEntries, object, []);
      for (;;) {
        const step: any = ReflectApply(IteratorNext, iterator, []);
        if (step.done) break;
        append(parts, `${show(step.value[0])} => ${show(step.value[1])}`);
      }
    } else if (hasBrand(SetSize, object)) {
      const size = ReflectApply(SetSize, object, []);
      prefix = `Set(${size}) `;
      if (nested) return "[Set]";
      const iterator = ReflectApply(SetValues, object, []);
      for (;;) {
        const step: any = ReflectApply(SetIteratorNext, iterator, []);
        if (step.done) break;
        append(parts, show(step.value));
      }
    } else {
      const prototype = ReflectGetPrototypeOf(object);
      if (prototype === null) prefix = "[Object: null prototype] ";
      else if (prototype !== ObjectPrototype) {
        const name = (prototype as any).constructor?.name;
        if (typeof name === "string" && name !== "" && name !== "Object") prefix = `${name} `;
      }
      if (nested) return prefix === "" ? "[Object]" : `[${slice(prefix, 0, prefix.length - 1)}]`;
      const keys = ObjectKeys(object);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        append(parts, `${keyText(key)}: ${show((object as any)[key])}`);
      }
    }
  } catch (error) {
    return `[uninspectable: ${errorText(error)}]`;
  }
  if (parts.length === 0) return `${prefix}${open}${close}`;
  const flat = `${prefix}${open} ${ReflectApply(ArrayJoin, parts, [", "])} ${close}`;
  if (!pretty || flat.length + indent.length <= 72) return flat;
  return `${prefix}${open}\n${childIndent}${ReflectApply(ArrayJoin, parts, [`,\n${childIndent}`])}\n${indent}${close}`;
}

export function formatValues(values: unknown[], pretty: boolean): string {
  const out: string[] = [];
  let start = 0;
  const first = values[0];
  if (typeof first === "string" && values.length > 1 && /%[sdifjoOc%]/.test(first)) {
    let next = 1;
    const formatted = ReflectApply(StringReplace, first, [
      /%([sdifjoOc%])/g,
      (match: string, letter: string) => {
        if (letter === "%") return "%";
        if (next >= values.length) return match;
        const value = values[next++];
        switch (letter) {
          case "s":
            return typeof value === "string" ? value : inspect(value, false, 1, [], "");
          case "d":
          case "i": {
            if (typeof value === "bigint") return `${StringCtor(value)}n`;
            const number = NumberCtor(value);
            return StringCtor(letter === "i" ? MathTrunc(number) : number);
          }
          case "f":
            return StringCtor(NumberCtor(value));
          case "j":
            try {
              return JSONStringify(value);
            } catch {
              return "[Circular]";
            }
          case "c":
            return "";
          default:
            return inspect(value, pretty, 1, [], "");
        }
      },
    ]);
    append(out, formatted);
    start = next;
  }
  for (let i = start; i < values.length; i++) append(out, inspect(values[i], pretty, 0, [], ""));
  return ReflectApply(ArrayJoin, out, [" "]);
}
