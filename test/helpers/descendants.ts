import { readdirSync, readFileSync } from "node:fs";

/**
 * The processes named `name` (their `comm`) that descend from `root`, at any depth, unreaped ones (state Z)
 * included (Linux `/proc`): a process that ended but was never waited for still counts.
 */
export function descendantsNamed(name: string, root: number): Array<{ pid: number; state: string }> {
  const table = new Map<number, { parent: number; comm: string; state: string }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat !== undefined) table.set(Number(entry), stat);
  }
  const descends = (pid: number): boolean => {
    for (
      let current = table.get(pid)?.parent;
      current !== undefined && current > 0;
      current = table.get(current)?.parent
    )
      if (current === root) return true;
    return false;
  };
  return [...table]
    .filter(([pid, process]) => process.comm === name && descends(pid))
    .map(([pid, process]) => ({ pid, state: process.state }));
}

/** Whether process `pid` still runs (Linux `/proc`): an ended process not yet waited for (state Z) does not. */
export function isRunning(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== "Z";
}

/** A process's name, state and parent from `/proc/<pid>/stat`; undefined once it is gone. */
function procStat(pid: number): { comm: string; state: string; parent: number } | undefined {
  try {
    const match = /^\d+ \((.*)\) (\S) (\d+)/s.exec(readFileSync(`/proc/${pid}/stat`, "utf8"));
    return match ? { comm: match[1]!, state: match[2]!, parent: Number(match[3]) } : undefined;
  } catch {
    // A process that ended while it was read.
    return undefined;
  }
}
