/*
 * THE rule of what model code may reach of a host value: one function per question, used by the prompter (what the
 * prompt shows), the compiler (which `Moss` fields are data or services, which members the checker and the declared
 * types accept), the host half of the membrane (which members a handle serves) and the isolate half (which members a
 * proxy exposes). The isolate half runs this file beside model code that may patch any prototype, so it uses syntax
 * only: no method of a built-in is called (`name[0]` and `switch` cannot be patched).
 */

/**
 * Names never reached whatever their declaration says: prototype plumbing, the legacy function members, the prompt
 * hooks, and the injection lifecycle hooks (model code calling `onDestroy()` would tear a service down early). Names
 * starting with `_` or `#` are hidden too (`__proto__`, `__prompt__` and `__class_prompt__` among them).
 */
export const NEVER_REACHED_NAMES: readonly string[] = [
  "constructor",
  "prototype",
  "__proto__",
  "__prompt__",
  "__class_prompt__",
  "caller",
  "callee",
  "arguments",
  "onInject",
  "onDestroy",
];

/** Whether model code may reach a member of this name (the name alone; see `isReachableMember` for modifiers). */
export function isReachableName(name: unknown): name is string {
  if (typeof name !== "string" || name.length === 0) return false;
  const first = name[0];
  if (first === "_" || first === "#") return false;
  switch (name) {
    case "constructor":
    case "prototype":
    case "caller":
    case "callee":
    case "arguments":
    case "onInject":
    case "onDestroy":
      return false;
    default:
      return true;
  }
}

/** How a member is declared, as far as reaching it goes (read from TypeScript's modifiers by each caller). */
export interface MemberDeclaration {
  name: string;
  /** Declared `private` (TypeScript's keyword; `#x` is caught by its name). */
  private?: boolean;
  /** Declared `protected`. */
  protected?: boolean;
}

/** Whether model code may reach a declared member: a reachable name, neither `private` nor `protected`. */
export function isReachableMember(member: MemberDeclaration): boolean {
  return member.private !== true && member.protected !== true && isReachableName(member.name);
}

/**
 * The prefix of moss-ts's own names: a context module's hooks (`__moss_compile__`, `__moss_exec__`, …) and any other
 * top-level name so spelled. The sandbox defines none of them for model code (its bridges are closure arguments).
 */
export const MOSS_NAME_PREFIX = "__moss_";

/**
 * Whether model code may name a top-level name of its scope (a context module's name or a global): every name but
 * moss-ts's own, those starting with `__moss_`; a name merely containing `moss` is the user's.
 */
export function isReachableGlobalName(name: string): boolean {
  if (name.length < MOSS_NAME_PREFIX.length) return true;
  for (let index = 0; index < MOSS_NAME_PREFIX.length; index++) {
    if (name[index] !== MOSS_NAME_PREFIX[index]) return true;
  }
  return false;
}

/**
 * moss-ts's own members of `moss`, declared by moss-ts's `Moss` class and set by the sandbox whatever the module
 * declares. A module's `Moss` may re-declare one as moss-ts does (`declare pprint: …`, a type moss-ts's member
 * satisfies): that is still moss-ts's member, not a field. Any other member of these names is a compile error.
 */
export const MOSS_OWN_MEMBERS = ["pprint", "ask", "show"] as const;

/** The name of one of moss-ts's own members of `moss`. */
export type MossOwnMember = (typeof MOSS_OWN_MEMBERS)[number];

/** Whether `name` is one of moss-ts's own members of `moss` (`MOSS_OWN_MEMBERS`). */
export function isMossOwnMember(name: string): name is MossOwnMember {
  for (let index = 0; index < MOSS_OWN_MEMBERS.length; index++) {
    if (MOSS_OWN_MEMBERS[index] === name) return true;
  }
  return false;
}

/** How a member of a context module's `Moss` class is declared, as far as reaching it goes. */
export interface MossMemberDeclaration extends MemberDeclaration {
  /** A field (`name: T` or `name = value`), a method, or a `get`/`set` accessor. */
  kind: "field" | "method" | "accessor";
  /** Declared `static`. */
  static?: boolean;
}

/**
 * Whether model code may reach a member of a context module's `Moss` class on `moss`: only its instance fields (data
 * fields and services) that `isReachableMember` allows, `declare` fields included (TypeScript emits no initializer for
 * them, MOSS sets them like `name!: T`). The sandbox's `moss` is built from those fields and `MOSS_OWN_MEMBERS`: a
 * method or accessor of the class is host code that never reaches the isolate.
 */
export function isReachableMossMember(member: MossMemberDeclaration): boolean {
  return member.kind === "field" && member.static !== true && isReachableMember(member);
}
