// A leaf rule of the foundation: the checker writes these codes and `moss check`'s result cache reads them, without
// loading the checker (and with it TypeScript).

/** Codes of the moss-specific findings about the model's snippet (TypeScript's own codes stay below 90000). */
export const MOSS_DIAGNOSTIC_CODES = Object.freeze({
  /** The checker itself failed (a compiler bug, not the model's fault): a warning, the code was not checked. */
  checkerFailed: 90000,
  /** A name declared only inside a `// <moss-hide>` region of the context module. */
  hiddenName: 90001,
  /** An `import` (static, `import =`, or dynamic) in the snippet. */
  importStatement: 90002,
  /** A top-level declaration of the snippet that redeclares a name of the context module. */
  redeclaredModuleName: 90003,
  /** A Node.js host global (`process`, `require`, `Buffer`, …) that the sandbox does not have. */
  hostGlobal: 90004,
  /** A Promise-returning call used as a statement without `await` (warning). */
  floatingPromise: 90005,
  /** `await` outside any function: the snippet runs as a classic script. */
  topLevelAwait: 90006,
  /** `declare global`, `declare module "…"` or a `/// <reference …>` directive in the snippet. */
  ambientDeclaration: 90007,
  /** The type-check ran out of its time or memory limit: the code was not checked (an error). */
  checkLimit: 90008,
  /** `new` on (or `extends` of) a service class of the module: the sandbox refuses it. */
  serviceConstruction: 90009,
  /** A member of a host-declared class that the visibility rule hides (`_x`, `onInject`, `constructor`, …). */
  unreachableMember: 90010,
  /** A name starting with `__moss_` (moss-ts's own, a context module's hooks among them): the sandbox defines none for model code. */
  mossName: 90011,
});
