import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { bindFiles, type Files, type FilesOptions } from "../../../moss-modules/files/index.ts";

/** The context module the model works through: one `Files` field. */
export const FILES_CONTEXT = `import { Moss as Parent } from "moss-ts";
// biome-ignore lint/style/useImportType: the class is the service token
import { Files } from "moss-ts/files";

/** The model works in a folder. */
export class Moss extends Parent {
  /** The working directory. */
  files!: Files;
}
`;

/** A scratch folder for one test file: `root` is the working directory, `outside` a sibling the model must not reach. */
export class FilesRig {
  readonly base: string;
  readonly root: string;
  readonly outside: string;
  runtime!: MossRuntime;
  files!: Files;

  constructor(name: string) {
    this.base = fileURLToPath(new URL(`../../fixtures/.tmp/files-${name}-${process.pid}/`, import.meta.url));
    this.root = path.join(this.base, "work");
    this.outside = path.join(this.base, "outside");
  }

  async open(driver: "process" | "in-process", options: FilesOptions = {}): Promise<this> {
    rmSync(this.base, { recursive: true, force: true });
    mkdirSync(this.root, { recursive: true });
    mkdirSync(this.outside, { recursive: true });
    writeFileSync(path.join(this.outside, "secret.txt"), "outside-secret");
    const contextFile = path.join(this.base, "context.ts");
    writeFileSync(contextFile, FILES_CONTEXT);
    const compiler = new MossCompiler({ sandbox: driver });
    this.files = bindFiles(compiler, this.root, options);
    this.runtime = await compiler.compile(contextFile);
    return this;
  }

  /** Runs `main` type-checked against the module, as model code runs. */
  run(code: string) {
    return this.runtime.execute({ code });
  }

  async close(): Promise<void> {
    await this.runtime?.close();
    rmSync(this.base, { recursive: true, force: true });
  }
}
