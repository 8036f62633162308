// Tokens (random, shown once, stored as SHA-256) and the sealed box for provider secrets.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const TOKEN_PREFIX = 'cpl_';
/** Characters of a token shown in listings: enough to recognise it, useless to authenticate. */
export const VISIBLE_PREFIX_LENGTH = TOKEN_PREFIX.length + 8;

export function newToken(): string {
  return TOKEN_PREFIX + crypto.randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return crypto.createHash('sha256').update(token, 'utf8').digest('hex');
}

export function tokenPrefix(token: string): string {
  return token.slice(0, VISIBLE_PREFIX_LENGTH);
}

/** Shows only the last four characters of a secret, and those only when it is long enough. */
export function maskSecret(value: string): string {
  return value.length >= 12 ? `****${value.slice(-4)}` : '****';
}

/** AES-256-GCM with a random 96-bit IV per message; the output carries a version tag. */
export class SecretBox {
  readonly #key: Buffer;
  readonly #macKeys = new Map<string, Buffer>();
  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('secret key must be 32 bytes');
    this.#key = key;
  }

  seal(plaintext: string): string {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown sealed-secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = crypto.createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }

  sealJson(value: unknown): string {
    return this.seal(JSON.stringify(value));
  }

  openJson<T>(sealed: string): T {
    return JSON.parse(this.open(sealed)) as T;
  }

  /**
   * HMAC-SHA-256 (base64url) of `data` under a key derived from the secret key for `purpose`
   * alone (HKDF), so a MAC made for one purpose never verifies for another and the secret key
   * itself never signs anything. Every process sharing the key computes the same MAC.
   */
  mac(purpose: string, data: string): string {
    let key = this.#macKeys.get(purpose);
    if (!key) {
      key = Buffer.from(crypto.hkdfSync('sha256', this.#key, Buffer.alloc(0), `callplane:mac:${purpose}`, 32));
      this.#macKeys.set(purpose, key);
    }
    return crypto.createHmac('sha256', key).update(data, 'utf8').digest('base64url');
  }
}

function parseKey(raw: string): Buffer {
  const trimmed = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) throw new Error('CALLPLANE_SECRET_KEY must be 32 bytes, as 64 hex characters or base64');
  return key;
}

/**
 * The key from CALLPLANE_SECRET_KEY; without it, a key file in the data directory,
 * created (mode 0600) on first use. Several machines sharing one PostgreSQL must share the key.
 */
export function loadSecretKey(envKey: string | undefined, dataDir: string): { key: Buffer; source: string } {
  if (envKey) return { key: parseKey(envKey), source: 'CALLPLANE_SECRET_KEY' };
  const file = path.join(dataDir, 'secret-key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true });
    try {
      fs.writeFileSync(file, crypto.randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return { key: parseKey(fs.readFileSync(file, 'utf8')), source: file };
}
