// The supervisor's read of a sandbox process's resident size (child-death.ts ResidentReader): a fresh value each
// read from one open file, nothing once the process ended (its number may be another's by then), and no file left
// open after close.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ResidentReader } from "../../engine/sandbox/child-death.ts";

const openFiles = () => readdirSync("/proc/self/fd").length;

describe.skipIf(process.platform !== "linux")("ResidentReader", () => {
  it("reads a live process's resident size afresh on every read", async () => {
    const child = spawn(process.execPath, [
      "-e",
      "process.stdin.once('data', () => { globalThis.kept = Buffer.alloc(64 * 1024 * 1024, 1); process.stdout.write('grown'); }); process.stdout.write('ready'); setInterval(() => {}, 1000);",
    ]);
    const reader = new ResidentReader(child.pid);
    try {
      await once(child.stdout!, "data");
      const before = await reader.read();
      expect(before).toBeGreaterThan(1024 * 1024);
      child.stdin!.write("grow\n");
      await once(child.stdout!, "data");
      const after = await reader.read();
      expect(after! - before!).toBeGreaterThan(48 * 1024 * 1024);
    } finally {
      child.kill("SIGKILL");
      await once(child, "exit");
      reader.close();
    }
  });

  it("reads nothing once the process ended, nor after close, and leaves no file open", async () => {
    const files = openFiles();
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"]);
    const reader = new ResidentReader(child.pid);
    expect(await reader.read()).toBeGreaterThan(0);
    child.kill("SIGKILL");
    await once(child, "exit");
    expect(await reader.read()).toBeUndefined();
    reader.close();
    expect(await reader.read()).toBeUndefined();
    const none = new ResidentReader(undefined);
    expect(await none.read()).toBeUndefined();
    // The reader closes its file at once; the ended child's pipes may close a moment later.
    for (let wait = 0; wait < 50 && openFiles() > files; wait++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(openFiles()).toBeLessThanOrEqual(files);
  });
});
