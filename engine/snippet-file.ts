/**
 * The file names model code is known by: `snippet.ts` in diagnostics, stack frames, code frames and the
 * observation (the checker's, the runtime's and the agent's messages name the same file), and `snippet.js` for the
 * classic script the sandbox runs, whose frames are mapped back to `snippet.ts`.
 */
export const SNIPPET_FILE = "snippet.ts";
export const SNIPPET_SCRIPT = "snippet.js";
