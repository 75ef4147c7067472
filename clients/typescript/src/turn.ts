// A turn as the application sees it: an async iterator of its events, and
// a promise of its result. Events are buffered, so a turn can be iterated
// after it ended; each event is delivered once.
import { AgentwireError } from "./errors.js";

export class Turn<Event, Result> implements AsyncIterable<Event> {
  /** Resolves with the turn's result; rejects with an AgentwireError. */
  readonly result: Promise<Result>;
  #events: Event[] = [];
  #waiters: Array<() => void> = [];
  #settled = false;
  #failure: AgentwireError | null = null;
  #resolve!: (value: Result) => void;
  #reject!: (error: AgentwireError) => void;

  constructor() {
    this.result = new Promise<Result>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A turn whose result nobody awaits must not raise an unhandled rejection.
    this.result.catch(() => {});
  }

  get settled(): boolean {
    return this.#settled;
  }

  /** @internal */
  push(event: Event): void {
    if (this.#settled) return;
    this.#events.push(event);
    this.#wake();
  }

  /** @internal */
  finish(result: Result): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#resolve(result);
    this.#wake();
  }

  /** @internal */
  fail(error: AgentwireError): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#failure = error;
    this.#reject(error);
    this.#wake();
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** The events in order; ends when the turn ends, throws when it failed. */
  async *[Symbol.asyncIterator](): AsyncIterator<Event> {
    let next = 0;
    for (;;) {
      if (next < this.#events.length) {
        yield this.#events[next];
        next += 1;
        continue;
      }
      if (this.#settled) {
        if (this.#failure) throw this.#failure;
        return;
      }
      await new Promise<void>((wake) => this.#waiters.push(wake));
    }
  }
}
