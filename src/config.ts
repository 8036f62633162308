// Reads the environment once at boot, validates it and returns a frozen config.
// Nothing else in the code base reads process.env.
import path from 'node:path';

export type Role = 'api' | 'worker' | 'all';

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** postgres://… when set; otherwise the embedded SQLite file in dataDir. */
  readonly databaseUrl: string | undefined;
  /** Seeds the partner token on the first start; never echoed. */
  readonly adminToken: string | undefined;
  /** 32-byte key for AES-256-GCM encryption of stored provider secrets (base64 or hex). */
  readonly secretKey: string | undefined;
  readonly publicUrl: string;
  readonly logLevel: string;
  readonly bodyLimitBytes: number;
  readonly defaultPlanId: string;
  readonly oneTimeTokenTtlSeconds: number;
  readonly dbPoolSize: number;
}

export class ConfigError extends Error {}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got '${raw}')`);
  }
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql:// (unset it to use the embedded SQLite database)');
  }
  if (databaseUrl) {
    // The URL itself is not echoed: it usually carries a password.
    try {
      new URL(databaseUrl);
    } catch {
      throw new ConfigError('DATABASE_URL is not a valid URL (expected postgres://user:password@host:5432/database)');
    }
  }
  const adminToken = env.CALLPLANE_ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 24) {
    throw new ConfigError('CALLPLANE_ADMIN_TOKEN must be at least 24 characters long');
  }
  const port = int(env, 'PORT', 8080, 0, 65535);
  const host = env.HOST || '0.0.0.0';
  const publicUrl = (env.CALLPLANE_PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  try {
    new URL(publicUrl);
  } catch {
    throw new ConfigError(`CALLPLANE_PUBLIC_URL must be an absolute URL (got '${publicUrl}')`);
  }
  return Object.freeze({
    port,
    host,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl,
    adminToken,
    secretKey: env.CALLPLANE_SECRET_KEY || undefined,
    publicUrl,
    logLevel: env.LOG_LEVEL || 'info',
    bodyLimitBytes: int(env, 'CALLPLANE_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
    defaultPlanId: env.CALLPLANE_DEFAULT_PLAN_ID || 'standard',
    oneTimeTokenTtlSeconds: int(env, 'CALLPLANE_ONE_TIME_TOKEN_TTL_SECONDS', 300, 10, 3600),
    dbPoolSize: int(env, 'CALLPLANE_DB_POOL_SIZE', 10, 1, 200),
  });
}
