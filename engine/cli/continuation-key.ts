import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { MossError } from "../errors.ts";

/** The file in the sessions folder that keeps the key continuations of its sessions are signed with. */
export const CONTINUATION_KEY_FILE = "continuation.key";

/**
 * The key a session's paused runs are signed with, the same in every process: `$MOSS_CONTINUATION_KEY` when set,
 * else the sessions folder's `continuation.key` (made on first use, readable by its owner only). Without a key
 * shared across processes, a run paused by one `moss agent` could not be resumed by the next.
 */
export async function sessionContinuationKey(directory: string, env: NodeJS.ProcessEnv): Promise<string> {
  const fromEnv = env.MOSS_CONTINUATION_KEY;
  if (fromEnv !== undefined && fromEnv.trim() !== "") return fromEnv;
  const path = join(directory, CONTINUATION_KEY_FILE);
  try {
    await mkdir(directory, { recursive: true });
    try {
      await writeFile(path, `${randomBytes(32).toString("base64url")}\n`, { flag: "wx", mode: 0o600 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const key = (await readFile(path, "utf8")).trim();
    if (key === "") throw new Error("the file is empty");
    return key;
  } catch (error) {
    throw new MossError(
      "context-read",
      `${path}: cannot read or create the key that signs paused runs (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); set MOSS_CONTINUATION_KEY instead.`,
      { path },
    );
  }
}
