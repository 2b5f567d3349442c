// vitest's setup file, run before each test file: the files of a worker process run one after another in it
// (vitest.config.ts: isolate false), and the process-wide sandbox drivers (engine/runtime/shared-sandbox.ts) an
// earlier file left open would otherwise be the next file's: a file starts, as it would in a process of its own,
// with none (a prestart then really prestarts, options configured before the first use apply).
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

await closeSharedSandboxes();
