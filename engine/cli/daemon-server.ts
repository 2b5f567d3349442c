// The daemon of the CLI's warm path (daemon-client.ts says what it is for): run as
// `node --no-node-snapshot daemon-server.js <socket>` by a client that found none. It listens on the socket (in the
// user's private temp folder, readable by this user only), keeps ONE process warm (daemon-child.ts) and hands each
// connection to it: that process runs the command and exits, and a new one warms for the next. It holds no module
// and runs no command itself. It ends after `MOSS_DAEMON_IDLE_SECONDS` (default 600) without a connection, on
// SIGTERM (`moss daemon stop`), or when warm processes keep failing to start.
import { type ChildProcess, fork } from "node:child_process";
import { appendFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import path from "node:path";

const socketPath = process.argv[2];
if (socketPath === undefined) {
  process.stderr.write("usage: daemon-server.js <socket>\n");
  process.exit(2);
}
const log = (line: string): void => {
  try {
    appendFileSync(`${socketPath}.log`, `${new Date().toISOString()} ${process.pid} ${line}\n`, {
      mode: 0o600,
    });
  } catch {}
};
const idleMs = Math.max(1, Number(process.env.MOSS_DAEMON_IDLE_SECONDS) || 600) * 1000;
/** How long a command's process runs before the next warm process starts beside it. */
const NEXT_WARM_DELAY_MS = 3000;
/** Warm processes that ended before they were ready, in a row: at this many the daemon gives up. */
const MAX_FAILED_STARTS = 3;
/** How long a warm process has to end on SIGTERM when the daemon stops, before it is killed. */
const CHILD_EXIT_GRACE_MS = 2000;
const childEntry = new URL(`./daemon-child${path.extname(import.meta.url)}`, import.meta.url);

let ready: ChildProcess | undefined;
let warming: ChildProcess | undefined;
let failedStarts = 0;
/** Commands handed to a warm process so far. */
let served = 0;
let closing = false;
const waiting: Socket[] = [];
let idleTimer: NodeJS.Timeout | undefined;

/**
 * `<socket>.state`: whether a warm process is ready and how many commands the daemon served (`moss daemon status`
 * prints it; a benchmark waits for `ready`).
 */
function writeState(): void {
  try {
    writeFileSync(
      `${socketPath}.state`,
      `${JSON.stringify({ pid: process.pid, ready: ready !== undefined, served })}\n`,
      {
        mode: 0o600,
      },
    );
  } catch {}
}

function resetIdleTimer(): void {
  if (idleTimer !== undefined) clearTimeout(idleTimer);
  idleTimer = setTimeout(() => shutDown("idle"), idleMs);
}

/** Starts the next warm process, unless one is warming or ready. */
function warm(): void {
  if (closing || ready !== undefined || warming !== undefined) return;
  const child = fork(childEntry, [], {
    execArgv: process.execArgv,
    cwd: path.dirname(socketPath!),
    env: process.env,
    stdio: ["ignore", "ignore", "ignore", "ipc"],
  });
  warming = child;
  child.on("message", (message: { type?: string; warmUpMs?: number }) => {
    if (message.type !== "ready" || warming !== child) return;
    log(`process ${child.pid} warm in ${message.warmUpMs} ms`);
    warming = undefined;
    ready = child;
    failedStarts = 0;
    handOver();
    writeState();
  });
  child.on("error", (error) => log(`warm process: ${error.message}`));
  child.on("exit", (code, signal) => {
    if (ready === child) ready = undefined;
    if (warming !== child) return;
    warming = undefined;
    log(`a warm process ended before it was ready (${signal ?? `exit ${code}`})`);
    if (++failedStarts >= MAX_FAILED_STARTS) return shutDown("warm processes keep failing to start");
    warm();
  });
}

/**
 * Gives each waiting connection to a process of its own: the ready one, else the one warming (it stops warming and
 * runs the command about as a fresh process would). The next process starts warming once the command's
 * process ended, or after {@link NEXT_WARM_DELAY_MS} if it runs longer: not beside the command, whose CPU it would
 * take.
 */
function handOver(): void {
  while (waiting.length > 0) {
    const child = ready ?? warming;
    if (child === undefined) {
      warm();
      return;
    }
    const connection = waiting.shift()!;
    if (connection.destroyed) continue;
    const wasReady = child === ready;
    if (wasReady) ready = undefined;
    else warming = undefined;
    child.send({ type: "request" }, connection);
    served++;
    log(`command ${served} handed to process ${child.pid}${wasReady ? "" : " (still warming)"}`);
    writeState();
    const next = setTimeout(warm, NEXT_WARM_DELAY_MS);
    child.once("exit", () => {
      clearTimeout(next);
      warm();
    });
  }
}

function shutDown(reason: string): void {
  if (closing) return;
  closing = true;
  log(`stopping: ${reason}`);
  server.close();
  rmSync(socketPath!, { force: true });
  rmSync(`${socketPath}.pid`, { force: true });
  rmSync(`${socketPath}.state`, { force: true });
  for (const connection of waiting) connection.destroy();
  // The warm processes end before the daemon does: each writes what it must at exit (V8's code cache, on Node 22+,
  // into the private temp folder), and `moss daemon stop` returns once the daemon is gone, so after it nothing of the
  // daemon still writes there. One that does not end on SIGTERM in time is killed.
  const children = [ready, warming].filter(
    (child): child is ChildProcess =>
      child !== undefined && child.exitCode === null && child.signalCode === null,
  );
  let left = children.length;
  const exit = (): never => process.exit(0);
  if (left === 0) exit();
  const force = setTimeout(() => {
    for (const child of children) child.kill("SIGKILL");
    setTimeout(exit, 100);
  }, CHILD_EXIT_GRACE_MS);
  for (const child of children) {
    child.once("exit", () => {
      if (--left > 0) return;
      clearTimeout(force);
      exit();
    });
    child.kill("SIGTERM");
  }
}

const server = createServer({ pauseOnConnect: true }, (connection) => {
  resetIdleTimer();
  // The socket's time says it is in use (the private temp folder's trimming spares files used lately).
  const now = new Date();
  try {
    utimesSync(socketPath!, now, now);
  } catch {}
  waiting.push(connection);
  handOver();
});

/** Listens on the socket; when one is there, only if no daemon answers on it (else this one is not needed). */
function listen(retried = false): void {
  server.once("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EADDRINUSE" || retried) {
      log(`cannot listen: ${error.message}`);
      process.exit(1);
    }
    const probe = connect(socketPath!);
    probe.once("connect", () => {
      probe.destroy();
      process.exit(0);
    });
    probe.once("error", () => {
      rmSync(socketPath!, { force: true });
      listen(true);
    });
  });
  server.listen(socketPath, () => {
    writeFileSync(`${socketPath}.pid`, `${process.pid}\n`, { mode: 0o600 });
    writeState();
    log("listening");
    resetIdleTimer();
    warm();
  });
}

// The socket is this user's only (the folder is already): connections come from this user's own commands.
process.umask(0o077);
process.on("SIGTERM", () => shutDown("SIGTERM"));
process.on("SIGINT", () => shutDown("SIGINT"));
listen();
