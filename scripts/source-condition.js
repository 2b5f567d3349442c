// Used when moss-ts runs from its TypeScript sources (a checkout: bin/moss.js in source mode, bench/run.js).
const SOURCE_CONDITION = "moss-ts-source";

/**
 * Adds the `moss-ts-source` export condition to every resolution: in-thread with `module.registerHooks` where Node
 * has it (Node 24 deprecates `module.register` and warns on each use), else off-thread with `module.register`.
 */
export async function addSourceCondition() {
  const nodeModule = await import("node:module");
  const withCondition = (context) =>
    context.conditions.includes(SOURCE_CONDITION)
      ? context
      : { ...context, conditions: [...context.conditions, SOURCE_CONDITION] };
  if (typeof nodeModule.registerHooks === "function") {
    nodeModule.registerHooks({
      resolve: (specifier, context, next) => next(specifier, withCondition(context)),
    });
    return;
  }
  const hook = `const SOURCE_CONDITION = ${JSON.stringify(SOURCE_CONDITION)};
export function resolve(specifier, context, next) {
  return next(specifier, (${withCondition.toString()})(context));
}`;
  nodeModule.register(`data:text/javascript,${encodeURIComponent(hook)}`);
}
