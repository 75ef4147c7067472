// Media in and out: `done.parts` and the media items the client assembles
// (from `media_chunk`s and binary frames) rendered as image, audio, video or
// a file link; the content part that names an upload.

import { externalLink, renderMarkdown, safeHttpUrl } from "./markdown.js";

const KINDS = ["image", "audio", "video"];

/** A Blob from base64 text (standard alphabet). */
export function base64Blob(data, mimeType) {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type: mimeType || "application/octet-stream" });
}

/** `omnia://sessions/S/media/M` → this server's download URL, else null. */
export function storageRefUrl(ref) {
  const match = /^omnia:\/\/sessions\/([^/]+)\/media\/([^/]+)$/.exec(ref ?? "");
  if (!match) return null;
  return `/media/download/${encodeURIComponent(match[1])}/${encodeURIComponent(match[2])}`;
}

/** Where a part's bytes can be read from, or null. */
function sourceOf(media) {
  if (media.data) return URL.createObjectURL(base64Blob(media.data, media.mime_type));
  if (media.storage_ref) return storageRefUrl(media.storage_ref);
  if (media.url) return safeHttpUrl(media.url);
  return null;
}

function kindOf(type, mimeType) {
  if (KINDS.includes(type)) return type;
  const major = String(mimeType ?? "").split("/")[0];
  return KINDS.includes(major) ? major : "file";
}

/** One media element (image, audio, video or a download link) for `src`. */
export function mediaElement(kind, src, mimeType, name) {
  const figure = document.createElement("figure");
  figure.className = `media media-${kind}`;
  figure.dataset.testid = `media-${kind}`;
  let element;
  if (kind === "image") {
    element = document.createElement("img");
    element.alt = name || "image";
    element.src = src;
  } else if (kind === "audio" || kind === "video") {
    element = document.createElement(kind);
    element.controls = true;
    element.preload = "metadata";
    element.src = src;
  } else {
    element = document.createElement("a");
    element.href = src;
    element.download = name || "file";
    element.rel = "noopener";
    element.textContent = `⬇ ${name || "download"} (${mimeType || "file"})`;
  }
  figure.append(element);
  if (kind !== "file" && mimeType) {
    const caption = document.createElement("figcaption");
    caption.textContent = name ? `${name} · ${mimeType}` : mimeType;
    figure.append(caption);
  }
  return figure;
}

/** `done.parts` (text and media) as a DocumentFragment. */
export function renderParts(parts) {
  const fragment = document.createDocumentFragment();
  for (const part of parts ?? []) {
    if (part?.type === "text") {
      fragment.append(renderMarkdown(part.text ?? ""));
      continue;
    }
    const media = part?.media;
    if (!media) continue;
    const kind = kindOf(part.type, media.mime_type);
    const src = sourceOf(media);
    if (src) {
      fragment.append(mediaElement(kind, src, media.mime_type, media.filename));
    } else if (media.url) {
      // A URL this console will not load (not http(s)): shown, not fetched.
      const p = document.createElement("p");
      p.textContent = `[${kind}: ${media.url}]`;
      fragment.append(p);
    }
  }
  return fragment;
}

/** A media item the client assembled (`{media_id, mime_type, bytes}`) as an element. */
export function mediaItemElement(item) {
  const blob = new Blob([item.bytes], { type: item.mime_type || "application/octet-stream" });
  return mediaElement(kindOf(null, item.mime_type), URL.createObjectURL(blob), item.mime_type, item.media_id);
}

/** The content part that names an uploaded file by its `storage_ref`. */
export function uploadedPart(upload) {
  return {
    type: kindOf(null, upload.mime_type),
    media: { storage_ref: upload.storage_ref, mime_type: upload.mime_type },
  };
}

export { externalLink };
