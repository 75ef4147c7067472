/** How a client waits between reconnection attempts. */
export interface BackoffOptions {
  /** The first wait, in milliseconds. */
  initialMs?: number;
  /** The longest wait. */
  maxMs?: number;
  /** Attempts before giving up. */
  attempts?: number;
  /** Each wait is drawn from [(1 - jitter) * d, d]; 0 for none. */
  jitter?: number;
}

export const OMNIA_BACKOFF: Required<BackoffOptions> = { initialMs: 150, maxMs: 5000, attempts: 8, jitter: 0.5 };

/**
 * The Gnosari contract's reconnection strategy: 1 s × 2^attempt, at most
 * 30 s, five attempts, counted afresh after a successful connection.
 */
export const GNOSARI_BACKOFF: Required<BackoffOptions> = { initialMs: 2000, maxMs: 30000, attempts: 5, jitter: 0.3 };

/** The wait before attempt `attempt` (0-based), or null when there is none left. */
export function backoffDelay(options: Required<BackoffOptions>, attempt: number, random = Math.random): number | null {
  if (attempt >= options.attempts) return null;
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** attempt);
  return Math.round(ceiling * (1 - options.jitter * random()));
}
