// The isolate's `eval`, captured when the isolate script is evaluated (before model code can replace the global).
// Called through this binding, eval is indirect: the code runs in global scope with classic-script semantics.
// biome-ignore lint/security/noGlobalEval: evaluating the model's code inside the isolate is the point.
export const IndirectEval = eval;
