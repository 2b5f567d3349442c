// What the model's code sees of moss-ts/files (the type-checker maps "moss-ts/files" here, see module-project.ts):
// the Files service as prompt text, without the host implementation (files.ts implements this class's shape).

/** A file or folder in a listing. */
export interface FileEntry {
  /** Its name (no folder). */
  name: string;
  /** Its path relative to the working directory: give it to any other method. */
  path: string;
  kind: "file" | "folder" | "link" | "other";
  /** Size in bytes (0 for folders). */
  sizeBytes: number;
}

/** What `stat` tells about a path. */
export interface FileInfo {
  /** The path relative to the working directory. */
  path: string;
  kind: "file" | "folder" | "link" | "other";
  sizeBytes: number;
  /** Last modification, ISO 8601. */
  modified: string;
}

/** A folder's entries, sorted by name; `more` is true when the folder holds more than the listing limit. */
export interface FolderListing {
  entries: FileEntry[];
  more: boolean;
}

/**
 * Text files in your working directory. Paths are relative to it, with "/" between names ("notes/today.md");
 * "..", absolute paths and names starting with "." are refused, and so are links that lead outside. A failure
 * throws an Error named "FilesError" whose `code` is "refused", "not-found", "exists", "too-large", "not-a-file",
 * "not-a-directory", "not-empty" or "failed", and whose `relativePath` is the path you gave.
 */
export declare class Files {
  private constructor();
  /** Reads a text file (UTF-8); files over the size limit are refused ("too-large"). */
  read(path: string): Promise<string>;
  /** Creates or replaces a text file with `text`; its folder must exist (see `mkdir`). */
  write(path: string, text: string): Promise<void>;
  /** Adds `text` at the end of a file, creating it when missing. */
  append(path: string, text: string): Promise<void>;
  /** Lists a folder ("." or no argument for the working directory); names starting with "." are not listed. */
  list(path?: string): Promise<FolderListing>;
  /** Tells what is at `path`, or null when nothing is there. */
  stat(path: string): Promise<FileInfo | null>;
  /** Creates a folder and any missing folders above it. */
  mkdir(path: string): Promise<void>;
  /** Moves or renames a file or folder; refuses to replace something already at `to` ("exists"). */
  move(from: string, to: string): Promise<void>;
  /**
   * Deletes a file, a link or an empty folder.
   * @approval
   */
  remove(path: string): Promise<void>;
}
