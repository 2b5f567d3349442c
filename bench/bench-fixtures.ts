// Light helpers of the benchmarks (no engine code: a child measuring memory from a bare start may import them):
// endless replies for the fake model, and the resident size of a process tree.
import { readdirSync, readFileSync } from "node:fs";
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
