import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import {
  decodeProperties,
  FileContextStore,
  isWireDocument,
  readContextFile,
} from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossContext } from "../../engine/types.ts";
import { rejection } from "../helpers/rejection.ts";

// Issue 17: a data field is persisted as the membrane's wire text (context version 2); files written before
// (version 1, superjson documents) still load. persisted-v1.json was written by the engine before the change.
const FIXTURES = fileURLToPath(new URL("../fixtures/context/", import.meta.url));
const MODULE = path.join(FIXTURES, "persisted-values.ts");
const V1_FILE = path.join(FIXTURES, "persisted-v1.json");
const FIELDS = ["when", "table", "tags", "big", "odd", "pattern", "bytes", "shared", "cycle", "plain"];

/** The code that gave the fixture its values (the same values, set inside the sandbox). */
const SET_VALUES = `function main(moss: any) {
  moss.when = new Date(Date.UTC(2026, 10, 26, 8, 30, 0, 123));
  moss.table = new Map<unknown, unknown>([["a", 1], [2, new Date(5)], [NaN, "nan key"], [-0, "zero"]]);
  moss.tags = new Set<unknown>(["x", 3, 10n, undefined]);
  moss.big = -123456789012345678901234567890n;
  moss.odd = { missing: undefined, negativeZero: -0, nan: NaN, infinite: Infinity, negative: -Infinity, list: [undefined, NaN, -0, 1] };
  moss.pattern = /a+b?/giu;
  moss.bytes = new Uint8Array([0, 1, 2, 254, 255]);
  const part = { n: 1, label: "shared" };
  moss.shared = { left: part, right: part, list: [part, part] };
  const loop: any = { name: "loop" };
  loop.self = loop;
  loop.children = [loop, { parent: loop }];
  moss.cycle = loop;
  moss.plain = { text: "héllo \\"quoted\\"\\n", numbers: [1, 2.5, -3], nested: { deep: [true, false, null] } };
}`;

/** Checks every value the fixture holds, as the model code sees it (or as the host decodes it). */
function expectFixtureValues(values: Record<string, any>): void {
  expect(values.when).toEqual(new Date(Date.UTC(2026, 10, 26, 8, 30, 0, 123)));
  const table = values.table as Map<unknown, unknown>;
  expect(table).toBeInstanceOf(Map);
  expect(table.get("a")).toBe(1);
  expect(table.get(2)).toEqual(new Date(5));
  expect(table.get(NaN)).toBe("nan key");
  expect(table.get(0)).toBe("zero");
  expect([...values.tags]).toEqual(["x", 3, 10n, undefined]);
  expect(values.big).toBe(-123456789012345678901234567890n);
  const odd = values.odd;
  expect(Object.hasOwn(odd, "missing") && odd.missing === undefined).toBe(true);
  expect(Object.is(odd.negativeZero, -0)).toBe(true);
  expect(odd.nan).toBeNaN();
  expect([odd.infinite, odd.negative]).toEqual([Infinity, -Infinity]);
  expect(odd.list[0]).toBeUndefined();
  expect(odd.list[1]).toBeNaN();
  expect(Object.is(odd.list[2], -0)).toBe(true);
  expect(values.pattern).toEqual(/a+b?/giu);
  expect(values.bytes).toEqual(new Uint8Array([0, 1, 2, 254, 255]));
  const shared = values.shared;
  expect(shared.left).toEqual({ n: 1, label: "shared" });
  expect(shared.left).toBe(shared.right);
  expect(shared.list[0]).toBe(shared.left);
  expect(shared.list[1]).toBe(shared.left);
  const loop = values.cycle;
  expect(loop.name).toBe("loop");
  expect(loop.self).toBe(loop);
  expect(loop.children[0]).toBe(loop);
  expect(loop.children[1].parent).toBe(loop);
  expect(values.plain).toEqual({
    text: 'héllo "quoted"\n',
    numbers: [1, 2.5, -3],
    nested: { deep: [true, false, null] },
  });
}

/** What `main` returns to read every field (as one object, so shared references inside each field are kept). */
const READ_VALUES = `function main(moss: any) { return { ${FIELDS.map((field) => `${field}: moss.${field}`).join(", ")} }; }`;

const open: MossRuntime[] = [];
let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-persisted-format-"));
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

async function compile(
  sandbox: "in-process" | "process",
  context?: MossContext,
  source?: string,
): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox, typeCheck: "off" });
  if (context !== undefined) compiler.joinContext(context, source === undefined ? {} : { source });
  const runtime = await compiler.compile(MODULE);
  open.push(runtime);
  return runtime;
}

async function execute(runtime: MossRuntime, code: string) {
  const execution = await runtime.execute({ code });
  expect(execution.error).toBeUndefined();
  expect(execution.warnings).toEqual([]);
  return execution;
}

/** The version-1 fixture, for the module as this test names it. */
async function fixture(): Promise<MossContext> {
  const context = (await readContextFile(V1_FILE))!;
  return { ...context, module: MODULE };
}

test("the fixture is a version 1 file of superjson documents (written before wire documents existed)", async () => {
  const context = await fixture();
  expect(context.version).toBe(1);
  expect(Object.keys(context.properties).sort()).toEqual([...FIELDS].sort());
  for (const field of FIELDS) expect(context.properties[field]).toHaveProperty("json");
  expectFixtureValues(decodeProperties(context.properties));
});

describe.each(["in-process", "process"] as const)("%s driver", (sandbox) => {
  test("a version 1 file loads with every value, and is saved as version 2 after the next change", async () => {
    const store = new FileContextStore(directory);
    await store.save("old", await fixture());
    const runtime = await compile(sandbox, (await store.load("old"))!, "old.json");
    expectFixtureValues((await execute(runtime, READ_VALUES)).returns as Record<string, unknown>);

    const changed = await execute(runtime, "function main(moss: any) { moss.plain.numbers.push(4); }");
    expect(changed.context.version).toBe(2);
    for (const field of FIELDS) expect(isWireDocument(changed.context.properties[field])).toBe(true);
    await store.save("old", changed.context);
    const text = await readFile(path.join(directory, "old.json"), "utf8");
    expect(JSON.parse(text).version).toBe(2);

    const reloaded = await compile(sandbox, (await store.load("old"))!, "old.json");
    const values = (await execute(reloaded, READ_VALUES)).returns as Record<string, any>;
    expect(values.plain.numbers).toEqual([1, 2.5, -3, 4]);
    values.plain.numbers.pop();
    expectFixtureValues(values);
    await store.close();
  });

  test("version 2 round trip: values set inside the sandbox are stored as wire text and load again", async () => {
    const runtime = await compile(sandbox);
    const execution = await execute(runtime, SET_VALUES);
    const context = execution.context;
    expect(context.version).toBe(2);
    for (const field of FIELDS) {
      // Each document is the wire text of the one-field record { [field]: value }.
      const document = context.properties[field] as { wire: string };
      expect(isWireDocument(document)).toBe(true);
      expect(JSON.parse(document.wire)[0]).toEqual(["O", field, 1]);
    }
    expectFixtureValues(decodeProperties(context.properties));

    const store = new FileContextStore(directory);
    await store.save("new", context);
    const loaded = (await store.load("new"))!;
    expect(loaded.properties).toEqual(context.properties);
    const resumed = await compile(sandbox, loaded, "new.json");
    expectFixtureValues((await execute(resumed, READ_VALUES)).returns as Record<string, unknown>);
    // A field left unchanged keeps exactly the text it was stored as.
    const next = await execute(resumed, "function main(moss: any) { moss.big += 1n; }");
    expect(next.context.properties.plain).toEqual(context.properties.plain);
    expect(next.context.properties.big).toEqual({
      wire: '[["O","big",1],["B","-123456789012345678901234567889"]]',
    });
    expect(decodeProperties(next.context.properties).big).toBe(-123456789012345678901234567889n);
    await store.close();
  });
});

describe("a corrupt version 2 file is a located error and nothing is lost", () => {
  async function writeV2(name: string, properties: Record<string, unknown>): Promise<string> {
    const file = path.join(directory, `${name}.json`);
    const context = { version: 2, module: MODULE, properties, executed: false };
    await writeFile(file, `${JSON.stringify(context, null, 2)}\n`);
    return file;
  }

  test("a wire document whose wire is not a string is a corrupt file naming the property", async () => {
    const file = await writeV2("shape", { plain: { wire: 5 } });
    const error = await rejection(new FileContextStore(directory).load("shape"));
    expect(error.code).toBe("context-corrupt");
    expect(error.message).toBe(
      `${file} - corrupt MossContext file: properties["plain"] has a wire that is not a string`,
    );
  });

  test.each([
    ["malformed JSON in the wire text", '[["O","a"', "cannot be decoded: invalid wire text"],
    [
      "a node index out of range",
      '[["O","plain",7]]',
      "cannot be decoded: invalid wire text: bad node index 7",
    ],
    [
      "a host handle",
      '[["O","plain",1],["H",{"id":1,"kind":"object","methods":[],"properties":[]}]]',
      "cannot be decoded: invalid wire text: a handle where none is accepted",
    ],
    ["an unknown tag", '[["O","plain",1],["Z"]]', "cannot be decoded: invalid wire text: bad node 1"],
    // A Date node holds the time the encoder wrote or null: anything else would load as an invalid Date and be saved.
    [
      "a Date whose time is text",
      '[["O","plain",1],["D","x"]]',
      "cannot be decoded: invalid wire text: bad node 1",
    ],
    [
      "a Date without its time",
      '[["O","plain",1],["D"]]',
      "cannot be decoded: invalid wire text: bad node 1",
    ],
    [
      "a Date out of range",
      '[["O","plain",1],["D",1e20]]',
      "cannot be decoded: invalid wire text: bad node 1",
    ],
    [
      "a Date of a fractional time",
      '[["O","plain",1],["D",1.5]]',
      "cannot be decoded: invalid wire text: bad node 1",
    ],
    [
      "a value that is not a record",
      '["text"]',
      "cannot be decoded: its wire text is not a record of one field",
    ],
    [
      "a record of two fields",
      '[["O","plain",1,"other",1],2]',
      "cannot be decoded: its wire text is not a record of one field",
    ],
  ])(
    "%s: compiling with it fails naming the file and the field, and loads nothing",
    async (_, wire, reason) => {
      const file = await writeV2("bad", { plain: { wire }, when: { wire: '[["O","when",1],["D",0]]' } });
      const context = (await new FileContextStore(directory).load("bad"))!;
      const error = await rejection(compile("in-process", context, file));
      expect(error.code).toBe("context-invalid");
      expect(error.message).toContain(`${file}: properties.plain `);
      expect(error.message).toContain(reason);
      // The file is left as it was: the last good state is not overwritten by a failed load.
      expect(JSON.parse(await readFile(file, "utf8")).properties.plain).toEqual({ wire });
    },
  );

  test("a wire text over the expanded-size bound is refused on load, naming the property", async () => {
    await writeV2("large", { plain: { wire: JSON.stringify([["O", "plain", 1], "x".repeat(2_000)]) } });
    const context = (await new FileContextStore(directory).load("large"))!;
    const error = await rejection((async () => decodeProperties(context.properties, { maxBytes: 1_000 }))());
    expect(error.code).toBe("context-invalid");
    expect(error.message).toBe("properties.plain is larger than the limit of 1000 bytes once expanded");
  });
});
