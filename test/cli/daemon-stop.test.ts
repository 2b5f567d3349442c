import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runMoss } from "../helpers/moss-cli.ts";

/*
 * `moss daemon stop` signals the processes named by the daemons' pid files. A pid file a daemon could not remove
 * (it was killed) names, later, whatever process got that number: stop must not signal it.
 */
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe("moss daemon stop", () => {
  it("never signals a process that is not the daemon its pid file names, and drops that file", async () => {
    const temp = mkdtempSync(path.join(tmpdir(), "moss-daemon-stop-"));
    folders.push(temp);
    const privateFolder = path.join(temp, `moss-ts-${process.getuid?.()}`);
    mkdirSync(privateFolder, { recursive: true, mode: 0o700 });
    // An unrelated live process (not a daemon) under a stale pid file's number.
    const bystander = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    const ended = new Promise<string | null>((resolve) =>
      bystander.once("exit", (_code, signal) => resolve(signal)),
    );
    const pidFile = path.join(privateFolder, "daemon-0123456789abcdef01234567.sock.pid");
    writeFileSync(pidFile, `${bystander.pid}\n`);
    try {
      const stopped = await runMoss(["daemon", "stop"], { env: { TMPDIR: temp } });
      expect(stopped.code).toBe(0);
      expect(stopped.stdout).toContain("No daemon was running.");
      expect(existsSync(pidFile)).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(bystander.exitCode).toBeNull();
      expect(bystander.signalCode).toBeNull();
    } finally {
      bystander.kill("SIGKILL");
      await ended;
    }
  });

  // A daemon ends after its warm processes (they write V8's code cache at exit): "Stopped" is said once it is gone,
  // so nothing of it still runs or writes in the private temp folder after the command.
  it.each([
    ["ends a while after SIGTERM", "setTimeout(() => process.exit(0), 600)", false],
    ["never ends on SIGTERM (it is killed, its files dropped)", "undefined", true],
  ])(
    "returns only once the daemon is gone: one that %s",
    async (_name, onTerm, killed) => {
      const temp = mkdtempSync(path.join(tmpdir(), "moss-daemon-stop-"));
      folders.push(temp);
      const privateFolder = path.join(temp, `moss-ts-${process.getuid?.()}`);
      mkdirSync(privateFolder, { recursive: true, mode: 0o700 });
      const socket = path.join(privateFolder, "daemon-0123456789abcdef01234567.sock");
      // Started as the daemon is: its command line names its socket.
      const daemon = spawn(
        process.execPath,
        ["-e", `process.on("SIGTERM", () => ${onTerm}); setInterval(() => {}, 1000)`, socket],
        { stdio: "ignore" },
      );
      const ended = new Promise<void>((resolve) => daemon.once("exit", () => resolve()));
      writeFileSync(`${socket}.pid`, `${daemon.pid}\n`);
      writeFileSync(`${socket}.state`, `{"ready":true,"served":0}\n`);
      try {
        await new Promise((resolve) => setTimeout(resolve, 300));
        const stopped = await runMoss(["daemon", "stop"], { env: { TMPDIR: temp } });
        expect(stopped.code).toBe(0);
        expect(stopped.stdout).toContain("Stopped 1 daemon.");
        // Gone when the command returned (its exit is seen here within the event loop's next turns).
        await Promise.race([
          ended,
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error("the daemon outlived `moss daemon stop`")), 500),
          ),
        ]);
        // A daemon that ends removes its own files; one that had to be killed could not.
        if (killed) expect(existsSync(`${socket}.pid`)).toBe(false);
      } finally {
        daemon.kill("SIGKILL");
        await ended;
      }
    },
    30_000,
  );
});
