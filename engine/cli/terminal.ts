import path from "node:path";
import picocolors from "picocolors";
import type { CliIo } from "./cli-io.ts";
import { escapeControlCharacters } from "./escape-control-characters.ts";

type Colors = ReturnType<typeof picocolors.createColors>;
interface Spinner {
  stop(): unknown;
  clear(): unknown;
}

/** How long a step runs before its spinner appears: quick steps never flicker. */
export const SPINNER_DELAY_MS = 300;

/**
 * Whether to colour output written to `stream`: `FORCE_COLOR` forces it (`0`/`false` forbid it), a non-empty
 * `NO_COLOR` turns it off, otherwise only a TTY that is not `TERM=dumb` gets colour.
 */
export function colourEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  const force = env.FORCE_COLOR;
  if (force === "0" || force === "false") return false;
  if (force !== undefined) return true;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  return stream.isTTY === true && env.TERM !== "dumb";
}

/** Whether to animate a spinner on `stream`: only on an interactive TTY, never under `CI` or `TERM=dumb`. */
export function spinnerEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && env.CI === undefined && env.TERM !== "dumb";
}

/** The CLI's view of the terminal: colours for stdout and stderr, and spinners naming slow steps on stderr. */
export class Terminal {
  readonly stdout: Colors;
  readonly stderr: Colors;
  readonly #io: CliIo;
  readonly #spinning: boolean;

  constructor(io: CliIo) {
    this.#io = io;
    this.stdout = picocolors.createColors(colourEnabled(io.stdout, io.env));
    this.stderr = picocolors.createColors(colourEnabled(io.stderr, io.env));
    // The spinner redraws its line, so the stream must be a real terminal stream that can move the cursor.
    const canMoveCursor = typeof (io.stderr as { cursorTo?: unknown }).cursorTo === "function";
    this.#spinning = spinnerEnabled(io.stderr, io.env) && canMoveCursor;
  }

  /** Runs `work`; on a TTY, a spinner named `name` shows on stderr once it has taken over {@link SPINNER_DELAY_MS}. */
  async step<T>(name: string, work: () => Promise<T>): Promise<T> {
    const stop = this.spin(name);
    try {
      return await work();
    } finally {
      stop();
    }
  }

  /** Starts a spinner named `name` (shown after {@link SPINNER_DELAY_MS}, only on a TTY); returns the function that clears it. */
  spin(name: string): () => void {
    if (!this.#spinning) return () => {};
    let spinner: Spinner | undefined;
    let stopped = false;
    const timer = setTimeout(() => {
      void import("yocto-spinner").then(({ default: yoctoSpinner }) => {
        if (stopped) return;
        spinner = yoctoSpinner({ text: name, stream: this.#io.stderr }).start();
      });
    }, SPINNER_DELAY_MS);
    timer.unref();
    return () => {
      stopped = true;
      clearTimeout(timer);
      spinner?.clear();
      spinner?.stop();
      spinner = undefined;
    };
  }

  /**
   * Colours rendered diagnostics like `tsc --pretty`: location, severity, code, and the code frame's gutter and caret.
   * The text quotes the model's code, so its control characters are escaped first.
   */
  diagnostics(text: string, colors: Colors = this.stdout): string {
    return escapeControlCharacters(text)
      .split("\n")
      .map((line) => {
        const head = line.match(/^(.+?):(\d+):(\d+) - (error|warning) ((?:TS|MOSS)\d+): (.*)$/);
        if (head) {
          const [, file, row, column, severity, code, message] = head;
          const paint = severity === "error" ? colors.red : colors.yellow;
          return `${colors.cyan(file!)}:${colors.yellow(row!)}:${colors.yellow(column!)} - ${paint(severity!)} ${colors.gray(`${code}:`)} ${message}`;
        }
        const frame = line.match(/^([> ]) ( *\d+) \| (.*)$/);
        if (frame) {
          const [, marker, row, code] = frame;
          return `${marker === ">" ? colors.red(">") : " "} ${colors.inverse(row!)} ${colors.gray("|")} ${code}`;
        }
        const caret = line.match(/^( +)\| ( *)(\^+)$/);
        if (caret) return `${caret[1]}${colors.gray("|")} ${caret[2]}${colors.red(caret[3]!)}`;
        const summary = line.match(/^Found (\d+) errors?\.$/);
        if (summary) return colors.red(line);
        return line;
      })
      .join("\n");
  }
}

/** How `check` and `run` name the code file in diagnostics: `<stdin>` for `-`, else the path relative to `cwd`. */
export function codeFileName(source: string | undefined, cwd: string): string {
  if (source === undefined || source === "-") return "<stdin>";
  return path.relative(cwd, path.resolve(cwd, source));
}
