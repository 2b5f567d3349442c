import { mkdirSync, mkdtempSync, renameSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

let fallback: string | undefined;

/**
 * A folder under the temp folder that only this user can write, for code moss-ts bundles once and runs later (worker
 * entries, the isolate script). The temp folder is shared: a file another user planted there under the expected
 * name would run as moss-ts's own code. The folder is `moss-ts-<uid>`, kept between processes when it is this user's
 * and no one else may enter it; otherwise (planted, loosened, or a platform without user ids) a new folder with an
 * unguessable name, for this process only.
 */
export function privateTempFolder(): string {
  const uid = process.getuid?.();
  if (uid !== undefined) {
    const folder = path.join(tmpdir(), `moss-ts-${uid}`);
    try {
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      const stat = statSync(folder);
      if (stat.isDirectory() && stat.uid === uid && (stat.mode & 0o077) === 0) return folder;
    } catch {}
  }
  fallback ??= mkdtempSync(path.join(tmpdir(), "moss-ts-process-"));
  return fallback;
}

/**
 * Writes `file` (in the private temp folder) readable by this user only, through a temporary file and a rename, so
 * another process never reads half of it. Throws what the file system throws.
 */
export function writePrivateFile(file: string, data: string | Uint8Array): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, data, { mode: 0o600 });
  renameSync(partial, file);
}
