// A stored secret is bound to the target it is sent to. Secrets are write-only (answers show them
// masked), so a change that would send a kept secret somewhere else must carry the secret again:
// otherwise anyone who may change the target (an organization's token) could point it at their own
// server and receive the secret. Each place that keeps a secret beside a target asks here
// (docs/api.md, "Secrets and their targets").

/**
 * The origin of a URL: scheme, host and port, normalised (lower case, the scheme's default port
 * left out, as WHATWG URL writes it), e.g. `https://api.example.com` or `http://10.0.0.5:8080`.
 * A path, query or fragment is not part of it. Null when there is no URL or it does not parse.
 */
export function urlOrigin(url: string | null | undefined): string | null {
  if (typeof url !== 'string' || url.trim() === '') return null;
  try {
    const u = new URL(url.trim());
    return `${u.protocol}//${u.host}`.toLowerCase();
  } catch {
    return null;
  }
}

/** The origin of a SIP target: transport, host and port (`udp:pbx.example.com:5060`), lower case. */
export function sipOrigin(target: { transport: string; host: string; port: number }): string {
  return `${target.transport}:${target.host}:${target.port}`.toLowerCase();
}

export interface SecretTarget {
  /** The secret as the contract spells it (`apiKey`, `config.authToken`, `password`). */
  secret: string;
  /** Its target as the contract spells it (`baseUrl`, `config.apiBaseUrl`, `proxy`). */
  target: string;
  /** The stored target's origin (urlOrigin, sipOrigin; null: none). */
  before: string | null;
  /** The origin the change would send the secret to. */
  after: string | null;
  /** True when a secret is stored and the change keeps it (the secret was neither sent nor removed). */
  keeps: boolean;
}

/**
 * Why the change is refused — a kept secret would go to another origin — or null when it may be
 * made: the origin is unchanged (a path changed, say), no secret is kept, or the secret was sent
 * again or removed with it. The caller answers 400 with this message.
 */
export function secretTargetRefusal(s: SecretTarget): string | null {
  if (!s.keeps || s.before === s.after) return null;
  const from = s.before ?? 'none';
  const to = s.after ?? 'none';
  return `${s.secret} is required when ${s.target} changes its origin (${from} to ${to}): a stored secret is sent only where it was given for; send it again, or remove it`;
}
