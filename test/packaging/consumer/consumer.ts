// A user's TypeScript using the public API and a subpath export.
import { type Execution, MossCompiler, type MossContext, MossError } from "moss-ts";
import { Container } from "moss-ts/container";

export async function greet(file: string): Promise<MossContext> {
  const compiler = new MossCompiler({ container: new Container() });
  const runtime = await compiler.compile(file);
  try {
    const execution: Execution = await runtime.execute({
      code: "async function main(moss: Moss) { return 1; }",
    });
    if (!execution.ok) throw new MossError("invalid-argument", execution.error?.message ?? "failed");
    return runtime.dumpContext();
  } finally {
    await runtime.close();
  }
}
