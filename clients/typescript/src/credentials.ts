// A connection's credential: a fixed string, or a function the client asks
// again before a JWT expires (sent as `credential_refresh`) and on every
// reconnection. Tokens are never logged or put in error messages.

export type TokenSource = string | (() => string | Promise<string>);

export async function currentToken(source: TokenSource | undefined): Promise<string | null> {
  if (source === undefined) return null;
  const token = typeof source === "function" ? await source() : source;
  return token || null;
}

/** A JWT's `exp` and `iat` in milliseconds, or null for anything else (an API key). */
export function jwtTimes(token: string): { exp: number; iat: number | null } | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(parts[1].length / 4) * 4, "="));
    const claims = JSON.parse(json) as { exp?: unknown; iat?: unknown };
    if (typeof claims.exp !== "number") return null;
    return { exp: claims.exp * 1000, iat: typeof claims.iat === "number" ? claims.iat * 1000 : null };
  } catch {
    return null;
  }
}

/**
 * When to ask for a fresher token: the server closes a connection (4401)
 * at expiry less min(30 s, half the token's life), so the refresh goes
 * before that deadline, with a margin of a quarter of what remains of it
 * (at most 10 s). Null when the token has no expiry.
 */
export function refreshDelay(token: string, now = Date.now()): number | null {
  const times = jwtTimes(token);
  if (!times) return null;
  const life = times.exp - (times.iat ?? now);
  const deadline = times.exp - Math.min(30_000, Math.max(0, life) / 2);
  const margin = Math.min(10_000, Math.max(0, deadline - now) / 4);
  return Math.max(0, deadline - margin - now);
}
