import {
  type Dirent,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
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
  trimPrivateTempFolder();
}

/** A file in the private temp folder not used for this long is removed (worker entries, code caches, check results). */
export const PRIVATE_FILE_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;
/** Past this many bytes in the private temp folder, the least recently used files go first. */
export const PRIVATE_FOLDER_MAX_BYTES = 256 * 1024 * 1024;
/**
 * A file used more recently than this is never removed, whatever the size: a live process may be about to use it
 * (a long-running one marks the files it uses; an older moss-ts does not, so the margin is generous).
 */
export const PRIVATE_FILE_MIN_AGE_MS = 24 * 60 * 60 * 1000;
/** How often the folder is trimmed at most (by any process: a stamp file in the folder says when it last was). */
const TRIM_INTERVAL_MS = 60 * 60 * 1000;
const TRIM_STAMP = ".trimmed";
const trimmedFolders = new Set<string>();

/**
 * Marks a file of the private temp folder as used now (its modification time is its last use), so that trimming
 * keeps it. Call it when a kept file is read or is about to be run; a missing file is not an error.
 */
export function touchPrivateFile(file: string): void {
  const now = new Date();
  try {
    utimesSync(file, now, now);
  } catch {}
}

/**
 * Bounds the private temp folder, at most once an hour for all processes and once per process: removes every file
 * (any depth) not used for `PRIVATE_FILE_MAX_AGE_MS`, then, while the folder holds more than
 * `PRIVATE_FOLDER_MAX_BYTES`, the least recently used files, never one used in the last `PRIVATE_FILE_MIN_AGE_MS`;
 * folders left empty go too. Files are marked used by `writePrivateFile` and `touchPrivateFile`. `force` trims now.
 * Never throws: a file another process removes first, or one it cannot remove, is passed over.
 */
export function trimPrivateTempFolder(options: { force?: boolean; nowMs?: number } = {}): void {
  const folder = privateTempFolder();
  const nowMs = options.nowMs ?? Date.now();
  const stamp = path.join(folder, TRIM_STAMP);
  if (options.force !== true) {
    if (trimmedFolders.has(folder)) return;
    trimmedFolders.add(folder);
    try {
      if (nowMs - statSync(stamp).mtimeMs < TRIM_INTERVAL_MS) return;
    } catch {}
  }
  try {
    writeFileSync(stamp, "", { mode: 0o600 });
  } catch {}
  const files: Array<{ file: string; usedMs: number; bytes: number }> = [];
  const folders: Array<{ directory: string; changedMs: number }> = [];
  const walk = (directory: string, depth: number): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(directory, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const file = path.join(directory, entry.name);
      if (entry.isDirectory() && depth < 4) {
        let changedMs = nowMs;
        try {
          changedMs = statSync(file).mtimeMs;
        } catch {}
        walk(file, depth + 1);
        folders.push({ directory: file, changedMs });
      } else if (entry.isFile() && file !== stamp) {
        try {
          const found = statSync(file);
          files.push({ file, usedMs: found.mtimeMs, bytes: found.size });
        } catch {}
      }
    }
  };
  walk(folder, 0);
  files.sort((left, right) => left.usedMs - right.usedMs);
  let totalBytes = files.reduce((sum, item) => sum + item.bytes, 0);
  for (const { file, usedMs, bytes } of files) {
    const ageMs = nowMs - usedMs;
    const stale = ageMs > PRIVATE_FILE_MAX_AGE_MS;
    const overSize = totalBytes > PRIVATE_FOLDER_MAX_BYTES && ageMs > PRIVATE_FILE_MIN_AGE_MS;
    if (!stale && !overSize) continue;
    try {
      rmSync(file, { force: true });
      totalBytes -= bytes;
    } catch {}
  }
  // Deepest first; a folder still holding a file stays (rmdir refuses it), and so does a new one (Node's compile
  // cache makes its folder long before it writes a file there).
  for (const { directory, changedMs } of folders) {
    try {
      if (nowMs - changedMs > PRIVATE_FILE_MIN_AGE_MS) rmdirSync(directory);
    } catch {}
  }
}
