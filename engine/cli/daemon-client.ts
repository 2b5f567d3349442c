// The client half of the CLI's warm path (README "The warm path"): bin/moss.js hands `moss prompt|check|run|test` to
// a per-user daemon when one answers for exactly this Node and this moss-ts, else runs the command itself and starts
// the daemon for the next one. The daemon (daemon-server.ts) keeps one process warm (daemon-child.ts: moss-ts,
// TypeScript and its lib loaded, a type-check worker ready, nothing of any module) and hands it this connection; that
// process runs this one command as this process would have (its arguments, working directory, environment, umask,
// terminal) and then exits. Nothing of a module outlives a command, so nothing can be stale; what is shared is keyed
// below. Only light modules are imported here (node: builtins, no TypeScript): this runs before every command.
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { privateTempFolder } from "../private-temp-folder.ts";
import {
  type DaemonRequest,
  FrameReader,
  frame,
  type TerminalFacts,
  TO_CHILD,
  TO_CLIENT,
} from "./daemon-frames.ts";
import { MOSS_CODE_ROOT, mossCodeIdentity } from "./moss-package.ts";

/** The commands the daemon runs: the short ones a developer repeats. `agent`, `serve`, `worker` run for long. */
export const DAEMON_COMMANDS = new Set(["prompt", "check", "run", "test"]);

/** The switch that turns the warm path off: the command runs in its own process and no daemon starts. */
export const NO_DAEMON_VARIABLE = "MOSS_NO_DAEMON";

/** Environment variables Node (or its ICU, libuv) reads once at start: a daemon serves only the same values. */
const STARTUP_VARIABLE =
  /^(NODE_|UV_|LC_|LANG$|LANGUAGE$|TZ$|TMPDIR$|TMP$|TEMP$|ICU_DATA$|OPENSSL_|SSL_CERT_)/;

/** Node flags under which a second process would fight this one (a debugger port, profiles written on exit). */
const PRIVATE_FLAGS = /--(inspect|debug|prof|cpu-prof|heap-prof|diagnostic-dir|report|watch|test)/;

/** The packages whose code a warm process holds loaded besides moss-ts's own: any change to them is a new daemon. */
const HELD_PACKAGES = [
  "typescript",
  "ts-morph",
  "@ts-morph/common",
  "tsx",
  "esbuild",
  "inversify",
  "isolated-vm-5",
  "isolated-vm-6",
  "isolated-vm-7",
];

/** The root of moss-ts's package (above dist/ when built). */
const PACKAGE_ROOT = path.basename(MOSS_CODE_ROOT) === "dist" ? path.dirname(MOSS_CODE_ROOT) : MOSS_CODE_ROOT;

/**
 * Where this process's daemon listens, or undefined when the warm path is off for it: `MOSS_NO_DAEMON=1`, a private
 * temp folder that is not this user's kept one (the socket must be found again by the next command), a path too
 * long for a Unix socket, or a Node flag that a second process must not share. The name is a hash of everything a
 * warm process fixes at its start: Node (binary, version, flags, the variables it reads at start) and the code it
 * holds (every file of moss-ts's build and the packages it loads, by size and time).
 */
export function daemonSocketPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env[NO_DAEMON_VARIABLE] === "1" || process.platform === "win32") return undefined;
  const flags = nodeFlags(env);
  if (PRIVATE_FLAGS.test(flags.join(" "))) return undefined;
  const folder = privateTempFolder();
  if (path.basename(folder) !== `moss-ts-${process.getuid?.()}`) return undefined;
  const hash = createHash("sha256");
  const add = (value: string | number | undefined): void => {
    hash.update(`${value ?? ""}\0`);
  };
  add(process.execPath);
  add(process.version);
  add(process.arch);
  add(process.getuid?.());
  for (const flag of flags) add(flag);
  for (const name of Object.keys(env).sort()) {
    if (STARTUP_VARIABLE.test(name)) add(`${name}=${env[name]}`);
  }
  add(mossCodeIdentity());
  for (const [file, size, time] of heldPackages()) {
    add(file);
    add(size);
    add(time);
  }
  const socket = path.join(folder, `daemon-${hash.digest("hex").slice(0, 24)}.sock`);
  return socket.length < 100 ? socket : undefined;
}

/** Node's flags of this process as a daemon repeats them: without `--no-node-snapshot`, which it always has. */
function ownFlags(): string[] {
  return process.execArgv.filter((flag) => flag !== "--no-node-snapshot");
}

/** What fixes a daemon's Node start besides its binary: its flags and `NODE_OPTIONS`. */
function nodeFlags(env: NodeJS.ProcessEnv): string[] {
  const flags = ownFlags();
  if (env.NODE_OPTIONS) flags.push(`NODE_OPTIONS=${env.NODE_OPTIONS}`);
  return flags;
}

/** The package.json of each package a warm process holds loaded besides moss-ts's own code, by size and time. */
function heldPackages(): Array<[string, number, number]> {
  const files: Array<[string, number, number]> = [];
  for (const name of HELD_PACKAGES) {
    const found = packageManifest(name);
    if (found === undefined) continue;
    const stat = statSync(found);
    files.push([found, stat.size, stat.mtimeMs]);
  }
  return files;
}

/** A package's package.json as Node would find it from moss-ts's folder (node_modules, walking up). */
function packageManifest(name: string): string | undefined {
  for (let folder = PACKAGE_ROOT; ; folder = path.dirname(folder)) {
    const manifest = path.join(folder, "node_modules", name, "package.json");
    if (existsSync(manifest)) return manifest;
    if (path.dirname(folder) === folder) return undefined;
  }
}

/**
 * Runs `argv` through this user's daemon; resolves with the command's exit code, or undefined when no daemon took
 * it (the warm path is off, none answers, or it would not start): the caller then runs the command itself. A daemon
 * is started in the background when none answered, for the commands that follow.
 */
export async function runThroughDaemon(argv: string[]): Promise<number | undefined> {
  if (!DAEMON_COMMANDS.has(argv[0] ?? "")) return undefined;
  const socketPath = daemonSocketPath();
  if (socketPath === undefined) return undefined;
  const socket = await connected(socketPath);
  if (socket === undefined) {
    await startDaemon(socketPath);
    return undefined;
  }
  return relay(socket, argv);
}

/** A connection to the daemon, or undefined when none listens there. */
function connected(socketPath: string): Promise<Socket | undefined> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.once("connect", () => {
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", () => {
      socket.destroy();
      resolve(undefined);
    });
  });
}

/** Starts the daemon for `socketPath` in the background, detached from this terminal; it ends when idle. */
export async function startDaemon(socketPath: string): Promise<void> {
  const { spawn } = await import("node:child_process");
  const server = fileURLToPath(new URL(`./daemon-server${path.extname(import.meta.url)}`, import.meta.url));
  try {
    const child = spawn(process.execPath, ["--no-node-snapshot", ...ownFlags(), server, socketPath], {
      cwd: path.dirname(socketPath),
      detached: true,
      stdio: "ignore",
      env: process.env,
    });
    child.on("error", () => {});
    child.unref();
  } catch (error) {
    // The command runs in this process anyway; the daemon's log says why none started.
    appendFileSync(`${socketPath}.log`, `${new Date().toISOString()} could not start: ${String(error)}\n`);
  }
}

/** What this process's stream `stream` is, as a command would read it. */
function terminalFacts(stream: NodeJS.WriteStream): TerminalFacts {
  if (!stream.isTTY) return { isTTY: false };
  return { isTTY: true, columns: stream.columns, rows: stream.rows, colorDepth: stream.getColorDepth() };
}

const FORWARDED_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

/** Sends the request and plays the warm process's frames on this process's streams until it ends. */
function relay(socket: Socket, argv: string[]): Promise<number> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  const request: DaemonRequest = {
    argv,
    script: process.argv[1] ?? "",
    cwd: process.cwd(),
    env,
    umask: process.umask(),
    stdin: { isTTY: process.stdin.isTTY === true },
    stdout: terminalFacts(process.stdout),
    stderr: terminalFacts(process.stderr),
  };
  socket.write(frame(TO_CHILD.header, JSON.stringify(request)));
  // A reader that stopped reading (`moss prompt … | head -1`) is not the command's error, as without the daemon.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") throw error;
    });
  }
  return new Promise((resolve) => {
    let exitCode: number | undefined;
    let forwarded: NodeJS.Signals | undefined;
    let readingStdin = false;
    let rawMode = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      forwarded = signal;
      if (!socket.destroyed) socket.write(frame(TO_CHILD.signal, signal));
    };
    for (const signal of FORWARDED_SIGNALS) process.on(signal, onSignal);
    const reader = new FrameReader();
    socket.on("data", (chunk: Buffer) => {
      for (const { kind, payload } of reader.push(chunk)) {
        if (kind === TO_CLIENT.stdout) process.stdout.write(payload);
        else if (kind === TO_CLIENT.stderr) process.stderr.write(payload);
        else if (kind === TO_CLIENT.exit) exitCode = Number(payload.toString("utf8"));
        else if (kind === TO_CLIENT.rawMode && process.stdin.isTTY) {
          rawMode = payload.toString("utf8") === "1";
          process.stdin.setRawMode(rawMode);
        } else if (kind === TO_CLIENT.wantStdin && !readingStdin) {
          readingStdin = true;
          process.stdin.on("data", (data: Buffer) => {
            if (!socket.destroyed) socket.write(frame(TO_CHILD.stdin, data));
          });
          process.stdin.on("end", () => {
            if (!socket.destroyed) socket.write(frame(TO_CHILD.stdinEnd));
          });
        }
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      for (const signal of FORWARDED_SIGNALS) process.off(signal, onSignal);
      // A command that ended without leaving raw mode (it crashed, or was killed) leaves the terminal as it was.
      if (rawMode) process.stdin.setRawMode(false);
      if (readingStdin) process.stdin.destroy();
      if (exitCode !== undefined) return resolve(exitCode);
      if (forwarded !== undefined) {
        // The command ended by the signal, as a process of its own would have: this one ends the same way.
        process.kill(process.pid, forwarded);
        return;
      }
      process.stderr.write(
        "moss: the daemon's process ended without finishing the command (see its log in moss-ts's private temp folder; MOSS_NO_DAEMON=1 runs commands without it)\n",
      );
      resolve(1);
    });
  });
}
