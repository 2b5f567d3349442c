import { describe, expect, it } from "vitest";
import { MossError } from "../../engine/errors.ts";
import { isolatedVmCandidates, loadIsolatedVm } from "../../engine/sandbox/isolated-vm.ts";

const notInstalled = (name: string): never => {
  throw Object.assign(new Error(`Cannot find module '${name}'`), { code: "MODULE_NOT_FOUND" });
};

describe("the isolated-vm loader", () => {
  it("tries the releases made for each supported Node line, newest first, then a plain isolated-vm", () => {
    expect(isolatedVmCandidates(20)).toEqual(["isolated-vm-5", "isolated-vm"]);
    expect(isolatedVmCandidates(22)).toEqual(["isolated-vm-6", "isolated-vm-5", "isolated-vm"]);
    expect(isolatedVmCandidates(24)).toEqual(["isolated-vm-7", "isolated-vm-6", "isolated-vm"]);
    expect(isolatedVmCandidates(26)).toEqual(["isolated-vm-7", "isolated-vm"]);
    expect(isolatedVmCandidates(28)).toEqual(["isolated-vm-7", "isolated-vm"]);
    expect(isolatedVmCandidates(18)).toEqual(["isolated-vm"]);
  });

  it("loads a working isolated-vm on this Node", async () => {
    const ivm = loadIsolatedVm();
    const isolate = new ivm.Isolate({ memoryLimit: 8 });
    try {
      const context = await isolate.createContext();
      expect(await context.eval("6 * 7")).toBe(42);
    } finally {
      isolate.dispose();
    }
  });

  it("names the Node version, every candidate's failure and what to install when none fits", () => {
    const require = (name: string) => {
      if (name === "isolated-vm-6")
        throw Object.assign(new Error("was compiled against a different Node.js version"), {
          code: "ERR_DLOPEN_FAILED",
        });
      return notInstalled(name);
    };
    let error: unknown;
    try {
      loadIsolatedVm("24.11.0", require);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(MossError);
    const message = (error as MossError).message;
    expect((error as MossError).code).toBe("sandbox-failed");
    expect(message).toContain("Node 24.11.0");
    expect(message).toContain("isolated-vm-7: not installed");
    expect(message).toContain(
      "isolated-vm-6: installed but not loadable (ERR_DLOPEN_FAILED: was compiled against",
    );
    expect(message).toContain("isolated-vm@7.0.1 or isolated-vm@6.2.0");
    expect(message).toContain("npm install");
  });

  it("on a Node line no release supports, says which lines are supported", () => {
    expect(() => loadIsolatedVm("18.20.0", notInstalled)).toThrow(
      /Node 18\.20\.0.*Supported Node lines: 20, 22, 24, 26/s,
    );
  });
});
