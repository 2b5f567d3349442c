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
});
