#!/usr/bin/env node
// The moss CLI, run with plain `node`. Installed, it runs the built JavaScript in dist/; in a checkout of the
// repository (where tsconfig.json sits beside bin/) it runs the TypeScript sources through tsx, so it never runs
// a stale build. Context modules are TypeScript either way: the engine registers tsx's loader when it loads one.
//
// isolated-vm needs `--no-node-snapshot` (Node 20 and later) in any process that runs isolates. The default
// sandbox runs them in child processes started with it; `moss test` and `--sandbox in-process` run them here, so
// for the commands that can, the CLI starts itself again with the flag when it is missing. `moss run` can only
// through its --sandbox option: with the default it runs in this process, without a second Node start.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";

// V8's compiled code of TypeScript is kept between runs by the commands that load it (engine/enable-code-cache.ts),
// in this user's private temp folder: Node's default compile cache folder is shared by every user of the machine.

const argv = process.argv.slice(2);
// A server outlives its compiles: its esbuild services stop after 5 s without one (engine/esbuild-service.ts), and
// esbuild's synchronous calls run without the worker thread whose stop would leave a compiler process unreaped. Set
// before anything loads esbuild, so every thread (Node 20 runs module hooks on one that copies the environment when
// it starts) and every process a server starts has them.
if (argv[0] === "serve" || argv[0] === "worker") {
  process.env.MOSS_ESBUILD_IDLE_MS ??= "5000";
  process.env.ESBUILD_WORKER_THREADS ??= "0";
}
// ISOLATE_COMMANDS: `agent`, `serve` and `worker` run isolates only in sandbox processes (they have no in-process
// sandbox): they start once, without a second Node process (about 45 MiB for the life of a server).
const ISOLATE_COMMANDS = new Set(["run", "test"]);
const fromSource = existsSync(new URL("../tsconfig.json", import.meta.url));

// The warm path (README "The warm path"): installed, `prompt`, `check`, `run` and `test` go to this user's daemon,
// which runs them in a process that has moss-ts and TypeScript loaded already; without one answering, the command
// runs here and a daemon starts for the next. `MOSS_NO_DAEMON=1` turns it off. A checkout runs its sources, which
// change as they are edited: it never uses one. A process started again with --no-node-snapshot (below) asked already.
const daemonCode =
  fromSource || hasFlag("--no-node-snapshot") || process.env.MOSS_NO_DAEMON === "1"
    ? undefined
    : await (await import("../dist/engine/cli/daemon-client.js")).runThroughDaemon(argv);

if (daemonCode !== undefined) {
  process.exitCode = daemonCode;
} else if (runsIsolatesHere(argv) && !hasFlag("--no-node-snapshot")) {
  const child = spawn(
    process.execPath,
    ["--no-node-snapshot", ...process.execArgv, ...process.argv.slice(1)],
    {
      stdio: "inherit",
    },
  );
  // Ctrl-C reaches the child with the rest of the terminal's process group; other signals are passed on.
  const forward = (signal) => child.kill(signal);
  process.on("SIGINT", () => {});
  for (const signal of ["SIGTERM", "SIGHUP"]) process.on(signal, forward);
  child.on("exit", (code, signal) => {
    if (!signal) process.exit(code ?? 1);
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  });
} else {
  let main;
  if (fromSource) {
    // `import … from "moss-ts"` in the repository's modules resolves to the sources too ("moss-ts-source").
    const { addSourceCondition } = await import("../scripts/source-condition.js");
    await addSourceCondition();
    const { register } = await import("tsx/esm/api");
    register();
    globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
    ({ main } = await import("../engine/cli/main.ts"));
  } else {
    ({ main } = await import("../dist/engine/cli/main.js"));
  }
  process.exitCode = await main(argv);
}

/** Whether the command may run isolates in this process: `moss run` only with `--sandbox in-process`. */
function runsIsolatesHere([command, ...options]) {
  if (command !== "run") return ISOLATE_COMMANDS.has(command ?? "");
  for (let index = 0; index < options.length && options[index] !== "--"; index++) {
    const option = options[index];
    if (option === "--sandbox") return options[index + 1] !== "process";
    if (option.startsWith("--sandbox=")) return option !== "--sandbox=process";
  }
  return false;
}

function hasFlag(flag) {
  return process.execArgv.includes(flag) || (process.env.NODE_OPTIONS ?? "").split(/\s+/).includes(flag);
}
