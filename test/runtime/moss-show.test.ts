import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MAX_SHOWN_IMAGES } from "../../engine/runtime/image-content.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { BLUE_DOT } from "../fixtures/images/camera-context.ts";

const MODULE = "test/fixtures/images/camera-context.ts";
const open: MossRuntime[] = [];
afterAll(async () => {
  await Promise.all(open.map((runtime) => runtime.close()));
  await closeSharedSandboxes();
});

describe.each(["in-process", "process"] as const)("moss.show (%s sandbox)", (sandbox) => {
  test("an image a service returned comes out of the run in execution.images, bytes as base64", async () => {
    const runtime = await new MossCompiler({ sandbox }).compile(MODULE);
    open.push(runtime);
    const execution = await runtime.execute({
      code: 'async function main(moss: Moss) {\n  const picture = await moss.camera.snap();\n  moss.show(picture);\n  moss.show({ mediaType: "image/jpeg", url: "https://example.com/a.jpg", detail: "low" });\n}',
    });
    expect(execution.error).toBeUndefined();
    expect(execution.images).toEqual([
      { mediaType: "image/png", name: "desk.png", data: Buffer.from(BLUE_DOT).toString("base64") },
      { mediaType: "image/jpeg", url: "https://example.com/a.jpg", detail: "low" },
    ]);
    // Each run shows its own images: a run that shows none has no images.
    const next = await runtime.execute({ code: "async function main(moss: Moss) { return 1; }" });
    expect(next.images).toBeUndefined();
  });

  test("what is not an image, and more images than a run may show, fail inside the run as TypeErrors", async () => {
    const runtime = await new MossCompiler({ sandbox }).compile(MODULE);
    open.push(runtime);
    const refused = await runtime.execute({
      code: 'async function main(moss: Moss) {\n  try { moss.show({ mediaType: "image/png", url: "file:///etc/passwd" }); } catch (error) { return (error as Error).name + ": " + (error as Error).message; }\n}',
    });
    expect(refused.returns).toBe(
      "TypeError: moss.show(image): image.url must be an http(s) URL (at most 8192 characters)",
    );
    const many = await runtime.execute({
      code: `async function main(moss: Moss) {\n  const picture = await moss.camera.snap();\n  for (let i = 0; i <= ${MAX_SHOWN_IMAGES}; i++) moss.show(picture);\n}`,
    });
    expect(many.ok).toBe(false);
    expect(many.error?.message).toContain(`at most ${MAX_SHOWN_IMAGES} images`);
  });
});
