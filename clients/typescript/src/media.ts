// Media from the agent: JSON `media_chunk`s (base64) and binary OMNI
// frames, assembled per media id into one item when the last piece comes.
import { concatBytes, fromBase64 } from "./base64.js";
import type { MediaChunkPayload } from "./generated/omnia.js";
import { FLAG_CHUNKED, FLAG_IS_LAST, type OmniFrame } from "./omni.js";

/** A complete media item. */
export interface MediaItem {
  media_id: string;
  mime_type: string;
  bytes: Uint8Array;
}

interface Stream {
  mime: string;
  pieces: Uint8Array[];
  received: number;
  total: number | null;
}

export class MediaAssembler {
  #streams = new Map<string, Stream>();

  #stream(id: string, mime: string): Stream {
    let stream = this.#streams.get(id);
    if (!stream) {
      stream = { mime, pieces: [], received: 0, total: null };
      this.#streams.set(id, stream);
    }
    return stream;
  }

  #finish(id: string, stream: Stream): MediaItem {
    this.#streams.delete(id);
    return { media_id: id, mime_type: stream.mime, bytes: concatBytes(stream.pieces.filter(Boolean)) };
  }

  /** A JSON `media_chunk`; the item when this was its last chunk. */
  pushChunk(chunk: MediaChunkPayload["media_chunk"]): MediaItem | null {
    const stream = this.#stream(chunk.media_id, chunk.mime_type);
    stream.pieces[chunk.sequence] = fromBase64(chunk.data);
    stream.received += 1;
    return chunk.is_last ? this.#finish(chunk.media_id, stream) : null;
  }

  /**
   * A binary frame of a media stream; the item when it is complete (an
   * unchunked frame is complete by itself; a chunked transfer when all
   * `total_chunks` came or the IsLast one did).
   */
  pushFrame(frame: OmniFrame): MediaItem | null {
    const mime = String(frame.metadata.mime_type ?? "application/octet-stream");
    const chunked = (frame.flags & FLAG_CHUNKED) !== 0;
    const stream = this.#stream(frame.mediaId, mime);
    if (!chunked) {
      stream.pieces.push(frame.payload.slice());
      return this.#finish(frame.mediaId, stream);
    }
    stream.pieces[frame.sequence] = frame.payload.slice();
    stream.received += 1;
    if (typeof frame.metadata.total_chunks === "number") stream.total = frame.metadata.total_chunks;
    const complete = stream.total !== null ? stream.received >= stream.total : (frame.flags & FLAG_IS_LAST) !== 0;
    return complete ? this.#finish(frame.mediaId, stream) : null;
  }

  /** Drops what is half-assembled (a turn ended, a socket was replaced). */
  clear(): void {
    this.#streams.clear();
  }
}
