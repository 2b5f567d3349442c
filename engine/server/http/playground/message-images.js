// The images a message carries, drawn in the conversation: each stored image is fetched with the tenant's token from
// GET …/messages/:messageId/images/:index and shown through a `blob:` URL (the page's CSP: `img-src 'self' blob:`,
// never a data: URL); an image given as a URL is named, not fetched. DOM through textContent and attributes only.
import { element } from "./dom.js";

/** The blob: URLs of the open thread's images, revoked when another thread opens. */
const urls = new Set();

/** Revokes every image URL of the thread that was open. */
export function forgetImages() {
  for (const url of urls) URL.revokeObjectURL(url);
  urls.clear();
}

/**
 * A figure of the message's images: `label` names them for screen readers, each image's alt is its file name (or
 * "image N"); `fetchImage(index)` resolves the image's bytes as a Blob.
 */
export function messageImages(message, label, fetchImage) {
  const figure = element("figure", "message-images");
  figure.setAttribute("aria-label", label);
  message.images.forEach((image, index) => {
    const name = image.name ?? `image ${index + 1}`;
    if (image.url !== undefined) {
      figure.append(element("p", "meta", `${name}: ${image.url ?? "an image"} (not fetched)`));
      return;
    }
    const img = document.createElement("img");
    img.alt = name;
    img.title = `${name} (${image.mediaType})`;
    figure.append(img);
    fetchImage(index).then(
      (blob) => {
        const url = URL.createObjectURL(blob);
        urls.add(url);
        img.src = url;
      },
      (error) => img.replaceWith(element("p", "meta", `${name} cannot be shown: ${error.message}`)),
    );
  });
  return figure;
}
