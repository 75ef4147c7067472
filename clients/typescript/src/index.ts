// @agentwire/client: a client for agentwire's WebSocket dialects.
export { OmniaClient } from "./omnia.js";
export type {
  ConnectionState,
  MessageInput,
  OmniaEvents,
  OmniaOptions,
  OmniaTurn,
  OmniaTurnEvent,
  OmniaTurnResult,
} from "./omnia.js";
export { GnosariClient } from "./gnosari.js";
export type { GnosariEvents, GnosariOptions, GnosariSendOptions, GnosariTurn, GnosariTurnEvent, GnosariTurnResult } from "./gnosari.js";
export { Turn } from "./turn.js";
export { AgentwireError, ToolRejection } from "./errors.js";
export { ToolCallHandle } from "./tools.js";
export type { ToolCall, ToolHandler, ToolOutcome } from "./tools.js";
export { PlaybackQueue, VoiceCall, fromPcm16, toPcm16 } from "./voice.js";
export type { AudioFormat, CallState, VoiceCallEvents, VoiceCallOptions } from "./voice.js";
export type { UploadedMedia, UploadReady, UploadSource } from "./upload.js";
export type { MediaItem } from "./media.js";
export { MediaAssembler } from "./media.js";
export { decodeOmniFrame, encodeOmniFrame, FLAG_CHUNKED, FLAG_IS_LAST } from "./omni.js";
export type { OmniFrame } from "./omni.js";
export { backoffDelay, GNOSARI_BACKOFF, OMNIA_BACKOFF } from "./backoff.js";
export type { BackoffOptions } from "./backoff.js";
export { jwtTimes, refreshDelay } from "./credentials.js";
export type { TokenSource } from "./credentials.js";
export type { WebSocketConstructor, WebSocketLike } from "./transport.js";
export type * as Omnia from "./generated/omnia.js";
export type * as Gnosari from "./generated/gnosari.js";
export { ERROR_CODES } from "./generated/omnia.js";
