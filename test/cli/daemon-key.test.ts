import { afterEach, describe, expect, it } from "vitest";
import { daemonSocketPath } from "../../engine/cli/daemon-client.ts";

/*
 * Which daemon a command may use (engine/cli/daemon-client.ts): only one started by the same Node, with the same
 * start-up, holding the same moss-ts. The socket's name is that key; what a command reads itself (its other
 * variables, its working directory, its files) is not in it: the command reads those afresh in the warm process
 * (test/packaging/pack.test.ts proves that end to end, and that a changed moss-ts file is another daemon's).
 */
const saved = { version: process.version, env: { ...process.env } };

afterEach(() => {
  Object.defineProperty(process, "version", { value: saved.version, configurable: true, writable: false });
  for (const name of Object.keys(process.env)) if (!(name in saved.env)) delete process.env[name];
  Object.assign(process.env, saved.env);
});

const base = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.MOSS_NO_DAEMON;
  delete env.NODE_OPTIONS;
  return env;
};

describe("the daemon a command may use", () => {
  it("is named by a socket in the user's private temp folder", () => {
    const socket = daemonSocketPath(base());
    expect(socket).toMatch(new RegExp(`moss-ts-${process.getuid?.()}/daemon-[0-9a-f]{24}\\.sock$`));
  });

  it("is none with MOSS_NO_DAEMON=1, or under a Node flag a second process must not share", () => {
    expect(daemonSocketPath({ ...base(), MOSS_NO_DAEMON: "1" })).toBeUndefined();
    expect(daemonSocketPath({ ...base(), NODE_OPTIONS: "--inspect=0" })).toBeUndefined();
    expect(daemonSocketPath({ ...base(), NODE_OPTIONS: "--cpu-prof" })).toBeUndefined();
  });

  it("changes with Node's version and with what Node reads at start", () => {
    const socket = daemonSocketPath(base());
    expect(daemonSocketPath({ ...base(), NODE_OPTIONS: "--max-old-space-size=3000" })).not.toBe(socket);
    expect(daemonSocketPath({ ...base(), LANG: "de_DE.UTF-8" })).not.toBe(socket);
    expect(daemonSocketPath({ ...base(), TZ: "Asia/Tokyo" })).not.toBe(socket);
    Object.defineProperty(process, "version", { value: "v99.0.0", configurable: true });
    expect(daemonSocketPath(base())).not.toBe(socket);
  });

  it("stays for what a command reads afresh: the module's own variables", () => {
    const socket = daemonSocketPath(base());
    expect(daemonSocketPath({ ...base(), WARM_GREETING: "hi", MOSS_MODEL: "other" })).toBe(socket);
  });
});
