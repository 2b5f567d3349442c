// Light helpers of the benchmarks (no engine code: a child measuring memory from a bare start may import them):
// endless replies for the fake model, and the resident size of a process tree.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FakeReply } from "../test/agent/fake-openai-server.ts";

/** Replies for the fake model that never run out: the `index`th request gets `reply(index)`. */
export function endlessReplies(reply: (index: number) => FakeReply): FakeReply[] {
  return new Proxy([] as FakeReply[], {
    get: (target, key) =>
      typeof key === "string" && /^\d+$/.test(key) ? reply(Number(key)) : Reflect.get(target, key),
  });
}

/** Each process of the tree rooted at `pid` (Linux `/proc`): its resident size in bytes and its command line. */
export function treeProcesses(pid = process.pid): Array<{ pid: number; rss: number; command: string }> {
  const found: Array<{ pid: number; rss: number; command: string }> = [];
  const visit = (current: number): void => {
    try {
      const status = readFileSync(`/proc/${current}/status`, "utf8");
      const command = readFileSync(`/proc/${current}/cmdline`, "utf8").split("\0").filter(Boolean);
      found.push({
        pid: current,
        rss: Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? 0) * 1024,
        command: command.join(" "),
      });
      for (const thread of readdirSync(`/proc/${current}/task`)) {
        const children = readFileSync(`/proc/${current}/task/${thread}/children`, "utf8").trim();
        for (const child of children === "" ? [] : children.split(" ")) visit(Number(child));
      }
    } catch {}
  };
  visit(pid);
  return found;
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * Builds moss-ts as it is published (dist/ and bin/, with package.json so that `import … from "moss-ts"` in a module
 * copied under `folder` resolves to this build) into `folder`, made afresh; returns its `bin/moss.js`. Packages
 * resolve from the repository's node_modules (the folder lives inside it).
 */
export function buildPublishedCli(folder: string): string {
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(path.join(folder, "bin"), { recursive: true });
  // The project's own build (tsc plus the files tsc does not emit, such as the sandbox's globals .d.ts).
  const built = spawnSync(
    process.execPath,
    [path.join(ROOT, "scripts", "build.js"), "--out-dir", path.join(folder, "dist")],
    { cwd: ROOT, encoding: "utf8" },
  );
  if (built.status !== 0) throw new Error(`building the CLI failed:\n${built.stdout}${built.stderr}`);
  const bin = path.join(folder, "bin", "moss.js");
  copyFileSync(path.join(ROOT, "bin", "moss.js"), bin);
  copyFileSync(path.join(ROOT, "package.json"), path.join(folder, "package.json"));
  return bin;
}
