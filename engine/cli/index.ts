// The `moss` command line. Every export is named here; bin/moss.js starts `main`.
export type { CliCommand, CliIo } from "./cli-io.ts";
export { EXIT, EXIT_CODES_HELP, exitCodeOf } from "./exit-codes.ts";
export { formatError, main } from "./main.ts";
