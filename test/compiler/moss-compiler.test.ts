import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { Container } from "../../container/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { Ball, type LedMatrix } from "../../examples/sphero/bolt.ts";
import { SimulatedBall, SimulatedLedMatrix } from "../../examples/sphero/simulated-bolt.ts";
import { compileFromText, FIXTURES, writeModule } from "../helpers/compile-from-text.ts";
import { rejection } from "../helpers/rejection.ts";

const SPHERO = path.resolve("examples/sphero/context.ts");
const open: MossRuntime[] = [];
const track = (runtime: MossRuntime) => {
  open.push(runtime);
  return runtime;
};
const written: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await Promise.all(written.splice(0).map((file) => rm(file, { force: true })));
});

/** Writes `source` as one module file and returns a function compiling that file (configured by `configure`). */
async function moduleCompiler(source: string) {
  const file = await writeModule(source);
  written.push(file);
  return async (configure: (compiler: MossCompiler) => void = () => {}) => {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    configure(compiler);
    return track(await compiler.compile(file));
  };
}

describe("MossCompiler: services and data", () => {
  test("resolves class-token and interface-name services from the container it is given", async () => {
    const ball = new SimulatedBall();
    const face = new SimulatedLedMatrix();
    const container = new Container().bind(Ball, ball).bind<LedMatrix>("LedMatrix", face);
    const runtime = track(await new MossCompiler({ container, sandbox: "in-process" }).compile(SPHERO));
    expect(runtime.mossInjections()).toEqual({ body: ball, face });
  });

  test("the compiler works in a child container: its bindings do not leak into the parent", async () => {
    const container = new Container();
    const compiler = new MossCompiler({ container, sandbox: "in-process" });
    track(await compiler.compile(SPHERO));
    expect(compiler.container().bound(Ball)).toBe(true);
    expect(container.bound(Ball)).toBe(false);
  });

  test("data precedence: initializer < joined context < injects()", async () => {
    // One module file: a context is joined into a compile of the module it was written for.
    const compileSource = await moduleCompiler(`import { Moss as Parent } from "moss-ts";
export class Moss extends Parent { a = 1; b = "init"; c = [1]; when = new Date(0); }`);
    const first = await compileSource();
    expect(first.dumpContext().properties).toBeDefined();
    const fromInitializer = await compileSource();
    const base = fromInitializer.dumpContext();
    const saved = { ...base, properties: { ...base.properties } };
    const restored = await compileSource((compiler) => {
      compiler.joinContext(saved);
    });
    expect(restored.hostMoss()).toMatchObject({ a: 1, b: "init", c: [1] });

    const joined = await compileSource((compiler) => {
      const context = fromInitializer.dumpContext();
      compiler.joinContext(context).injects({ b: "injected" });
    });
    expect(joined.hostMoss()).toMatchObject({ a: 1, b: "injected" });
    expect((joined.hostMoss().when as Date).getTime()).toBe(0);
  });

  test("a saved value is never clobbered by the class default", async () => {
    const compileSource = await moduleCompiler(`import { Moss as Parent } from "moss-ts";
export class Moss extends Parent { turns = 0; notes: string[] = []; }`);
    const runtime = await compileSource();
    const context = runtime.dumpContext();
    const { encodeProperties } = await import("../../engine/context/index.ts");
    context.properties = encodeProperties({ turns: 7, notes: ["kept"] }).properties;
    const resumed = await compileSource((compiler) => void compiler.joinContext(context));
    expect(resumed.hostMoss()).toMatchObject({ turns: 7, notes: ["kept"] });
  });

  test("field kinds: class, interface, @token, optional service, data-shaped interface, built-ins", async () => {
    const source = `import { Moss as Parent } from "moss-ts";
import { Canvas, type Measured, type Point, Turtle } from "../modules/shapes.ts";
export class Moss extends Parent {
  canvas!: Canvas;
  measure!: Measured;
  /** @token the-clock */
  clock!: { now(): number };
  optional?: Turtle;
  origin: Point = { x: 0, y: 0 };
  when = new Date(5);
  tags = new Set<string>();
  table = new Map<string, number>();
}`;
    const canvas = { draw: () => 0 };
    const measure = { area: () => 1 };
    const clock = { now: () => 42 };
    const { Canvas } = await import("../fixtures/modules/shapes.ts");
    const runtime = track(
      await compileFromText(source, (compiler) => {
        compiler
          .bind(Canvas, canvas as never)
          .bind("Measured", measure)
          .bind("the-clock", clock);
      }),
    );
    expect(runtime.mossInjections()).toEqual({ canvas, measure, clock, optional: undefined });
    const moss = runtime.hostMoss();
    expect(moss.origin).toEqual({ x: 0, y: 0 });
    expect(moss.tags).toBeInstanceOf(Set);
    expect(moss.table).toBeInstanceOf(Map);
  });

  test("a module without a Moss class compiles with an empty Moss", async () => {
    const runtime = track(await compileFromText(`export const answer = 42;`));
    expect(runtime.mossInjections()).toEqual({});
    expect(runtime.dumpContext().properties).toEqual({});
  });

  test("__moss_compile__ receives the compiler and may bind; __moss_compiled__ sees moss after injection", async () => {
    const source = `import { Moss as Parent, type MossCompiler } from "moss-ts";
export interface Clock { now(): number }
export class Moss extends Parent { clock!: Clock; started = 0; }
// <moss-hide>
export function __moss_compile__(compiler: MossCompiler) { compiler.bind("Clock", { now: () => 99 }); }
export function __moss_compiled__(moss: Moss) { moss.started = moss.clock.now(); }
// </moss-hide>`;
    const runtime = track(await compileFromText(source));
    expect(runtime.hostMoss().started).toBe(99);
    expect(runtime.dumpContext().properties).toMatchObject({ started: expect.anything() });
  });

  describe("binding precedence: the host's bindings win over __moss_compile__ defaults, never silently", () => {
    const WEATHER = `import { Moss as Parent, type MossCompiler } from "moss-ts";
export interface Weather { today(): string }
export class Moss extends Parent { weather!: Weather; }
// <moss-hide>
export function __moss_compile__(compiler: MossCompiler) {
  compiler.bind("Weather", { today: () => "module default" });
}
// </moss-hide>`;
    const sunny = { today: () => "sunny fake" };

    function captureWarnings(): { warnings: string[]; stop: () => void } {
      const warnings: string[] = [];
      const listener = (warning: Error & { code?: string }) => {
        if (warning.code === "MOSS_BINDING_CONFLICT") warnings.push(warning.message);
      };
      process.on("warning", listener);
      return { warnings, stop: () => process.off("warning", listener) };
    }

    test("a service bound on the container given to MossCompiler wins, with a warning naming both sources", async () => {
      const captured = captureWarnings();
      const container = new Container({ name: "test-host" }).bind("Weather", sunny);
      const runtime = track(await compileFromText(WEATHER, () => {}, { container }));
      await new Promise((resolve) => setImmediate(resolve));
      captured.stop();
      expect(runtime.mossInjections().weather).toBe(sunny);
      const [warning] = runtime.compileWarnings();
      expect(runtime.compileWarnings()).toHaveLength(1);
      expect(warning).toMatch(/binding conflict for "Weather"/);
      expect(warning).toMatch(/the container given to MossCompiler, "test-host"/);
      expect(warning).toMatch(/__moss_compile__ in .*context-\d+-\d+\.ts/);
      expect(warning).toMatch(/the host's binding wins/);
      expect(captured.warnings).toEqual([warning]);
    });

    test("compiler.bind before compile (how a test harness injects fakes) wins too", async () => {
      const runtime = track(await compileFromText(WEATHER, (compiler) => compiler.bind("Weather", sunny)));
      expect(runtime.mossInjections().weather).toBe(sunny);
      expect(runtime.compileWarnings()[0]).toMatch(/compiler\.bind\/register before compile/);
    });

    test("a module binding straight on compiler.container() follows the same rule", async () => {
      const direct = WEATHER.replace(
        'compiler.bind("Weather", { today: () => "module default" });',
        'compiler.container().bind("Weather", { today: () => "module default" });',
      );
      const runtime = track(await compileFromText(direct, (compiler) => compiler.bind("Weather", sunny)));
      expect(runtime.mossInjections().weather).toBe(sunny);
      expect(runtime.compileWarnings()).toHaveLength(1);
    });

    test("without a host binding the module's default is used and nothing is reported", async () => {
      const runtime = track(await compileFromText(WEATHER));
      expect((runtime.mossInjections().weather as { today(): string }).today()).toBe("module default");
      expect(runtime.compileWarnings()).toEqual([]);
    });
  });

  test("the module runs once per compile", async () => {
    const source = `(globalThis as any).__loads = ((globalThis as any).__loads ?? 0) + 1;\nexport const x = 1;`;
    const file = await writeModule(source);
    (globalThis as Record<string, unknown>).__loads = 0;
    track(await new MossCompiler({ sandbox: "in-process" }).compile(file));
    track(await new MossCompiler({ sandbox: "in-process" }).compile(file));
    expect((globalThis as Record<string, unknown>).__loads).toBe(2);
  });

  test("joinContext code replaces the file's source", async () => {
    const file = await writeModule(`export const version = "file";`);
    const compiler = new MossCompiler({ sandbox: "in-process" }).joinContext({
      version: 1,
      module: file,
      code: `export const version = "context";\nexport class Moss { marker = "from-context"; }`,
      properties: {},
      executed: false,
    });
    const runtime = track(await compiler.compile(file));
    expect(runtime.hostMoss().marker).toBe("from-context");
    expect(await runtime.prompter().sourceCode()).toContain(`"context"`);
  });

  test("configuration methods chain and compile() twice is an error", async () => {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const chained = compiler
      .bind("a", 1)
      .register({ contract: "b", factory: () => 2 })
      .withLocals({ c: 3 })
      .injects({});
    expect(chained).toBe(compiler);
    const file = await writeModule(`export const x = 1;`);
    track(await compiler.compile(file));
    expect((await rejection(compiler.compile(file))).code).toBe("already-compiled");
    expect(() => compiler.bind("late", 1)).toThrow(/after compile/);
  });
});

describe("MossCompiler: bad input", () => {
  test("a missing file names the path", async () => {
    const error = await rejection(new MossCompiler().compile("no/such/module.ts"));
    expect(error.code).toBe("module-not-found");
    expect(error.message).toContain("no/such/module.ts");
  });

  test("a syntax error names file, line and column and shows the source line", async () => {
    const file = await writeModule(`export const a = 1;\nexport function broken( {\n  return 1;\n}\n`);
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("module-syntax");
    expect(error.message).toMatch(new RegExp(`${path.basename(file)}:\\d+:\\d+`));
    expect(error.message).toContain("export function broken( {");
    expect(error.details.line).toBeGreaterThanOrEqual(2);
  });

  test("an unresolvable import names the specifier and its line", async () => {
    const file = await writeModule(
      `import { nothing } from "./does-not-exist.ts";\nexport const a = nothing;`,
    );
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("module-import");
    expect(error.message).toContain(`"./does-not-exist.ts"`);
    expect(error.message).toMatch(/:1:\d+/);
    expect(error.message).toContain("> 1 | import { nothing }");
  });

  test("a missing package names the package", async () => {
    const file = await writeModule(`import { x } from "surely-not-installed-pkg";\nexport const a = x;`);
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("module-import");
    expect(error.message).toContain("surely-not-installed-pkg");
  });

  test("a hook with the wrong shape is named with its location", async () => {
    const file = await writeModule(`export const x = 1;\nexport const __moss_compile__ = 42;`);
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("hook-shape");
    expect(error.message).toContain("__moss_compile__ must be a function");
    expect(error.message).toMatch(/:2:\d+/);
  });

  test("a hook that throws is reported with the hook's name and location", async () => {
    const file = await writeModule(
      `export function __moss_compile__() {\n  throw new Error("no robot attached");\n}`,
    );
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("hook-failed");
    expect(error.message).toContain("no robot attached");
    expect(error.message).toMatch(/__moss_compile__/);
  });

  test("a top-level throw while loading names the module line", async () => {
    const file = await writeModule(`export const a = 1;\nthrow new Error("boom at load");\n`);
    const error = await rejection(new MossCompiler().compile(file));
    expect(error.code).toBe("module-load");
    expect(error.message).toContain("boom at load");
    expect(error.message).toContain(path.basename(file));
  });

  test("a required service with no binding names the field, the token and the line", async () => {
    const source = await readFile(SPHERO, "utf8");
    const file = await writeModule(
      source
        .replace(/\/\/ <moss-hide>[\s\S]*$/, "")
        .replaceAll("./bolt.ts", "../../../examples/sphero/bolt.ts"),
    );
    const error = await rejection(
      new MossCompiler({ container: new Container().bind(Ball, new SimulatedBall()) }).compile(file),
    );
    expect(error.code).toBe("binding-missing");
    expect(error.message).toContain("Moss.face");
    expect(error.message).toContain("LedMatrix");
    expect(error.message).toMatch(/:\d+:\d+/);
    expect(error.message).toContain("face!: LedMatrix");
  });

  test("a class imported with import type has no value: the error explains its token became a string", async () => {
    const error = await rejection(
      compileFromText(
        `import { Moss as P } from "moss-ts";\nimport type { Canvas } from "../modules/shapes.ts";\nexport class Moss extends P { canvas!: Canvas }`,
      ),
    );
    expect(error.code).toBe("binding-missing");
    expect(error.message).toContain("import type");
    expect(error.message).toContain('"Canvas"');
  });

  test("injects() of an unknown field is refused, naming the fields", async () => {
    const error = await rejection(
      compileFromText(
        `import { Moss as P } from "moss-ts";\nexport class Moss extends P { count = 0 }`,
        (compiler) => {
          compiler.injects({ cuont: 1 });
        },
      ),
    );
    expect(error.code).toBe("invalid-argument");
    expect(error.message).toContain("cuont");
    expect(error.message).toContain("count");
  });

  test("withLocals() refuses a name starting with __moss_ (moss-ts's reserved prefix), from the host and the hook", async () => {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    let thrown: unknown;
    try {
      compiler.withLocals({ fine: 1, __moss_helper: 2 });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: "invalid-argument", details: { name: "__moss_helper" } });
    expect((thrown as Error).message).toContain('"__moss_helper"');
    expect((thrown as Error).message).toContain("__moss_");
    // Nothing of a refused call is kept: `fine` came with it, so the model does not see it either.
    const file = await writeModule(`export const x = 1;`);
    written.push(file);
    const runtime = track(await compiler.compile(file));
    const seen = await runtime.execute({ code: "function main() { return typeof fine; }", typeCheck: "off" });
    expect(seen.returns).toBe("undefined");
    // A module's own __moss_compile__ gets the same refusal, located by the compile's error.
    const error = await rejection(
      compileFromText(
        `import type { MossCompiler } from "moss-ts";\nexport function __moss_compile__(compiler: MossCompiler) { compiler.withLocals({ __moss_state: {} }); }`,
      ),
    );
    expect(error.code).toBe("invalid-argument");
    expect(error.message).toContain('"__moss_state"');
    // A name merely containing moss is the user's.
    expect(() => new MossCompiler().withLocals({ my__moss_: 1, mossy: 2 })).not.toThrow();
  });

  test("nothing is half-compiled: a failed compile leaves no temporary files behind", async () => {
    const { readdir } = await import("node:fs/promises");
    const before = (await readdir(path.join(FIXTURES, ".tmp"))).filter((name) => name.includes(".moss-"));
    await rejection(compileFromText(`export const a = 1;\nthrow new Error("x");`));
    const after = (await readdir(path.join(FIXTURES, ".tmp"))).filter((name) => name.includes(".moss-"));
    expect(after).toEqual(before);
  });
});
