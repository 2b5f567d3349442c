import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { checkCacheKey, readCachedCheck, writeCachedCheck } from "../../engine/cli/check-result-cache.ts";
import { MOSS_DIAGNOSTIC_CODES } from "../../engine/diagnostic-codes.ts";
import type { Diagnostic } from "../../engine/types.ts";

let temp: string;
const savedTemp = process.env.TMPDIR;
const finding = (code: number): Diagnostic => ({ code, message: "m", line: 1, column: 1, severity: "error" });

beforeAll(async () => {
  temp = await mkdtemp(path.join(tmpdir(), "moss-check-result-cache-"));
  process.env.TMPDIR = temp;
});
afterAll(async () => {
  if (savedTemp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTemp;
  await rm(temp, { recursive: true, force: true });
});

test("a kept result holds while every file it read is unchanged: an edit, a removal or a new file where there was none is a miss", async () => {
  const imported = path.join(temp, "imported.ts");
  const absent = path.join(temp, "context.host.ts");
  await writeFile(imported, "export const a = 1;\n");
  const key = checkCacheKey(path.join(temp, "context.ts"), "code", temp, { A: "1" });
  await writeCachedCheck(key, [imported, absent], Date.now() + 1000, [finding(2339)]);
  expect(await readCachedCheck(key)).toEqual([finding(2339)]);

  await writeFile(imported, "export const a = 2;\n");
  expect(await readCachedCheck(key)).toBeUndefined();
  await writeFile(imported, "export const a = 1;\n");
  expect(await readCachedCheck(key)).toEqual([finding(2339)]);
  await writeFile(absent, "export function setup() {}\n");
  expect(await readCachedCheck(key)).toBeUndefined();
  await rm(absent);
  await rm(imported);
  expect(await readCachedCheck(key)).toBeUndefined();
});

test("the key is the code, the module, the working directory and the environment", () => {
  const module = path.join(temp, "context.ts");
  const key = checkCacheKey(module, "code", temp, { A: "1" }).file;
  expect(checkCacheKey(module, "code", temp, { A: "1" }).file).toBe(key);
  expect(checkCacheKey(module, "code ", temp, { A: "1" }).file).not.toBe(key);
  expect(checkCacheKey(path.join(temp, "other.ts"), "code", temp, { A: "1" }).file).not.toBe(key);
  expect(checkCacheKey(module, "code", path.join(temp, "x"), { A: "1" }).file).not.toBe(key);
  expect(checkCacheKey(module, "code", temp, { A: "2" }).file).not.toBe(key);
});

test("nothing is kept when the code was not checked (a limit, a checker failure) or a file changed during the check", async () => {
  const imported = path.join(temp, "during.ts");
  await writeFile(imported, "export const b = 1;\n");
  for (const code of [MOSS_DIAGNOSTIC_CODES.checkLimit, MOSS_DIAGNOSTIC_CODES.checkerFailed]) {
    const key = checkCacheKey(path.join(temp, "context.ts"), `limit ${code}`, temp, {});
    await writeCachedCheck(key, [imported], Date.now() + 1000, [finding(code)]);
    expect(await readCachedCheck(key)).toBeUndefined();
  }
  const key = checkCacheKey(path.join(temp, "context.ts"), "edited during the check", temp, {});
  await writeCachedCheck(key, [imported], Date.now() - 60_000, []);
  expect(await readCachedCheck(key)).toBeUndefined();
  const entries = await readdir(path.dirname(key.file)).catch(() => []);
  expect(entries.filter((name) => !name.endsWith(".json"))).toEqual([]);
});
