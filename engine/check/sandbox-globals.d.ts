// The globals the sandbox gives the model's code beside the ES library, as the type-checker sees them. moss-ts
// ships this file itself, so checking never depends on the user's @types/node (nothing of Node is declared here).

/** The sandbox's console: each method prints its arguments, separated by spaces, to the run's stdout. */
interface Console {
  /** Prints the values, separated by spaces, and a new line. */
  log(...data: any[]): void;
  /** Same as `log`. */
  info(...data: any[]): void;
  /** Same as `log`. */
  warn(...data: any[]): void;
  /** Same as `log`. */
  error(...data: any[]): void;
  /** Same as `log`. */
  debug(...data: any[]): void;
}

declare var console: Console;
