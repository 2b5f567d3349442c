// The data fields as a `session` event shows them (issue 26): each decoded by the context's typed encoding, written
// as readable JSON, redacted by the server's one redactor, then cut; what changed is named against the fields before.
import { describe, expect, it } from "vitest";
import { encodeProperties, encodeWireProperties } from "../../engine/context/index.ts";
import { TenantView } from "../../engine/server/tenant-view.ts";
import { RunSession, sessionFields } from "../../engine/server/worker/session-fields.ts";

const SECRET = "sk-session-secret-0123456789";

describe("sessionFields", () => {
  const view = new TenantView([SECRET]);

  it("writes each field as indented JSON, with Date, Map, Set and bigint readable, from either encoding", () => {
    const values = {
      when: new Date("2026-01-02T03:04:05.000Z"),
      byName: new Map([["milk", 2]]),
      byNumber: new Map([[1, "one"]]),
      tags: new Set(["a", "b"]),
      big: 12n,
      nothing: undefined,
      plain: { list: [1, 2] },
    };
    const expected = {
      when: '"2026-01-02T03:04:05.000Z"',
      byName: '{\n  "milk": 2\n}',
      byNumber: '[\n  [\n    1,\n    "one"\n  ]\n]',
      tags: '[\n  "a",\n  "b"\n]',
      big: '"12n"',
      nothing: "undefined",
      plain: '{\n  "list": [\n    1,\n    2\n  ]\n}',
    };
    expect(sessionFields(encodeProperties(values).properties, undefined, view)).toEqual(expected);
    expect(sessionFields(encodeWireProperties(values).properties, undefined, view)).toEqual(expected);
  });

  it("shows only the declared data fields when the module's are known", () => {
    const { properties } = encodeProperties({ notes: ["x"], removedLongAgo: 1 });
    expect(sessionFields(properties, ["notes"], view)).toEqual({ notes: '[\n  "x"\n]' });
  });

  it("redacts a secret of the server, then cuts a long field to the bound with a marker", () => {
    const { properties } = encodeProperties({ note: `key ${SECRET}`, long: "x".repeat(10_000) });
    const fields = sessionFields(properties, undefined, view, 200);
    expect(fields.note).toBe('"key [redacted]"');
    expect(fields.long!.length).toBeLessThanOrEqual(200);
    expect(fields.long).toMatch(/… \[truncated \d+ characters\] …/);
  });

  it("a field that cannot be decoded says so instead of failing the others", () => {
    const { properties } = encodeProperties({ good: 1 });
    const fields = sessionFields(
      { ...properties, bad: { json: 1, meta: { values: ["no-such-type"] } } },
      undefined,
      view,
    );
    expect(fields.good).toBe("1");
    expect(fields.bad).toMatch(/^\[cannot be shown: /);
  });
});

describe("RunSession", () => {
  const view = new TenantView();
  const execution = (step: number, values: Record<string, unknown>) =>
    ({
      type: "execution",
      step,
      observation: "",
      execution: { context: { properties: encodeProperties(values).properties } },
    }) as never;

  it("names what changed since the thread's last session event, then since the run's previous execution", () => {
    const session = new RunSession(view, { notes: "[]", count: "1" });
    session.dataFields = ["notes", "count"];
    expect(session.after(execution(1, { notes: [], count: 2 }))).toEqual({
      type: "session",
      step: 1,
      fields: { notes: "[]", count: "2" },
      changed: ["count"],
    });
    expect(session.after(execution(2, { notes: [], count: 2 }))!.changed).toEqual([]);
  });

  it("on a thread's first run compares with the data as the task found them; without them every field is new", () => {
    const first = new RunSession(view, undefined);
    first.dataFields = ["notes", "count"];
    const task = {
      type: "message",
      message: {
        role: "user",
        content: "Go.",
        metadata: {
          kind: "task",
          context: { properties: encodeProperties({ notes: [], count: 0 }).properties },
        },
      },
    } as never;
    expect(first.after(task)).toBeUndefined();
    expect(first.after(execution(1, { notes: ["x"], count: 0 }))!.changed).toEqual(["notes"]);

    const resumed = new RunSession(view, undefined);
    expect(resumed.after(execution(1, { notes: [] }))!.changed).toEqual(["notes"]);
  });
});
