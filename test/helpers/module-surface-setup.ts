import { ensureModuleSurface } from "../../engine/module-surface.ts";

/** vitest's global setup: emits the declarations context modules are checked against once, before any test file. */
export default function setup(): void {
  ensureModuleSurface();
}
