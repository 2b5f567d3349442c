import { mkdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * A folder under the temp folder that only this user can write, for code moss-ts bundles once and runs later (worker
 * entries, the isolate script); undefined when there is none. The temp folder is shared: a file another user planted
 * there under the expected name would run as moss-ts's own code, so nothing that runs is cached outside this folder.
 */
export function privateTempFolder(): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const folder = path.join(tmpdir(), `moss-ts-${uid}`);
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    const stat = statSync(folder);
    return stat.isDirectory() && stat.uid === uid && (stat.mode & 0o077) === 0 ? folder : undefined;
  } catch {
    return undefined;
  }
}
