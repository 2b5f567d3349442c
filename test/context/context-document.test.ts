import { describe, expect, it } from "vitest";
import {
  createContext,
  decodeProperties,
  encodeProperties,
  joinContexts,
  validateContext,
} from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossContext } from "../../engine/types.ts";

function invalid(json: unknown, source?: string): MossError {
  try {
    validateContext(json, source);
  } catch (error) {
    if (MossError.is(error)) return error;
    throw error;
  }
  throw new Error("expected validateContext to throw");
}

describe("createContext", () => {
  it("creates a version 1 context for a module, not executed", () => {
    expect(createContext("examples/sphero/context.ts")).toEqual({
      version: 1,
      module: "examples/sphero/context.ts",
      properties: {},
      executed: false,
    });
  });

  it("copies the given encoded properties", () => {
    const { properties } = encodeProperties({ count: 3 });
    const context = createContext("m.ts", properties);
    expect(decodeProperties(context.properties)).toEqual({ count: 3 });
    expect(context.properties).not.toBe(properties);
  });
});

describe("joinContexts", () => {
  const left: MossContext = {
    version: 1,
    module: "left.ts",
    code: "left code",
    properties: encodeProperties({ a: 1, b: new Date(0) }).properties,
    executeCode: "left exec",
    executed: true,
  };

  it("lets the right side win per property and keeps the left's other properties", () => {
    const right = createContext("right.ts", encodeProperties({ b: new Date(5), c: new Set([1]) }).properties);
    const joined = joinContexts(left, right);
    const values = decodeProperties(joined.properties);
    expect(values.a).toBe(1);
    expect((values.b as Date).getTime()).toBe(5);
    expect(values.c).toEqual(new Set([1]));
    expect(joined.module).toBe("right.ts");
    expect(joined.version).toBe(1);
  });

  it("keeps the left's scalars when the right does not set them, takes the right's when it does", () => {
    const unset = joinContexts(left, createContext("right.ts"));
    expect(unset.code).toBe("left code");
    expect(unset.executeCode).toBe("left exec");
    expect(unset.executed).toBe(false);
    const set = joinContexts(left, {
      ...createContext("right.ts"),
      code: "new code",
      executeCode: "new exec",
      executed: true,
    });
    expect(set).toMatchObject({ code: "new code", executeCode: "new exec", executed: true });
  });

  it("does not mutate its inputs and omits scalars neither side sets", () => {
    const before = structuredClone(left);
    const right = createContext("r.ts", encodeProperties({ a: 2 }).properties);
    const joined = joinContexts(createContext("l.ts"), right);
    expect("code" in joined).toBe(false);
    expect("executeCode" in joined).toBe(false);
    joinContexts(left, right);
    expect(left).toEqual(before);
  });

  it("keeps fields outside the protocol, the right winning", () => {
    const joined = joinContexts(
      { ...createContext("l.ts"), extra: "left", other: 1 } as MossContext,
      { ...createContext("r.ts"), extra: "right" } as MossContext,
    );
    expect(joined).toMatchObject({ extra: "right", other: 1 });
  });
});

describe("validateContext", () => {
  it("accepts a valid context and returns a copy", () => {
    const context = { ...createContext("m.ts", encodeProperties({ x: 1n }).properties), code: "c" };
    const valid = validateContext(JSON.parse(JSON.stringify(context)));
    expect(valid).toEqual(context);
    expect(decodeProperties(valid.properties)).toEqual({ x: 1n });
  });

  it("rejects non-objects", () => {
    expect(invalid(null).message).toBe("Invalid MossContext: expected a JSON object, found null");
    expect(invalid([1], "s.json").message).toBe(
      "Invalid MossContext in s.json: expected a JSON object, found an array",
    );
    expect(invalid("text").code).toBe("context-invalid");
  });

  it("names every problem and the file", () => {
    const error = invalid(
      { version: 3, module: "", properties: [], executed: "no", code: 5 },
      "sessions/a.json",
    );
    expect(error.code).toBe("context-invalid");
    expect(error.message).toBe(
      "Invalid MossContext in sessions/a.json: unknown version 3 (expected 1 or 2; a newer moss-ts may have written it); module must be a non-empty string; " +
        "code must be a string when present; executed must be a boolean; properties must be an object",
    );
    expect(error.details.source).toBe("sessions/a.json");
  });

  it("reports a missing version and malformed property entries", () => {
    const error = invalid({
      module: "m.ts",
      properties: { ok: { json: 1 }, bad: 3, meta: { json: 1, meta: 2 } },
      executed: false,
    });
    expect(error.message).toBe(
      "Invalid MossContext: version is missing (expected 1 or 2); " +
        'properties["bad"] must be an encoded value { wire } or { json, meta? }; properties["meta"] has a meta that is not an object',
    );
  });

  it("loads a document written before executeCode/executed existed, as not executed", () => {
    const old = validateContext({ version: 1, module: "m.ts", properties: {} });
    expect(old.executed).toBe(false);
    expect("executeCode" in old).toBe(false);
    const recorded = validateContext({ ...createContext("m.ts"), executeCode: "x", executed: true });
    expect(recorded).toMatchObject({ executeCode: "x", executed: true });
  });

  it("rejects a non-string executeCode", () => {
    expect(invalid({ ...createContext("m.ts"), executeCode: 1 }).message).toContain(
      "executeCode must be a string",
    );
  });
});
