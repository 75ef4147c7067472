/** A minimal typed event emitter (no dependency on Node's `events`). */
export type Listener<T> = (value: T) => void;

export class Emitter<Events extends object> {
  #listeners = new Map<keyof Events, Set<Listener<never>>>();

  /** Calls `listener` for every `event`; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): () => void {
    let set = this.#listeners.get(event);
    if (!set) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as Listener<never>);
    return () => this.off(event, listener);
  }

  /** Calls `listener` for the next `event` only. */
  once<K extends keyof Events>(event: K, listener: Listener<Events[K]>): () => void {
    const off = this.on(event, (value) => {
      off();
      listener(value);
    });
    return off;
  }

  off<K extends keyof Events>(event: K, listener: Listener<Events[K]>): void {
    this.#listeners.get(event)?.delete(listener as Listener<never>);
  }

  /** Whether anything listens for `event`. */
  listens<K extends keyof Events>(event: K): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  protected emit<K extends keyof Events>(event: K, value: Events[K]): void {
    for (const listener of [...(this.#listeners.get(event) ?? [])]) {
      try {
        (listener as Listener<Events[K]>)(value);
      } catch (error) {
        // A listener's failure must not break the connection's frame loop.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
