import { imageProblem } from "../../image-content.ts";
import type { ImageContent } from "../../types.ts";
import { ServerError } from "../server-error.ts";

/** Images one new message may carry (each is also bounded by the agent's image rules and the tenant's body size). */
export const MAX_RUN_IMAGES = 8;

/**
 * The images of a new user message in their stored form, checked by the agent's own image rules (png, jpeg, gif or
 * webp; base64 `data` or an http(s) `url`; at most {@link MAX_RUN_IMAGES}); a bad one is a 400 `images-invalid`
 * naming it (`images[1].mediaType must be one of …`).
 */
export function runImages(value: unknown, field = "images"): ImageContent[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new ServerError(
      400,
      "images-invalid",
      `"${field}" must be an array of images { mediaType, data | url }.`,
    );
  }
  if (value.length > MAX_RUN_IMAGES) {
    throw new ServerError(
      400,
      "images-invalid",
      `"${field}" holds ${value.length} images; a message may carry at most ${MAX_RUN_IMAGES}.`,
    );
  }
  return value.map((image, index) => {
    const checked = imageProblem(image, `${field}[${index}]`);
    if (typeof checked === "string") throw new ServerError(400, "images-invalid", `${checked}.`);
    return checked;
  });
}
