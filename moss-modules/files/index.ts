// moss-ts/files: a Files service confined to a working directory, for the model's code.
import type { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { Files, type FilesOptions } from "./files.ts";

export { type ConfinedPath, confinedPath } from "./confined-path.ts";
export { type FileEntry, type FileInfo, Files, type FilesOptions, type FolderListing } from "./files.ts";
export { FilesError, type FilesErrorCode } from "./files-error.ts";

/** Binds a `Files` service rooted at `workingDirectory` (a context module declares `files!: Files`). */
export function bindFiles(
  compiler: MossCompiler,
  workingDirectory: string,
  options: FilesOptions = {},
): Files {
  const files = new Files(workingDirectory, options);
  compiler.bind(Files, files);
  return files;
}
