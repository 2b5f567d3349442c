// `moss check`'s results kept between runs (a result-cache.ts entry of the command "check"): a repeated check of
// unchanged inputs answers without loading TypeScript or the module.
import { MOSS_DIAGNOSTIC_CODES } from "../diagnostic-codes.ts";
import type { Diagnostic } from "../types.ts";
import type { KeptWarning, ReadKind } from "./read-tracker.ts";
import {
  type KeptResult,
  type ResultCacheKey,
  readCachedResult,
  resultCacheKey,
  writeCachedResult,
} from "./result-cache.ts";

/** Findings that say the code was not checked (a limit under this machine's load, a checker failure): never kept. */
const UNCHECKED_CODES = new Set<number>([
  MOSS_DIAGNOSTIC_CODES.checkLimit,
  MOSS_DIAGNOSTIC_CODES.checkerFailed,
]);

/** What one `moss check` was given: the key of its kept result. */
export type CheckCacheKey = ResultCacheKey;

/** The key of a check of `code` against the module at `modulePath` (see `resultCacheKey` for the rest of it). */
export function checkCacheKey(
  modulePath: string,
  code: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
): CheckCacheKey {
  return resultCacheKey("check", modulePath, code, cwd, env);
}

/** The kept diagnostics of this check (and the warnings its run printed), if every input is as it was then. */
export async function readCachedCheckResult(
  key: CheckCacheKey,
): Promise<KeptResult<Diagnostic[]> | undefined> {
  const kept = await readCachedResult<Diagnostic[]>(key);
  return kept !== undefined && Array.isArray(kept.result) ? kept : undefined;
}

/** The kept diagnostics of this check, if every input is as it was then. */
export async function readCachedCheck(key: CheckCacheKey): Promise<Diagnostic[] | undefined> {
  return (await readCachedCheckResult(key))?.result;
}

/**
 * Keeps the diagnostics of a check that read `files` (paths, read for their content) or `reads` (as tracked), unless
 * the code was not checked (a limit or a checker failure) or an input changed after `startedAtMs`.
 */
export async function writeCachedCheck(
  key: CheckCacheKey,
  files: Iterable<string> | ReadonlyMap<string, ReadKind>,
  startedAtMs: number,
  diagnostics: Diagnostic[],
  warnings: readonly KeptWarning[] = [],
): Promise<void> {
  if (diagnostics.some((diagnostic) => UNCHECKED_CODES.has(diagnostic.code))) return;
  const reads =
    files instanceof Map
      ? (files as ReadonlyMap<string, ReadKind>)
      : new Map([...(files as Iterable<string>)].map((file) => [file, "content" as const]));
  await writeCachedResult(key, reads, startedAtMs, diagnostics, warnings);
}
