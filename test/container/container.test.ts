import { describe, expect, it } from "vitest";
import { Container, destroyOnce, type Provider, provide, tokenName } from "../../container/index.ts";
import { MossError } from "../../engine/errors.ts";

abstract class Ball {
  abstract roll(): string;
}
class SimulatedBall extends Ball {
  roll(): string {
    return "rolled";
  }
}
class Tracked {
  destroyed = 0;
  constructor(
    readonly label: string,
    readonly log: string[] = [],
  ) {}
  onDestroy(): void {
    this.destroyed++;
    this.log.push(this.label);
  }
}

function caught(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

describe("Container bind/get", () => {
  it("binds constants under abstract classes, strings and symbols, and chains", () => {
    const ball = new SimulatedBall();
    const key = Symbol("key");
    const container = new Container().bind(Ball, ball).bind("answer", 42).bind(key, "symbolic");
    expect(container.get(Ball)).toBe(ball);
    expect(container.get(Ball)?.roll()).toBe("rolled");
    expect(container.get<number>("answer")).toBe(42);
    expect(container.get<string>(key)).toBe("symbolic");
  });

  it("returns undefined for an unbound token and reports bound()", () => {
    const container = new Container().bind("here", 1);
    expect(container.get(Ball)).toBeUndefined();
    expect(container.get("missing")).toBeUndefined();
    expect(container.bound("here")).toBe(true);
    expect(container.bound("missing")).toBe(false);
    expect(container.bound(Ball)).toBe(false);
  });

  it("replaces a binding when the same token is bound again", () => {
    const container = new Container().bind("value", 1).bind("value", 2);
    expect(container.get("value")).toBe(2);
    container.register(provide("value", () => 3));
    expect(container.get("value")).toBe(3);
    container.bind("value", 4);
    expect(container.get("value")).toBe(4);
  });

  it("replaces an async singleton, resolved or still pending", async () => {
    const container = new Container().register(provide("remote", async () => "first"));
    await expect(container.getAsync("remote")).resolves.toBe("first");
    container.register(provide("remote", async () => "second"));
    const pending = container.getAsync("remote");
    container.bind("remote", "third");
    await expect(pending).resolves.toBe("second");
    expect(container.get("remote")).toBe("third");
  });

  it("rejects a token that is not a class, string or symbol", () => {
    const error = caught(() => new Container().bind(42 as never, 1));
    expect(MossError.is(error, "invalid-argument")).toBe(true);
  });
});

describe("Container forceFetch", () => {
  it("returns bound values", () => {
    const ball = new SimulatedBall();
    expect(new Container().bind(Ball, ball).forceFetch(Ball)).toBe(ball);
  });

  it("throws binding-missing naming a class token and the container", () => {
    const error = caught(() => new Container({ name: "host" }).forceFetch(Ball));
    expect(MossError.is(error, "binding-missing")).toBe(true);
    expect((error as MossError).message).toBe('No binding for Ball in container "host"');
    expect((error as MossError).details).toEqual({ token: "Ball", container: "host" });
  });

  it("names string and symbol tokens readably and mentions parents for a child", () => {
    const child = new Container({ name: "host" }).child("compile");
    const stringError = caught(() => child.forceFetch("Clock")) as MossError;
    expect(stringError.message).toBe('No binding for "Clock" in container "compile" or its parents');
    const symbolError = caught(() => child.forceFetch(Symbol("logger"))) as MossError;
    expect(symbolError.message).toContain("Symbol(logger)");
  });

  it("forceFetchAsync resolves async providers and throws for missing ones", async () => {
    const container = new Container().register(provide("config", async () => ({ port: 80 })));
    await expect(container.forceFetchAsync("config")).resolves.toEqual({ port: 80 });
    await expect(container.forceFetchAsync("nothing")).rejects.toMatchObject({ code: "binding-missing" });
  });
});

describe("tokenName", () => {
  it("names classes, strings, symbols and anonymous classes", () => {
    expect(tokenName(Ball)).toBe("Ball");
    expect(tokenName("Clock")).toBe('"Clock"');
    expect(tokenName(Symbol("x"))).toBe("Symbol(x)");
    expect(tokenName((() => class {})())).toBe("<anonymous class>");
  });
});

describe("Container providers", () => {
  it("a singleton provider builds once and passes its container to the factory", () => {
    let builds = 0;
    let seen: Container | undefined;
    const container = new Container().bind("size", 3);
    container.register(
      provide(Ball, (owner) => {
        builds++;
        seen = owner;
        return new SimulatedBall();
      }),
    );
    const first = container.get(Ball);
    expect(container.get(Ball)).toBe(first);
    expect(builds).toBe(1);
    expect(seen).toBe(container);
  });

  it("a factory can fetch its dependencies from the container", () => {
    const container = new Container()
      .bind("size", 3)
      .register(provide("area", (owner) => owner.forceFetch<number>("size") ** 2));
    expect(container.get("area")).toBe(9);
  });

  it("a transient provider builds on every fetch", () => {
    let builds = 0;
    const container = new Container().register(
      provide("fresh", () => ({ n: ++builds }), { singleton: false }),
    );
    const a = container.get<{ n: number }>("fresh");
    const b = container.get<{ n: number }>("fresh");
    expect(a).not.toBe(b);
    expect([a?.n, b?.n]).toEqual([1, 2]);
  });

  it("provider objects work without the provide() helper and default to singleton", () => {
    const provider: Provider<object> = { contract: "plain", factory: () => ({}) };
    const container = new Container().register(provider);
    expect(container.get("plain")).toBe(container.get("plain"));
  });

  it("an async factory resolves through getAsync once, and sync get says to use getAsync", async () => {
    let builds = 0;
    const container = new Container().register(
      provide("remote", async () => {
        builds++;
        await new Promise((resolve) => setImmediate(resolve));
        return { remote: true };
      }),
    );
    const [a, b] = await Promise.all([container.getAsync("remote"), container.getAsync("remote")]);
    expect(a).toEqual({ remote: true });
    expect(b).toBe(a);
    expect(builds).toBe(1);

    const other = new Container({ name: "io" }).register(provide("slow", async () => 1));
    const error = caught(() => other.get("slow")) as MossError;
    expect(MossError.is(error, "invalid-argument")).toBe(true);
    expect(error.message).toContain('"slow" in container "io" is built asynchronously');
    await expect(other.getAsync("slow")).resolves.toBe(1);
  });

  it("getAsync also returns constants and undefined for unbound tokens", async () => {
    const container = new Container().bind("x", 1);
    await expect(container.getAsync("x")).resolves.toBe(1);
    await expect(container.getAsync("y")).resolves.toBeUndefined();
  });

  it("a factory's own error propagates unchanged", () => {
    const container = new Container().register(
      provide("broken", () => {
        throw new RangeError("no such device");
      }),
    );
    const error = caught(() => container.get("broken"));
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toBe("no such device");
  });
});

describe("Container parent and child", () => {
  it("a child sees its parent's bindings; its own bindings shadow them without touching the parent", () => {
    const parentBall = new SimulatedBall();
    const childBall = new SimulatedBall();
    const parent = new Container({ name: "host" }).bind(Ball, parentBall).bind("shared", "from parent");
    const child = parent.child();
    expect(child.name).toBe("host/child-1");
    expect(child.parent).toBe(parent);
    expect(child.get(Ball)).toBe(parentBall);
    expect(child.bound("shared")).toBe(true);
    child.bind(Ball, childBall);
    expect(child.get(Ball)).toBe(childBall);
    expect(parent.get(Ball)).toBe(parentBall);
    child.bind("only-child", 1);
    expect(parent.bound("only-child")).toBe(false);
    expect(parent.get("only-child")).toBeUndefined();
  });

  it("sees bindings of grandparents and ones added to the parent after the child was made", () => {
    const root = new Container();
    const grandchild = root.child().child("leaf");
    root.bind("late", "added later");
    expect(grandchild.get("late")).toBe("added later");
    expect(grandchild.forceFetch("late")).toBe("added later");
  });

  it("a parent singleton fetched through two children is one instance", () => {
    const root = new Container().register(provide("one", () => ({})));
    expect(root.child().get("one")).toBe(root.child().get("one"));
  });

  it("new Container({ parent }) is the same as parent.child()", () => {
    const root = new Container().bind("x", 1);
    const child = new Container({ parent: root, name: "explicit" });
    expect(child.get("x")).toBe(1);
    expect(child.name).toBe("explicit");
  });
});

describe("Container bootstrap", () => {
  it("runs bootstrappers in order once, then instantiates singleton providers", async () => {
    const log: string[] = [];
    const container = new Container()
      .addBootstrapper((owner) => {
        log.push("first");
        owner.bind("configured", true);
      })
      .addBootstrapper(async () => {
        log.push("second");
      })
      .register(
        provide("eager", async () => {
          log.push("eager built");
          return {};
        }),
      )
      .register(
        provide(
          "transient",
          () => {
            log.push("transient built");
            return {};
          },
          { singleton: false },
        ),
      );
    await expect(container.bootstrap()).resolves.toBe(container);
    expect(log).toEqual(["first", "second", "eager built"]);
    expect(container.get("configured")).toBe(true);
    await container.bootstrap();
    expect(log).toEqual(["first", "second", "eager built"]);
    container.addBootstrapper(() => {
      log.push("third");
    });
    await container.bootstrap();
    expect(log).toEqual(["first", "second", "eager built", "third"]);
  });

  it("surfaces a failing factory at bootstrap", async () => {
    const container = new Container().register(
      provide("bad", async () => {
        throw new Error("cannot connect");
      }),
    );
    await expect(container.bootstrap()).rejects.toThrow("cannot connect");
  });
});

describe("Container shutdown", () => {
  it("calls onDestroy of bound values and instantiated singletons once, newest first, children first", async () => {
    const log: string[] = [];
    const root = new Container();
    const bound = new Tracked("root bound", log);
    root.bind("bound", bound);
    root.register(provide("singleton", () => new Tracked("root singleton", log)));
    root.register(provide("never built", () => new Tracked("never built", log)));
    const child = root.child();
    child.bind("child bound", new Tracked("child bound", log));
    root.get("singleton");

    await root.shutdown();
    expect(log).toEqual(["child bound", "root singleton", "root bound"]);
    await root.shutdown();
    await child.shutdown();
    expect(log).toEqual(["child bound", "root singleton", "root bound"]);
    expect(bound.destroyed).toBe(1);
    expect(root.closed).toBe(true);
    expect(child.closed).toBe(true);
  });

  it("does not destroy transient values (they belong to the caller) but does destroy replaced values", async () => {
    const log: string[] = [];
    const container = new Container()
      .register(provide("transient", () => new Tracked("transient", log), { singleton: false }))
      .bind("slot", new Tracked("replaced", log));
    container.get("transient");
    container.bind("slot", new Tracked("current", log));
    await container.shutdown();
    expect(log).toEqual(["current", "replaced"]);
  });

  it("destroys a value bound in two containers only once", async () => {
    const shared = new Tracked("shared");
    const root = new Container().bind("a", shared).bind("b", shared);
    const child = root.child().bind("c", shared);
    await child.shutdown();
    await root.shutdown();
    expect(shared.destroyed).toBe(1);
  });

  it("awaits async onDestroy hooks", async () => {
    let done = false;
    const container = new Container().bind("async", {
      async onDestroy() {
        await new Promise((resolve) => setImmediate(resolve));
        done = true;
      },
    });
    await container.shutdown();
    expect(done).toBe(true);
  });

  it("runs every hook even when one fails and reports the failure as hook-failed", async () => {
    const survivor = new Tracked("survivor");
    class Faulty {
      onDestroy(): void {
        throw new Error("disk gone");
      }
    }
    const container = new Container({ name: "host" }).bind("survivor", survivor).bind("faulty", new Faulty());
    const error = await container.shutdown().catch((failure: unknown) => failure);
    expect(MossError.is(error, "hook-failed")).toBe(true);
    expect((error as MossError).message).toContain('Shutting down container "host"');
    expect((error as MossError).message).toContain("Faulty.onDestroy() failed: disk gone");
    expect(survivor.destroyed).toBe(1);
  });

  it("refuses use after shutdown with container-closed", async () => {
    const container = new Container({ name: "done" }).bind("x", 1);
    await container.shutdown();
    for (const use of [
      () => container.get("x"),
      () => container.bind("y", 2),
      () => container.register(provide("z", () => 3)),
      () => container.forceFetch("x"),
      () => container.bound("x"),
      () => container.child(),
    ]) {
      const error = caught(use) as MossError;
      expect(MossError.is(error, "container-closed")).toBe(true);
      expect(error.message).toContain('container "done"');
    }
  });

  it("a child shut down on its own leaves the parent usable", async () => {
    const root = new Container().bind("x", 1);
    const child = root.child();
    await child.shutdown();
    expect(root.get("x")).toBe(1);
    expect(root.child().get("x")).toBe(1);
  });

  it("an async singleton that finishes after shutdown is destroyed and refused", async () => {
    const built = new Tracked("late");
    let release: () => void = () => undefined;
    const container = new Container().register(
      provide("late", async () => {
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return built;
      }),
    );
    const pending = container.getAsync("late");
    await new Promise((resolve) => setImmediate(resolve));
    await container.shutdown();
    release();
    await expect(pending).rejects.toMatchObject({ code: "container-closed" });
    expect(built.destroyed).toBe(1);
  });
});

describe("destroyOnce", () => {
  it("calls onDestroy once per object and ignores values without it", async () => {
    const value = new Tracked("x");
    expect(await destroyOnce(value)).toBe(true);
    expect(await destroyOnce(value)).toBe(false);
    expect(value.destroyed).toBe(1);
    expect(await destroyOnce({})).toBe(false);
    expect(await destroyOnce(null)).toBe(false);
  });
});
