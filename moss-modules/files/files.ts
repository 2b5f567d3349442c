import { constants, realpathSync, type Stats, statSync } from "node:fs";
import {
  lstat,
  mkdir,
  open,
  opendir,
  readlink,
  realpath,
  rename,
  rmdir,
  stat,
  unlink,
} from "node:fs/promises";
import path from "node:path";
import { currentRunSignal } from "../../engine/runtime/run-signal.ts";
import { type ConfinedPath, confinedPath } from "./confined-path.ts";
import { FilesError } from "./files-error.ts";
import type { FileEntry, FileInfo, Files as FilesContract, FolderListing } from "./files-surface.ts";

export type { FileEntry, FileInfo, FolderListing } from "./files-surface.ts";

/** Limits of a `Files` service (host options; the model cannot change them). */
export interface FilesOptions {
  /** Largest file `read` returns. Default 1 MiB. */
  maxReadBytes?: number;
  /** Largest text one `write` or `append` takes. Default 1 MiB. */
  maxWriteBytes?: number;
  /** Largest size `append` may grow a file to. Default 16 MiB. */
  maxFileBytes?: number;
  /** Most entries one `list` returns. Default 500. */
  maxListEntries?: number;
}

const MIB = 1024 * 1024;
const DEFAULTS: Required<FilesOptions> = {
  maxReadBytes: MIB,
  maxWriteBytes: MIB,
  maxFileBytes: 16 * MIB,
  maxListEntries: 500,
};
const NO_FOLLOW = constants.O_NOFOLLOW ?? 0;
const NON_BLOCK = constants.O_NONBLOCK ?? 0;
const DIRECTORY = constants.O_DIRECTORY ?? 0;
const roots = new WeakMap<Files, { root: string; limits: Required<FilesOptions> }>();

/** The host side of the `Files` service (the model sees files-surface.ts): confined to one working directory. */
export class Files implements FilesContract {
  /** What a missing binding's error says (moss-compiler.ts): the host setup binds Files to a working directory. */
  static readonly mossBindingHint =
    'the host setup binds it to a working directory: bindFiles(compiler, "./work") from "moss-ts/files" in the host setup file (export function setup(compiler)), or `moss agent <module> "task" --working-directory <dir>`';
  /** Host side: serves the folder `root` (which must exist) with the given limits. */
  constructor(root: string, options: FilesOptions = {}) {
    let real: string;
    try {
      real = realpathSync(root);
    } catch {
      throw new TypeError(`the working directory ${root} does not exist`);
    }
    if (!statSync(real).isDirectory()) throw new TypeError(`the working directory ${root} is not a folder`);
    const limits = { ...DEFAULTS, ...options };
    for (const [name, value] of Object.entries(limits)) {
      if (!Number.isSafeInteger(value) || value <= 0)
        throw new TypeError(`${name} must be a positive integer (got ${value})`);
    }
    roots.set(this, { root: real, limits });
  }

  /** Reads a text file (UTF-8). */
  async read(path: string): Promise<string> {
    // Read before the first await: a read the run left behind stops between chunks once the run ended.
    const runSignal = currentRunSignal();
    const { root, limits } = state(this);
    const target = confinedPath(path);
    const real = await existing(root, target);
    const handle = await openInside(root, real, constants.O_RDONLY | NON_BLOCK, target);
    try {
      const info = await handle.stat();
      regularFile(info, target);
      if (info.size > limits.maxReadBytes) throw tooLarge(target, info.size, limits.maxReadBytes);
      const buffer = Buffer.alloc(limits.maxReadBytes + 1);
      let length = 0;
      while (length < buffer.length) {
        runSignal?.throwIfAborted();
        const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
        if (bytesRead === 0) break;
        length += bytesRead;
      }
      if (length > limits.maxReadBytes) throw tooLarge(target, length, limits.maxReadBytes);
      return buffer.subarray(0, length).toString("utf8");
    } finally {
      await handle.close();
    }
  }

  /** Creates or replaces a text file with `text`; its folder must exist (see `mkdir`). */
  async write(path: string, text: string): Promise<void> {
    await writeText(state(this), path, text, false);
  }

  /** Adds `text` at the end of a file, creating it when missing. */
  async append(path: string, text: string): Promise<void> {
    await writeText(state(this), path, text, true);
  }

  /** Lists a folder ("." for the working directory); names starting with "." are not listed. */
  async list(path = "."): Promise<FolderListing> {
    const runSignal = currentRunSignal();
    const { root, limits } = state(this);
    const target = confinedPath(path, { allowRoot: true });
    const real = await existing(root, target);
    const handle = await openInside(root, real, constants.O_RDONLY | DIRECTORY, target);
    const entries: FileEntry[] = [];
    let more = false;
    try {
      // Through the descriptor already checked, so a folder swapped for a link after the check is not listed.
      const folder = await opendir(descriptorPath(handle.fd) ?? real, { bufferSize: 64 }).catch((error) => {
        throw failure(error, target);
      });
      try {
        for await (const entry of folder) {
          runSignal?.throwIfAborted();
          if (entry.name.startsWith(".")) continue;
          if (entries.length === limits.maxListEntries) {
            more = true;
            break;
          }
          const kind = entry.isFile()
            ? "file"
            : entry.isDirectory()
              ? "folder"
              : entry.isSymbolicLink()
                ? "link"
                : "other";
          const sizeBytes =
            kind === "file"
              ? await lstat(joinPath(real, entry.name)).then(
                  (info) => info.size,
                  () => 0,
                )
              : 0;
          entries.push({ name: entry.name, path: joinDisplay(target, entry.name), kind, sizeBytes });
        }
      } finally {
        await folder.close().catch(() => undefined);
      }
    } finally {
      await handle.close();
    }
    entries.sort((left, right) => (left.name < right.name ? -1 : left.name > right.name ? 1 : 0));
    return { entries, more };
  }

  /** Tells what is at `path`, or null when nothing is there. */
  async stat(path: string): Promise<FileInfo | null> {
    const { root } = state(this);
    const target = confinedPath(path, { allowRoot: true });
    let real: string;
    try {
      real = await existing(root, target);
    } catch (error) {
      if (error instanceof FilesError && error.code === "not-found") return null;
      throw error;
    }
    const info = await lstat(real).catch((error) => {
      throw failure(error, target);
    });
    return {
      path: target.display,
      kind: kindOf(info),
      sizeBytes: info.isFile() ? info.size : 0,
      modified: info.mtime.toISOString(),
    };
  }

  /** Creates a folder and any missing folders above it. */
  async mkdir(path: string): Promise<void> {
    const { root } = state(this);
    const target = confinedPath(path);
    for (let index = 0; index < target.segments.length; index++) {
      const step = {
        segments: target.segments.slice(0, index + 1),
        display: target.segments.slice(0, index + 1).join("/"),
      };
      await inParent(root, step, (full) =>
        mkdir(full).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "EEXIST") throw failure(error, step);
        }),
      );
      const current = await existing(root, step);
      if (!(await stat(current)).isDirectory())
        throw new FilesError("not-a-directory", step.display, `${step.display}: is a file, not a folder`);
    }
  }

  /** Moves or renames a file or folder; refuses to replace something already at `to`. */
  async move(from: string, to: string): Promise<void> {
    const { root } = state(this);
    const source = confinedPath(from);
    const destination = confinedPath(to);
    await inParent(root, source, (sourceFull) =>
      inParent(root, destination, async (destinationFull) => {
        await lstat(sourceFull).catch((error) => {
          throw failure(error, source);
        });
        const taken = await lstat(destinationFull).then(
          () => true,
          () => false,
        );
        if (taken)
          throw new FilesError("exists", destination.display, `${destination.display}: already exists`);
        await rename(sourceFull, destinationFull).catch((error: NodeJS.ErrnoException) => {
          if (error.code === "EINVAL")
            throw new FilesError(
              "refused",
              source.display,
              `${source.display}: cannot move a folder into itself`,
            );
          throw failure(error, source);
        });
      }),
    );
  }

  /**
   * Deletes a file, a link or an empty folder.
   * @approval
   */
  async remove(path: string): Promise<void> {
    const { root } = state(this);
    const target = confinedPath(path);
    await inParent(root, target, async (full) => {
      const info = await lstat(full).catch((error) => {
        throw failure(error, target);
      });
      await (info.isDirectory() ? rmdir(full) : unlink(full)).catch((error) => {
        throw failure(error, target);
      });
    });
  }
}

// The one place that keeps host errors in: whatever a method meets that is not already a FilesError (a file that
// vanished mid-call, an I/O error) leaves as one naming the relative path the model gave, never the host's message.
for (const name of ["read", "write", "append", "list", "stat", "mkdir", "move", "remove"] as const) {
  const method = Files.prototype[name] as (...args: unknown[]) => Promise<unknown>;
  Object.defineProperty(Files.prototype, name, {
    value: async function (this: Files, ...args: unknown[]) {
      try {
        return await method.apply(this, args);
      } catch (error) {
        const given = typeof args[0] === "string" ? args[0] : ".";
        throw failure(error, { segments: [], display: given });
      }
    },
    writable: true,
    configurable: true,
  });
}

function state(files: Files): { root: string; limits: Required<FilesOptions> } {
  const found = roots.get(files);
  if (!found) throw new TypeError("not a Files service");
  return found;
}

async function writeText(
  { root, limits }: { root: string; limits: Required<FilesOptions> },
  path: string,
  text: string,
  appending: boolean,
): Promise<void> {
  const target = confinedPath(path);
  if (typeof text !== "string")
    throw new FilesError("refused", target.display, `${target.display}: the text to write must be a string`);
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length > limits.maxWriteBytes) throw tooLarge(target, bytes.length, limits.maxWriteBytes);
  const flags = constants.O_WRONLY | constants.O_CREAT | NON_BLOCK | (appending ? constants.O_APPEND : 0);
  const link = await lstat(joinPath(root, ...target.segments)).then(
    (info) => info.isSymbolicLink(),
    () => false,
  );
  // A link inside the root is written through to its (checked) target; any other file is opened, or created, in
  // its checked parent folder.
  const handle = link
    ? await openInside(root, await existing(root, target), flags, target)
    : await inParent(root, target, (full) => openInside(root, full, flags, target));
  try {
    const info = await handle.stat();
    regularFile(info, target);
    if (appending && info.size + bytes.length > limits.maxFileBytes)
      throw tooLarge(target, info.size + bytes.length, limits.maxFileBytes);
    // Truncated only after the descriptor is known to be inside: a swapped link never truncates an outside file.
    if (!appending) await handle.truncate(0);
    await handle.write(bytes, 0, bytes.length, appending ? null : 0);
  } finally {
    await handle.close();
  }
}

/** The real path of an existing entry, checked to be inside the root and outside dot-folders. */
async function existing(root: string, target: ConfinedPath): Promise<string> {
  let real: string;
  try {
    real = await realpath(joinPath(root, ...target.segments));
  } catch (error) {
    throw failure(error, target);
  }
  inside(root, real, target);
  return real;
}

/**
 * Runs `act` on the entry's path inside its parent folder, opened and checked first: on Linux the path goes
 * through the folder's descriptor (/proc/self/fd/N/name), so a folder swapped for a link after the check is not
 * where `act` lands; elsewhere it is the parent's real path, checked just before.
 * Exported for its test only (not from index.ts).
 */
export async function inParent<T>(
  root: string,
  target: ConfinedPath,
  act: (full: string) => Promise<T>,
): Promise<T> {
  const parentSegments = target.segments.slice(0, -1);
  const parentTarget = { segments: parentSegments, display: parentSegments.join("/") || "." };
  const parent = await existing(root, parentTarget);
  const folder = await openInside(root, parent, constants.O_RDONLY | DIRECTORY, parentTarget);
  try {
    return await act(joinPath(descriptorPath(folder.fd) ?? parent, target.segments.at(-1) as string));
  } finally {
    await folder.close();
  }
}

/**
 * Opens `real` without following a final link, then checks where the descriptor really is (on Linux through
 * /proc/self/fd): a folder swapped for a link between the check and the open is refused before any byte moves.
 */
async function openInside(root: string, real: string, flags: number, target: ConfinedPath) {
  const handle = await open(real, flags | NO_FOLLOW, 0o644).catch((error) => {
    throw failure(error, target);
  });
  try {
    const where = descriptorPath(handle.fd);
    if (where !== undefined) {
      inside(root, await readlink(where), target);
    } else {
      const [opened, now] = await Promise.all([handle.stat(), stat(await realpath(real))]);
      inside(root, await realpath(real), target);
      if (opened.ino !== now.ino || opened.dev !== now.dev) throw leadsOutside(target);
    }
    return handle;
  } catch (error) {
    await handle.close();
    throw error instanceof FilesError ? error : failure(error, target);
  }
}

function descriptorPath(fd: number): string | undefined {
  return process.platform === "linux" ? `/proc/self/fd/${fd}` : undefined;
}

function inside(root: string, real: string, target: ConfinedPath): void {
  if (real === root) return;
  if (!real.startsWith(root + path.sep)) throw leadsOutside(target);
  if (
    real
      .slice(root.length + 1)
      .split(path.sep)
      .some((segment) => segment.startsWith("."))
  )
    throw new FilesError(
      "refused",
      target.display,
      `${target.display}: leads into a reserved folder (a name starting with ".")`,
    );
}

function leadsOutside(target: ConfinedPath): FilesError {
  return new FilesError(
    "refused",
    target.display,
    `${target.display}: a link leads outside the working directory`,
  );
}

function regularFile(info: Stats, target: ConfinedPath): void {
  if (info.isDirectory())
    throw new FilesError("not-a-file", target.display, `${target.display}: is a folder, not a file`);
  if (!info.isFile())
    throw new FilesError("not-a-file", target.display, `${target.display}: is not a regular file`);
  // Another name for the same file may live outside the working directory.
  if (info.nlink > 1)
    throw new FilesError(
      "refused",
      target.display,
      `${target.display}: has other hard links (it may also live outside the working directory)`,
    );
}

function tooLarge(target: ConfinedPath, bytes: number, limit: number): FilesError {
  return new FilesError(
    "too-large",
    target.display,
    `${target.display}: ${bytes} bytes is more than the limit of ${limit} bytes`,
  );
}

function kindOf(info: Stats): FileInfo["kind"] {
  return info.isFile() ? "file" : info.isDirectory() ? "folder" : info.isSymbolicLink() ? "link" : "other";
}

function joinDisplay(folder: ConfinedPath, name: string): string {
  return folder.segments.length === 0 ? name : `${folder.display}/${name}`;
}

function joinPath(...parts: string[]): string {
  return path.join(...parts);
}

const MESSAGES: Record<string, [FilesError["code"], string]> = {
  ENOENT: ["not-found", "no such file or folder"],
  EEXIST: ["exists", "already exists"],
  ENOTDIR: ["not-a-directory", "a name on the way is a file, not a folder"],
  EISDIR: ["not-a-file", "is a folder, not a file"],
  ENOTEMPTY: ["not-empty", "the folder is not empty"],
  ELOOP: ["refused", "is a link (links are not followed here)"],
  EACCES: ["refused", "permission denied"],
  EPERM: ["refused", "permission denied"],
};

/** A file-system error as the model sees it: a code and the relative path, never the host's message or path. */
function failure(error: unknown, target: ConfinedPath): FilesError {
  if (error instanceof FilesError) return error;
  const code = (error as NodeJS.ErrnoException)?.code ?? "unknown";
  const [filesCode, text] = MESSAGES[code] ?? ["failed", `the file system failed (${code})`];
  return new FilesError(filesCode, target.display, `${target.display}: ${text}`);
}
