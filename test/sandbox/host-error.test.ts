import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, test } from "vitest";
import {
  addHostRoot,
  hostErrorFields,
  redactHostPaths,
  writtenStrings,
} from "../../engine/membrane/host/host-error.ts";

describe("redactHostPaths: no host path survives, whatever the folder names", () => {
  test.each([
    [
      "ENOENT: no such file or directory, open '/srv/données privées/missing.txt'",
      "ENOENT: no such file or directory, open '<host path>/missing.txt'",
    ],
    ["cannot open /srv/données privées/missing.txt: denied", "cannot open <host path>/missing.txt: denied"],
    ['open "/home/ana/日本語 フォルダ/a.json" failed', 'open "<host path>/a.json" failed'],
    ["see file:///srv/x%20y/z%C3%A9.txt now", "see <host path>/zé.txt now"],
    [
      "cannot open C:\\Users\\Zoë Müller\\Documents\\secret.txt now",
      "cannot open <host path>/secret.txt now",
    ],
    ["share \\\\server\\share\\dir\\f.txt", "share <host path>/f.txt"],
    ["climb ../../etc/passwd", "climb <host path>/passwd"],
    ["key at ~/keys/id.pem", "key at <host path>/id.pem"],
    ["module node_modules/pkg/lib/index.js failed", "module <host path>/index.js failed"],
    ["boom\n    at Object.<anonymous> (/srv/app/x.js:10:5)\n    at run (node:internal/x:1:1)", "boom"],
  ])("%j", (input, expected) => {
    expect(redactHostPaths(input)).toBe(expected);
  });

  test("prose, ratios and URLs with a host name are kept", () => {
    const text = "ratio 1/2 and/or https://api.example.com/v1/items failed with 404";
    expect(redactHostPaths(text)).toBe(text);
  });

  test("every known host root is removed wherever it appears, even unquoted with spaces", () => {
    const folder = path.join(tmpdir(), "un dossier très privé");
    addHostRoot(folder);
    const message = `cannot write ${folder}/deep dir/out.txt because ${homedir()} is full; cwd ${process.cwd()}`;
    const redacted = redactHostPaths(message);
    for (const fragment of ["très", "privé", "deep dir", tmpdir(), homedir(), process.cwd()]) {
      expect(redacted).not.toContain(fragment);
    }
    expect(redacted).toContain("<host path>/out.txt");
  });
});

describe("what the model wrote itself is echoed as it wrote it; host paths still are not", () => {
  test("a refused relative path the call was given stays as written, with the reason", () => {
    for (const written of ["../x", "a/../../x", "../../etc/passwd", "..\\x", "node_modules/pkg/x.js"]) {
      const message = `${written}: refused by the rule`;
      expect(redactHostPaths(message)).not.toBe(message);
      expect(redactHostPaths(message, [], [written])).toBe(message);
      expect(redactHostPaths(`cannot use "${written}".`, [], [written])).toBe(`cannot use "${written}".`);
    }
  });

  test("an absolute path, or one holding a host folder, stays hidden even from the model that wrote it", () => {
    const inside = path.join(process.cwd(), "secret.txt");
    const relativeInside = `x/${process.cwd().slice(1)}/secret.txt`;
    for (const written of [
      "/etc/passwd",
      "~/keys/id.pem",
      "C:\\Users\\x.txt",
      "file:///etc/x",
      inside,
      relativeInside,
    ]) {
      const message = `${written}: refused by the rule`;
      expect(redactHostPaths(message, [], [written])).toBe(redactHostPaths(message));
      expect(redactHostPaths(message, [], [written])).not.toContain(process.cwd());
    }
  });

  test("a written string inside a longer path, or a host path beside it, is still removed", () => {
    const cwd = process.cwd();
    // The model guessed a host folder: the path that continues it stays hidden.
    expect(redactHostPaths(`open '${cwd}/secret/key.pem' failed`, [], [cwd])).toBe(
      "open '<host path>/key.pem' failed",
    );
    expect(redactHostPaths("open /srv/app/../x failed", [], ["../x"])).toBe("open <host path>/x failed");
    expect(redactHostPaths("../x: refused; tried /srv/data/../x", [], ["../x"])).toBe(
      "../x: refused; tried <host path>/x",
    );
    // The markers a kept string travels under cannot be forged by the text itself.
    const forged = "\uE0000\uE001 /srv/app/x.txt";
    expect(redactHostPaths(forged, [], ["../x"])).toBe("\uE0000\uE001 <host path>/x.txt");
  });

  test("hostErrorFields keeps written strings in the message and opted-in fields, not in name or code", () => {
    class RefusedError extends Error {
      static readonly mossErrorFields = ["relativePath"];
      override name = "RefusedError";
      readonly code = "../x";
      readonly relativePath = "../x";
    }
    const fields = hostErrorFields(new RefusedError('../x: ".." leads outside'), ["../x"]);
    expect(fields).toEqual({
      name: "RefusedError",
      message: '../x: ".." leads outside',
      code: "<host path>/x",
      fields: { relativePath: "../x" },
    });
  });

  test("writtenStrings: the strings of plain arguments, bounded", () => {
    expect(writtenStrings(["../x", 1, { to: "/etc/y", nested: [["deep"]] }, new Date(0), "x"])).toEqual([
      "../x",
      "/etc/y",
      "deep",
    ]);
    expect(writtenStrings([Array.from({ length: 100 }, (_, index) => `p${index}`)])).toHaveLength(32);
    expect(writtenStrings(["y".repeat(2000)])).toEqual([]);
  });
});

describe("hostErrorFields: what model code may see of a host failure", () => {
  test("a Node system error: its exact path and dest are removed from the message, whatever they contain", () => {
    const error = Object.assign(
      new Error("ENOENT: no such file or directory, rename '/a b/c, d.txt' -> '/e:f/g.txt'"),
      { code: "ENOENT", path: "/a b/c, d.txt", dest: "/e:f/g.txt" },
    );
    expect(hostErrorFields(error)).toEqual({
      name: "Error",
      message: "ENOENT: no such file or directory, rename '<host path>/c, d.txt' -> '<host path>/g.txt'",
      code: "ENOENT",
    });
  });

  test("thrown strings, error-likes, hostile getters and paths in the name", () => {
    expect(hostErrorFields("failed at /srv/x y/z.txt").message).toBe("failed at <host path>/z.txt");
    expect(hostErrorFields({ message: "at /srv/q.txt" }).message).toBe("at <host path>/q.txt");
    const hostile = {
      get message(): string {
        throw new Error("/srv/secret/getter.txt");
      },
    };
    expect(JSON.stringify(hostErrorFields(hostile))).not.toContain("/srv");
    const named = new Error("x");
    named.name = "Error in /srv/private/name.ts";
    expect(hostErrorFields(named).name).toBe("Error in <host path>/name.ts");
  });

  test("only name, message and code cross: never the stack, cause or errors list", () => {
    const error = new AggregateError([new Error("/srv/one.txt")], "several", {
      cause: new Error("/srv/c.txt"),
    });
    expect(Object.keys(hostErrorFields(error)).sort()).toEqual(["message", "name"]);
  });
});
