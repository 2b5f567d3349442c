import { readFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { MossError } from "./errors.ts";
import type { ImageContent, ImageInput } from "./types.ts";

/** Media types vision models accept. */
export const IMAGE_MEDIA_TYPES: readonly string[] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/** Largest image, in bytes (OpenAI's limit per image). */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/** Images one run may show with `moss.show`. */
export const MAX_SHOWN_IMAGES = 8;

const DETAILS = new Set(["low", "high", "auto"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const EXTENSIONS: Readonly<Record<string, string>> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
};

/**
 * Checks an image given by a host caller or by model code and returns its stored form (bytes as base64); the
 * problem, naming `label`, otherwise.
 */
export function imageProblem(value: unknown, label: string): string | ImageContent {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return `${label} must be an image object { mediaType, data } or { mediaType, url }`;
  }
  const given = value as Record<string, unknown>;
  const { mediaType, data, url, detail, name } = given;
  if (typeof mediaType !== "string" || !IMAGE_MEDIA_TYPES.includes(mediaType)) {
    return `${label}.mediaType must be one of ${IMAGE_MEDIA_TYPES.join(", ")}; got ${JSON.stringify(mediaType)}`;
  }
  if (detail !== undefined && !(typeof detail === "string" && DETAILS.has(detail))) {
    return `${label}.detail must be "low", "high" or "auto"`;
  }
  if (name !== undefined && typeof name !== "string") return `${label}.name must be a string`;
  if ((data === undefined) === (url === undefined)) return `${label} needs either data (its bytes) or url`;
  const image: ImageContent = {
    mediaType,
    ...(detail === undefined ? {} : { detail: detail as ImageContent["detail"] }),
    ...(name === undefined ? {} : { name: name as string }),
  };
  if (url !== undefined) {
    if (typeof url !== "string" || !/^https?:\/\//i.test(url) || url.length > 8192) {
      return `${label}.url must be an http(s) URL (at most 8192 characters)`;
    }
    return { ...image, url };
  }
  let base64: string;
  if (data instanceof Uint8Array) {
    if (data.byteLength > MAX_IMAGE_BYTES) return tooLarge(label, data.byteLength);
    base64 = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
  } else if (typeof data === "string") {
    if (!BASE64.test(data) || data.length % 4 !== 0) return `${label}.data must be bytes or base64 text`;
    if ((data.length / 4) * 3 > MAX_IMAGE_BYTES + 2)
      return tooLarge(label, Math.floor((data.length / 4) * 3));
    base64 = data;
  } else {
    return `${label}.data must be a Uint8Array or base64 text`;
  }
  if (base64 === "") return `${label}.data is empty`;
  return { ...image, data: base64 };
}

function tooLarge(label: string, bytes: number): string {
  return `${label} is ${bytes} bytes; the limit is ${MAX_IMAGE_BYTES} bytes`;
}

/** The stored form of an image a host caller gave (bytes as base64); a MossError (`invalid-argument`) naming it otherwise. */
export function toImageContent(value: ImageInput | ImageContent, label = "image"): ImageContent {
  const checked = imageProblem(value, label);
  if (typeof checked === "string") throw new MossError("invalid-argument", `${checked}.`, { label });
  return checked;
}

/** Reads an image file (png, jpeg, gif, webp, told by its extension) into its stored form. */
export async function imageFromFile(
  file: string,
  options: { detail?: ImageContent["detail"] } = {},
): Promise<ImageContent> {
  const mediaType = EXTENSIONS[extname(file).toLowerCase()];
  if (mediaType === undefined) {
    throw new MossError(
      "invalid-argument",
      `${file}: not an image file this agent can send (${Object.keys(EXTENSIONS).join(", ")}).`,
      { file },
    );
  }
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new MossError(
      "invalid-argument",
      `${file}: cannot read (${(error as NodeJS.ErrnoException).code ?? error}).`,
      { file },
    );
  }
  return toImageContent({ mediaType, data: bytes, name: basename(file), ...options }, file);
}

/** The images one run showed with `moss.show`, bounded in number and size. */
export class ShownImages {
  readonly images: ImageContent[] = [];

  /** `moss.show(image)` with its arguments as data; a TypeError (thrown inside the isolate) when they do not fit. */
  add(args: unknown[]): void {
    if (this.images.length >= MAX_SHOWN_IMAGES) {
      throw new TypeError(`moss.show: a run may show at most ${MAX_SHOWN_IMAGES} images`);
    }
    const given = args[0] as { url?: unknown } | null | undefined;
    if (given !== null && typeof given === "object" && given.url !== undefined) {
      // A URL would be fetched by the model's provider: a way out of the sandbox for whatever the code puts in it.
      throw new TypeError("moss.show(image) takes the image's bytes (data), not a URL");
    }
    const checked = imageProblem(args[0], "moss.show(image): image");
    if (typeof checked === "string") throw new TypeError(checked);
    this.images.push(checked);
  }
}
