import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import type { MossError } from "../../../engine/errors.ts";
import { FILES_CONTEXT, FilesRig } from "./files-rig.ts";

const DRIVERS = ["in-process", "process"] as const;

describe.each(DRIVERS)("Files from model code (%s sandbox)", (driver) => {
  const rig = new FilesRig(`service-${driver}`);
  beforeAll(
    () => rig.open(driver, { maxReadBytes: 64, maxWriteBytes: 64, maxFileBytes: 100, maxListEntries: 5 }),
    60_000,
  );
  afterAll(() => rig.close());

  test("the prompt shows the Files service and its types, and no host path", async () => {
    const prompt = await rig.runtime.prompter().dumpModulePrompt();
    expect(prompt).toContain("class Files {");
    expect(prompt).toContain("remove(path: string): Promise<void>;");
    expect(prompt).toContain("interface FolderListing");
    expect(prompt).not.toContain(rig.base);
    expect(prompt).not.toContain("realpath");
  });

  test("write, read, append, mkdir, list, stat and move work inside the working directory", async () => {
    const execution = await rig.run(`async function main(moss: Moss) {
  await moss.files.mkdir("notes/2026");
  await moss.files.write("notes/2026/today.md", "one");
  await moss.files.append("notes/2026/today.md", ", two");
  const text = await moss.files.read("notes/2026/today.md");
  await moss.files.move("notes/2026/today.md", "notes/done.md");
  const listing = await moss.files.list("notes");
  const info = await moss.files.stat("notes/done.md");
  return { text, listing, kind: info?.kind, size: info?.sizeBytes, gone: await moss.files.stat("notes/2026/today.md") };
}`);
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({
      text: "one, two",
      listing: {
        entries: [
          { name: "2026", path: "notes/2026", kind: "folder", sizeBytes: 0 },
          { name: "done.md", path: "notes/done.md", kind: "file", sizeBytes: 8 },
        ],
        more: false,
      },
      kind: "file",
      size: 8,
      gone: null,
    });
    expect(readFileSync(path.join(rig.root, "notes", "done.md"), "utf8")).toBe("one, two");
  });

  test("a failure is a FilesError with a code and the relative path, never the host path", async () => {
    const execution = await rig.run(`async function main(moss: Moss) {
  const seen: unknown[] = [];
  for (const attempt of [() => moss.files.read("missing/file.txt"), () => moss.files.move("nowhere.txt", "x.txt")]) {
    try { await attempt(); } catch (error) {
      const e = error as Error & { code?: string; relativePath?: string };
      seen.push([e.name, e.code, e.relativePath, e.message]);
    }
  }
  return seen;
}`);
    expect(execution.returns).toEqual([
      ["FilesError", "not-found", "missing/file.txt", "missing/file.txt: no such file or folder"],
      ["FilesError", "not-found", "nowhere.txt", "nowhere.txt: no such file or folder"],
    ]);
    expect(JSON.stringify(execution.returns)).not.toContain(rig.base);
  });

  test("a refused path is named as the model wrote it, with the reason; a host path it wrote stays hidden", async () => {
    const outsideFile = path.join(rig.outside, "secret.txt");
    const attempts = ["../x", "a/../../x", "./../x", "notes\\x.txt", ".runtime/x", outsideFile];
    const execution = await rig.run(`async function main(moss: Moss) {
  const seen: unknown[] = [];
  for (const attempt of ${JSON.stringify(attempts)}) {
    try { await moss.files.read(attempt); } catch (error) {
      const e = error as Error & { code?: string; relativePath?: string };
      seen.push([e.code, e.relativePath, e.message]);
    }
  }
  try { await moss.files.move("notes.txt", "../moved.txt"); } catch (error) { seen.push((error as Error).message); }
  return seen;
}`);
    expect(execution.error).toBeUndefined();
    const climbs = '".." would lead outside the working directory';
    expect(execution.returns).toEqual([
      ["refused", "../x", `../x: ${climbs}`],
      ["refused", "a/../../x", `a/../../x: ${climbs}`],
      ["refused", "./../x", `./../x: ${climbs}`],
      ["refused", "notes\\x.txt", "notes\\x.txt: use a forward slash between folder names, not a backslash"],
      ["refused", ".runtime/x", '.runtime/x: names starting with "." are reserved (.runtime)'],
      [
        "refused",
        "<host path>/secret.txt",
        "<host path>/secret.txt: absolute paths are not allowed: give a path relative to the working directory",
      ],
      `../moved.txt: ${climbs}`,
    ]);
    expect(JSON.stringify(execution.returns)).not.toContain(rig.base);
  });

  test("move refuses to replace an existing file", async () => {
    writeFileSync(path.join(rig.root, "keep-a.txt"), "a");
    writeFileSync(path.join(rig.root, "keep-b.txt"), "b");
    const execution = await rig.run(`async function main(moss: Moss) {
  try { await moss.files.move("keep-a.txt", "keep-b.txt"); return "moved"; } catch (error) { return (error as { code: string }).code; }
}`);
    expect(execution.returns).toBe("exists");
    expect(readFileSync(path.join(rig.root, "keep-b.txt"), "utf8")).toBe("b");
  });

  test("remove waits for a person's approval, and runs only when approved", async () => {
    writeFileSync(path.join(rig.root, "old.txt"), "old");
    const code = `async function main(moss: Moss) { await moss.files.remove("old.txt"); return "removed"; }`;
    const paused = await rig.run(code);
    expect(paused.pending?.requests).toMatchObject([
      { kind: "approval", member: "remove", args: ["old.txt"] },
    ]);
    expect(existsSync(path.join(rig.root, "old.txt"))).toBe(true);
    const id = paused.pending!.requests[0]!.id;
    const denied = await rig.runtime.resume(paused.pending!.continuation, {
      [id]: { approved: false, reason: "keep it" },
    });
    expect(denied.ok).toBe(false);
    expect(existsSync(path.join(rig.root, "old.txt"))).toBe(true);
    const again = await rig.run(code);
    const approved = await rig.runtime.resume(again.pending!.continuation, {
      [again.pending!.requests[0]!.id]: { approved: true },
    });
    expect(approved.returns).toBe("removed");
    expect(existsSync(path.join(rig.root, "old.txt"))).toBe(false);
  });

  test("size and listing limits hold", async () => {
    writeFileSync(path.join(rig.root, "big.txt"), "x".repeat(65));
    const execution = await rig.run(`async function main(moss: Moss) {
  const codes: string[] = [];
  const attempt = async (run: () => Promise<unknown>) => { try { await run(); codes.push("ok"); } catch (error) { codes.push((error as { code: string }).code); } };
  await attempt(() => moss.files.read("big.txt"));
  await attempt(() => moss.files.write("large.txt", "y".repeat(65)));
  await attempt(() => moss.files.write("grow.txt", "z".repeat(60)));
  await attempt(() => moss.files.append("grow.txt", "z".repeat(60)));
  await moss.files.mkdir("many");
  for (let index = 0; index < 8; index++) await moss.files.write("many/f" + index + ".txt", "");
  const listing = await moss.files.list("many");
  return { codes, count: listing.entries.length, more: listing.more };
}`);
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({
      codes: ["too-large", "too-large", "ok", "too-large"],
      count: 5,
      more: true,
    });
    expect(existsSync(path.join(rig.root, "large.txt"))).toBe(false);
    expect(readFileSync(path.join(rig.root, "grow.txt"), "utf8")).toBe("z".repeat(60));
  });

  test("model code that misuses the service is a type error before it runs", async () => {
    const execution = await rig.run(`async function main(moss: Moss) { return moss.files.read(42); }`);
    expect(execution.error?.kind).toBe("type");
  });
});

test("a module declaring Files with nothing bound says which host setup binds it", async () => {
  const base = new FilesRig("unbound").base;
  mkdirSync(base, { recursive: true });
  try {
    const contextFile = path.join(base, "context.ts");
    writeFileSync(contextFile, FILES_CONTEXT);
    const failure = await new MossCompiler({ sandbox: "in-process" }).compile(contextFile).then(
      () => undefined,
      (error: MossError) => error,
    );
    expect(failure?.code).toBe("binding-missing");
    expect(failure?.message).toContain("Moss.files needs a service for token Files");
    expect(failure?.message).toContain('bindFiles(compiler, "./work") from "moss-ts/files"');
    expect(failure?.message).toContain("--working-directory <dir>");
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
