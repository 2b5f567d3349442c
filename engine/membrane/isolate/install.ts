// Installs a session once: its visible globals, `moss` (data fields, services and moss's own members) and its kept
// definitions.
import { MOSS_OWN_MEMBERS, type MossOwnMember } from "../visibility.ts";
import {
  ArrayIsArray,
  ErrorCtor,
  JSONParse,
  MapSet,
  ObjectCreate,
  ObjectKeys,
  ObjectPrototype,
  ProxyCtor,
  ReflectApply,
  ReflectDefineProperty,
  ReflectDeleteProperty,
  ReflectGet,
  ReflectGetOwnPropertyDescriptor,
  ReflectSet,
} from "../wire/intrinsics.ts";
import { IndirectEval } from "./evaluate.ts";
import { callHost } from "./host-calls.ts";
import { knownHandle } from "./proxy-shapes.ts";
import { data, field } from "./records.ts";
import type { IsolateState } from "./state.ts";
import { logger } from "./stdout.ts";

/**
 * `moss` as model code sees it is a forwarding proxy of the state's `moss`: every trap that can hand out or change
 * a property's value (get, set, defineProperty, deleteProperty, getOwnPropertyDescriptor) marks that name touched,
 * for good (a value handed out may be kept anywhere and changed in a later run). A data field never touched still
 * holds the value its last snapshot encoded, so the snapshot skips comparing it. Bootstrap code reads the object
 * directly, so the snapshot itself marks nothing.
 */
function mossTraps(state: IsolateState): ProxyHandler<object> {
  const touch = (key: string | symbol) => {
    ReflectApply(MapSet, state.touched, [key, true]);
  };
  return {
    __proto__: null,
    get(target, key, receiver) {
      touch(key);
      return ReflectGet(target, key, receiver);
    },
    set(target, key, value, receiver) {
      touch(key);
      return ReflectSet(target, key, value, receiver);
    },
    defineProperty(target, key, descriptor) {
      touch(key);
      return ReflectDefineProperty(target, key, descriptor);
    },
    deleteProperty(target, key) {
      touch(key);
      return ReflectDeleteProperty(target, key);
    },
    getOwnPropertyDescriptor(target, key) {
      touch(key);
      return ReflectGetOwnPropertyDescriptor(target, key);
    },
  } as ProxyHandler<object>;
}

/** Installs the session (once): every argument is wire text but `fields` (JSON) and `definitions` (a script). */
export function install(
  state: IsolateState,
  globals: string,
  mossData: string,
  mossServices: string,
  fields: string,
  definitions: string,
): void {
  if (state.installed) throw new ErrorCtor("the session is already installed");
  state.installed = true;
  const { codec, decodeOptions, global } = state;
  const names = codec.decode(globals, decodeOptions) as Record<string, unknown>;
  const keys = ObjectKeys(names);
  for (let i = 0; i < keys.length; i++) {
    const name = keys[i]!;
    const value = names[name];
    const isProxy =
      (typeof value === "object" || typeof value === "function") &&
      value !== null &&
      knownHandle(value) !== undefined;
    ReflectDefineProperty(global, name, data(value, !isProxy));
  }
  const moss = ObjectCreate(ObjectPrototype);
  state.moss = moss;
  const values = codec.decode(mossData, decodeOptions) as Record<string, unknown>;
  const valueKeys = ObjectKeys(values);
  for (let i = 0; i < valueKeys.length; i++) {
    const name = valueKeys[i]!;
    ReflectApply(MapSet, state.knownFields, [name, true]);
    ReflectDefineProperty(moss, name, field(values[name]));
  }
  const services = codec.decode(mossServices, decodeOptions) as Record<string, unknown>;
  const serviceKeys = ObjectKeys(services);
  for (let i = 0; i < serviceKeys.length; i++) {
    const name = serviceKeys[i]!;
    ReflectDefineProperty(moss, name, data(services[name], false));
  }
  defineOwnMembers(state, moss);
  ReflectDefineProperty(global, "moss", data(new ProxyCtor(moss, mossTraps(state)), false));
  const parsed = JSONParse(fields);
  state.dataFields = ArrayIsArray(parsed) ? parsed : [];
  for (let i = 0; i < valueKeys.length; i++) {
    ReflectApply(MapSet, state.saved, [valueKeys[i], { __proto__: null, text: mossData, hasCopy: false }]);
  }
  // The session's kept definitions (only ones whose evaluation runs no model code): a rebuilt session has them again.
  if (definitions !== "") IndirectEval(`${definitions}\n//# sourceURL=definitions.js`);
}

/** moss's own members (`pprint`, `ask`, `show`), not enumerable. */
function defineOwnMembers(state: IsolateState, moss: object): void {
  // Typed by the names, so a name added to MOSS_OWN_MEMBERS fails the build until it is set here.
  const own: Record<MossOwnMember, unknown> = {
    pprint: logger(state, true),
    ask: async function ask(question: unknown, options?: unknown) {
      return callHost(state, "ask", 0, "ask", [question, options]);
    },
    show: function show(image: unknown) {
      callHost(state, "show", 0, "show", [image]);
    },
  };
  for (let i = 0; i < MOSS_OWN_MEMBERS.length; i++) {
    const name = MOSS_OWN_MEMBERS[i]!;
    ReflectDefineProperty(moss, name, data(own[name], false, false));
  }
}
