// Uploads (Omnia): `upload_request` is answered by `upload_ready` (in the
// order asked), then the bytes go to `upload_url` over HTTP and the
// `storage_ref` names them in a message part. The local backend's URL is
// the server's `/media/upload/{id}`; any other (a presigned S3 URL) is a
// direct upload, confirmed with `POST /media/confirm-upload/{id}`.
import { AgentwireError } from "./errors.js";
import type { ClientFrame, ContentPart, UploadReadyPayload } from "./generated/omnia.js";

export type UploadReady = UploadReadyPayload["upload_ready"];
/** What can be uploaded: bytes, or a Blob/File (browsers). */
export type UploadSource = Uint8Array | ArrayBuffer | Blob;

export interface UploadedMedia {
  storage_ref: string;
  upload_id: string;
  /** A message part naming the upload. */
  part: ContentPart;
}

const READY_TIMEOUT_MS = 10_000;

interface UploadDeps {
  send(frame: ClientFrame): void;
  fetch?: typeof fetch;
  token(): string | null;
  /** The server's HTTP base (`http://host:port`). */
  httpBase(): string;
}

interface Waiter {
  resolve(ready: UploadReady): void;
  reject(error: AgentwireError): void;
  timer: ReturnType<typeof setTimeout>;
}

export function partKind(mime: string): ContentPart["type"] {
  const top = mime.split("/")[0];
  return top === "image" || top === "audio" || top === "video" ? top : "file";
}

export class Uploads {
  #waiters: Waiter[] = [];
  #deps: UploadDeps;

  constructor(deps: UploadDeps) {
    this.#deps = deps;
  }

  async upload(data: UploadSource, file: { filename: string; mime_type: string }, onProgress?: (fraction: number) => void): Promise<UploadedMedia> {
    const size = data instanceof Uint8Array || data instanceof ArrayBuffer ? data.byteLength : data.size;
    const ready = await this.#request({ filename: file.filename, mime_type: file.mime_type, size_bytes: size });
    const headers: Record<string, string> = { ...(ready.headers ?? {}) };
    const token = this.#deps.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    const body = data instanceof Uint8Array ? data : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    onProgress?.(0);
    const status = await this.#put(ready.upload_url, ready.method ?? "PUT", headers, body, onProgress);
    if (status < 200 || status > 299) {
      throw new AgentwireError("UPLOAD_FAILED", `the upload was answered ${status}`);
    }
    if (new URL(ready.upload_url).pathname !== `/media/upload/${encodeURIComponent(ready.upload_id)}`) {
      // A direct (presigned) upload: the server records it once confirmed.
      const confirm = new URL(`/media/confirm-upload/${encodeURIComponent(ready.upload_id)}`, this.#deps.httpBase());
      const doFetch = this.#deps.fetch ?? globalThis.fetch;
      const response = await doFetch(confirm, { method: "POST", headers: token ? { Authorization: `Bearer ${token}` } : {} });
      if (!response.ok) throw new AgentwireError("UPLOAD_FAILED", `the upload's confirmation was answered ${response.status}`);
    }
    onProgress?.(1);
    return {
      storage_ref: ready.storage_ref,
      upload_id: ready.upload_id,
      part: {
        type: partKind(file.mime_type),
        media: { storage_ref: ready.storage_ref, mime_type: file.mime_type, filename: file.filename, size_bytes: size },
      },
    };
  }

  /** The HTTP upload: XMLHttpRequest in a browser (progress as bytes leave), else fetch. Resolves with the status. */
  #put(url: string, method: string, headers: Record<string, string>, body: Uint8Array | Blob, onProgress?: (f: number) => void): Promise<number> {
    const XHR = (globalThis as { XMLHttpRequest?: typeof XMLHttpRequest }).XMLHttpRequest;
    if (XHR && !this.#deps.fetch) {
      return new Promise((resolve, reject) => {
        const xhr = new XHR();
        xhr.open(method, url);
        for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
        xhr.upload.addEventListener("progress", (event) => {
          if (event.lengthComputable) onProgress?.(event.loaded / event.total);
        });
        xhr.addEventListener("load", () => resolve(xhr.status));
        xhr.addEventListener("error", () => reject(new AgentwireError("UPLOAD_FAILED", "the upload failed (network)")));
        xhr.send(body as XMLHttpRequestBodyInit);
      });
    }
    const doFetch = this.#deps.fetch ?? globalThis.fetch;
    return doFetch(url, { method, headers, body: body as BodyInit }).then((response) => response.status);
  }

  #request(request: { filename: string; mime_type: string; size_bytes: number }): Promise<UploadReady> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          const at = this.#waiters.indexOf(waiter);
          if (at >= 0) this.#waiters.splice(at, 1);
          reject(new AgentwireError("TIMEOUT", "the server did not answer the upload request"));
        }, READY_TIMEOUT_MS),
      };
      this.#waiters.push(waiter);
      this.#deps.send({ type: "upload_request", upload_request: request });
    });
  }

  /** @internal */
  ready(ready: UploadReady): void {
    const waiter = this.#waiters.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.resolve(ready);
  }

  /** Whether an error (without `seq`) answers an upload request. */
  takesError(code: string, message: string): boolean {
    if (!this.#waiters.length) return false;
    return (
      code === "UPLOAD_FAILED" ||
      (code === "MEDIA_NOT_ENABLED" && /storage/.test(message)) ||
      (code === "RATE_LIMITED" && /upload/.test(message)) ||
      (code === "INVALID_MESSAGE" && /upload_request|filename|mime_type|size_bytes/.test(message))
    );
  }

  /** @internal */
  fail(error: AgentwireError): void {
    const waiter = this.#waiters.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.reject(error);
  }

  failAll(error: AgentwireError): void {
    while (this.#waiters.length) this.fail(error);
  }
}
