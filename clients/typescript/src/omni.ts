// The binary OMNI frame (api/websocket/omnia.asyncapi.yaml, `OmniFrame`):
// a 32-byte big-endian header, JSON metadata, then the raw payload.
import type { OmniMetadata } from "./generated/omnia.js";

export const OMNI_HEADER_LEN = 32;
export const OMNI_VERSION = 1;
export const OMNI_MEDIA_CHUNK = 1;
export const FLAG_CHUNKED = 0x02;
export const FLAG_IS_LAST = 0x04;
const MAGIC = [0x4f, 0x4d, 0x4e, 0x49]; // "OMNI"

export interface OmniFrame {
  flags: number;
  messageType: number;
  sequence: number;
  /** The media id with its NUL padding removed; `""` for call audio. */
  mediaId: string;
  metadata: OmniMetadata;
  /** A view into the frame's buffer. */
  payload: Uint8Array;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One frame: `metadata` as JSON, `payload` as it is. */
export function encodeOmniFrame(
  metadata: OmniMetadata,
  sequence: number,
  payload: Uint8Array,
  flags = 0,
  mediaId = "",
): Uint8Array {
  const meta = encoder.encode(JSON.stringify(metadata));
  const frame = new Uint8Array(OMNI_HEADER_LEN + meta.length + payload.length);
  const view = new DataView(frame.buffer);
  frame.set(MAGIC, 0);
  view.setUint8(4, OMNI_VERSION);
  view.setUint8(5, flags);
  view.setUint16(6, OMNI_MEDIA_CHUNK);
  view.setUint32(8, meta.length);
  view.setUint32(12, payload.length);
  view.setUint32(16, sequence >>> 0);
  frame.set(encoder.encode(mediaId).subarray(0, 12), 20);
  frame.set(meta, OMNI_HEADER_LEN);
  frame.set(payload, OMNI_HEADER_LEN + meta.length);
  return frame;
}

/** The frame in `data`, or null when it is not a well-formed OMNI frame. */
export function decodeOmniFrame(data: ArrayBuffer | Uint8Array): OmniFrame | null {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.length < OMNI_HEADER_LEN) return null;
  for (let i = 0; i < 4; i += 1) if (bytes[i] !== MAGIC[i]) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const metadataLen = view.getUint32(8);
  const payloadLen = view.getUint32(12);
  if (OMNI_HEADER_LEN + metadataLen + payloadLen > bytes.length) return null;
  let metadata: OmniMetadata = {};
  if (metadataLen > 0) {
    try {
      metadata = JSON.parse(decoder.decode(bytes.subarray(OMNI_HEADER_LEN, OMNI_HEADER_LEN + metadataLen)));
    } catch {
      return null;
    }
  }
  let idEnd = 20;
  while (idEnd < 32 && bytes[idEnd] !== 0) idEnd += 1;
  const start = OMNI_HEADER_LEN + metadataLen;
  return {
    flags: view.getUint8(5),
    messageType: view.getUint16(6),
    sequence: view.getUint32(16),
    mediaId: decoder.decode(bytes.subarray(20, idEnd)),
    metadata,
    payload: bytes.subarray(start, start + payloadLen),
  };
}
