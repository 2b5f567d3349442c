import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { privateTempFolder } from "../private-temp-folder.ts";
import type { CliCommand } from "./cli-io.ts";
import { daemonSocketPath, NO_DAEMON_VARIABLE } from "./daemon-client.ts";
import { EXIT } from "./exit-codes.ts";

const USAGE = `Usage: moss daemon <status|stop>

The warm path: installed, \`moss prompt\`, \`check\`, \`run\` and \`test\` run in a process of this user's daemon that
has moss-ts and TypeScript loaded already (a new process for each command: nothing of a module is kept). The first
command without one starts it; it ends after ${"$"}MOSS_DAEMON_IDLE_SECONDS (default 600) without a command.
  status   list this user's daemons (one per Node and moss-ts build) and say which one this shell's commands use
  stop     stop them all now (it returns once they have ended)
${NO_DAEMON_VARIABLE}=1 runs every command in its own process and starts no daemon.`;

/** `moss daemon status|stop`. */
export const daemonCommand: CliCommand = async (argv, io) => {
  const [action] = argv;
  if (action === "--help" || action === "-h") {
    io.stdout.write(`${USAGE}\n`);
    return EXIT.ok;
  }
  if (action !== "status" && action !== "stop") {
    io.stderr.write(`moss daemon: expected "status" or "stop"\n\n${USAGE}\n`);
    return EXIT.usage;
  }
  const folder = privateTempFolder();
  const daemons = readdirSync(folder)
    .filter((name) => /^daemon-[0-9a-f]+\.sock\.pid$/.test(name))
    .map((name) => {
      const socket = path.join(folder, name.slice(0, -".pid".length));
      const pid = Number(readFileSync(path.join(folder, name), "utf8"));
      return { socket, pid, alive: isDaemon(pid, socket) };
    });
  if (action === "stop") {
    for (const daemon of daemons) {
      if (daemon.alive) process.kill(daemon.pid, "SIGTERM");
      else rmSync(`${daemon.socket}.pid`, { force: true });
    }
    const stopped = daemons.filter((daemon) => daemon.alive).length;
    // "Stopped" means gone: the daemon and its warm processes no longer run or write in the private temp folder.
    for (const daemon of daemons.filter((each) => each.alive)) await ended(daemon);
    io.stdout.write(
      `${stopped === 0 ? "No daemon was running." : `Stopped ${stopped} daemon${stopped === 1 ? "" : "s"}.`}\n`,
    );
    return EXIT.ok;
  }
  const mine = daemonSocketPath(io.env);
  const live = daemons.filter((daemon) => daemon.alive);
  if (live.length === 0) io.stdout.write("No daemon is running.\n");
  for (const daemon of live) {
    const used = daemon.socket === mine ? " (this shell's commands use it)" : "";
    const state = readState(daemon.socket);
    const facts =
      state === undefined ? "" : `  ${state.ready ? "ready" : "warming"}, ${state.served} command(s) served`;
    io.stdout.write(`pid ${daemon.pid}  ${daemon.socket}${facts}${used}\n`);
  }
  if (mine === undefined)
    io.stdout.write(
      `This shell's commands run without a daemon${io.env[NO_DAEMON_VARIABLE] === "1" ? ` (${NO_DAEMON_VARIABLE}=1)` : ""}.\n`,
    );
  else if (!existsSync(mine))
    io.stdout.write("None serves this shell's Node and moss-ts yet: the next command starts one.\n");
  return EXIT.ok;
};

/** How long `moss daemon stop` waits for a daemon to end on SIGTERM (it waits for its warm processes) before killing it. */
const STOP_WAIT_MS = 5000;

/** Waits until a daemon sent SIGTERM has ended; one still running after {@link STOP_WAIT_MS} is killed. */
async function ended(daemon: { socket: string; pid: number }): Promise<void> {
  const deadline = Date.now() + STOP_WAIT_MS;
  while (isDaemon(daemon.pid, daemon.socket)) {
    if (Date.now() > deadline) {
      try {
        process.kill(daemon.pid, "SIGKILL");
      } catch {}
      for (const suffix of ["", ".pid", ".state"]) rmSync(`${daemon.socket}${suffix}`, { force: true });
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** What the daemon wrote of itself: whether a warm process is ready, and how many commands it served. */
export function readState(socket: string): { ready: boolean; served: number } | undefined {
  try {
    return JSON.parse(readFileSync(`${socket}.state`, "utf8")) as { ready: boolean; served: number };
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` is the daemon of `socket`: alive, and (where /proc tells) started for that socket. A pid file left by
 * a daemon that could not remove it names, later, whatever process the system gave that number to: never signal it.
 */
function isDaemon(pid: number, socket: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(socket);
  } catch {
    return process.platform !== "linux";
  }
}
