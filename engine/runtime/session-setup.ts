import type { Container } from "../../container/index.ts";
import { WorkerModuleChecker } from "../check/index.ts";
import { joinWireRecord } from "../membrane/index.ts";
import { type CompiledModule, hiddenNames, visibleValueNames } from "../module/index.ts";
import type { ExecutionLimits } from "../types.ts";
import { type ModuleDeclarations, RUNTIME } from "./declared-members.ts";
import type { HandleMembrane } from "./host-membrane.ts";

/*
 * What a session of a module is given of it: the names and services a new isolate installs, the checker of its
 * snippets (with the types it gives the host's locals), and the classes model code may never construct.
 */

/**
 * The module's names and the `moss` services as a new isolate installs them, each encoded on its own: its handles
 * are its own and name it (one object bound to two fields is two handles, each labelled by the field the code used).
 */
export function installedNames(
  module: CompiledModule,
  locals: Record<string, unknown>,
  services: ReadonlyMap<string, unknown>,
  membrane: HandleMembrane,
  declarations: ModuleDeclarations,
): { globals: string; mossServices: string } {
  const globals = new Map<string, string>();
  for (const name of visibleValueNames(module)) {
    const wire = membrane.encodeRoot(module.locals[name], name, declarations.name(name), { name });
    globals.set(name, wire);
  }
  // withLocals values have no static type: the host handed them over as they are.
  for (const [name, value] of Object.entries(locals))
    globals.set(name, membrane.encodeRoot(value, name, RUNTIME, { name }));
  const mossServices: Array<[string, string]> = [];
  for (const field of module.analysis.mossClass?.fields ?? []) {
    if (field.kind !== "service") continue;
    const wire = membrane.encodeRoot(
      services.get(field.name),
      `moss.${field.name}`,
      declarations.field(field.name),
      {
        service: field.name,
      },
    );
    mossServices.push([field.name, wire]);
  }
  return { globals: joinWireRecord([...globals]), mossServices: joinWireRecord(mossServices) };
}

/**
 * A checker of the module's snippets (in worker threads, within the limits), knowing the host's `withLocals` values
 * by their types (see {@link typeOfLocal}) and which of the module's names are service classes (never constructed).
 */
export function moduleChecker(
  module: CompiledModule,
  locals: Record<string, unknown>,
  limits: ExecutionLimits,
  isServiceClass: (value: object) => boolean,
): WorkerModuleChecker {
  return new WorkerModuleChecker({
    timeoutMs: limits.typeCheckTimeoutMs,
    memoryLimitBytes: limits.typeCheckMemoryBytes,
    modulePath: module.path,
    source: module.analysis.source,
    hiddenNames: hiddenNames(module),
    locals: Object.fromEntries(Object.entries(locals).map(([name, value]) => [name, typeOfLocal(value)])),
    serviceClasses: visibleValueNames(module).filter((name) => {
      const value = module.locals[name];
      return typeof value === "function" && isServiceClass(value);
    }),
  });
}

/**
 * The type the checker gives a `withLocals` value: exact for primitives, callable for functions, `any` otherwise
 * (a host object's shape is not known statically; the membrane still exposes only its public members).
 */
function typeOfLocal(value: unknown): string {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
    case "bigint":
      return typeof value;
    case "function":
      return /^class[\s{]/.test(Function.prototype.toString.call(value)) ? "any" : "(...args: any[]) => any";
    case "undefined":
      return "undefined";
    default:
      return value === null ? "null" : Array.isArray(value) ? "any[]" : "any";
  }
}

/**
 * Whether a class is a service type or extends one: the declared class of a `moss` service field, a class bound in
 * the container as a token, or the class of an injected service. Model code never constructs these (the service
 * would run a second time with arguments of the code's choice, outside what the host set up). The service classes
 * are gathered at the first question (the services are injected by then).
 */
export function serviceClassTest(
  module: CompiledModule,
  services: ReadonlyMap<string, unknown>,
  container: Container,
): (value: object) => boolean {
  let classes: Set<unknown> | undefined;
  const gather = (): Set<unknown> => {
    const found = new Set<unknown>();
    for (const field of module.analysis.mossClass?.fields ?? []) {
      if (field.kind !== "service") continue;
      const token = field.token?.kind === "class" ? module.locals[field.token.name] : undefined;
      if (typeof token === "function") found.add(token);
    }
    for (const service of services.values()) {
      const owner = typeof service === "object" && service !== null ? service.constructor : undefined;
      if (typeof owner === "function" && owner !== Object) found.add(owner);
    }
    return found;
  };
  return (value) => {
    if (typeof value !== "function") return false;
    classes ??= gather();
    for (
      let current: unknown = value;
      typeof current === "function";
      current = Object.getPrototypeOf(current)
    ) {
      if (current === Function.prototype) break;
      if (classes.has(current)) return true;
      try {
        if (container.bound(current as new () => unknown)) return true;
      } catch {
        return true;
      }
    }
    return false;
  };
}
