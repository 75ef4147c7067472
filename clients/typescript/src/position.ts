// Where a `stream=2` client stands in its session's log: the epoch and the
// last `seq` delivered. One log entry can produce more than one frame with
// the same `seq` (Gnosari's `stream_info` and `agent_started`; a reply's
// last `token` and its `agent_completed`), so a frame is new when its seq
// is higher, or equal with a type not yet delivered at that seq.
export class LogPosition {
  epoch: string | null = null;
  lastSeq = 0;
  #typesAtLast = new Set<string>();

  /** Whether the frame is new (and records it); false for one delivered already. */
  accept(seq: number, type: string): boolean {
    if (seq < this.lastSeq) return false;
    if (seq === this.lastSeq) {
      if (this.#typesAtLast.has(type)) return false;
      this.#typesAtLast.add(type);
      return true;
    }
    this.lastSeq = seq;
    this.#typesAtLast = new Set([type]);
    return true;
  }

  /** A log of another epoch: positions start again. */
  reset(epoch: string | null): void {
    this.epoch = epoch;
    this.lastSeq = 0;
    this.#typesAtLast.clear();
  }
}
