// The commands that act through the API (tokens, tasks import, agents publish, calls watch) use
// the typed client of sdk/ (@callplane/client) with the service's URL and a token, from
// --url and CALLPLANE_URL, and CALLPLANE_TOKEN, --token-file/CALLPLANE_TOKEN_FILE or --token (which
// shows in the process list: a warning says so). index.js there is the client compiled by
// `npm run sdk:generate`, checked in: the compiled command loads it without a build of its own.
import fs from 'node:fs';
import { createCallplaneClient, type CallplaneClient } from '../../sdk/client.js';
import { UsageError } from './usage.ts';

export const API_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
} as const;

/** Said on stderr when --token is given: its value is in the process list and the shell's history. */
export const TOKEN_FLAG_WARNING = 'callplane: warning: --token on the command line can be read by anyone on this machine (ps, /proc/<pid>/cmdline) '
  + 'and stays in your shell history; set CALLPLANE_TOKEN, or put the token in a file only you can read and pass --token-file FILE (or CALLPLANE_TOKEN_FILE)';

/** The token of a token file: its first line, trimmed. Warns when others may read the file. */
function readTokenFile(file: string, flag: string, warn: (line: string) => void): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
    const { mode } = fs.statSync(file);
    if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
      warn(`callplane: warning: ${file} (${flag}) can be read by other users (mode ${(mode & 0o777).toString(8)}): chmod 600 ${file}`);
    }
  } catch (err) {
    throw new UsageError(`${flag}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const token = text.split(/\r?\n/)[0].trim();
  if (!token) throw new UsageError(`${flag}: ${file} is empty: it must hold the token on its first line`);
  return token;
}

/**
 * The token to act with: --token (with a warning), --token-file, CALLPLANE_TOKEN, CALLPLANE_TOKEN_FILE,
 * in that order.
 */
export function resolveToken(values: { token?: string; 'token-file'?: string }, env: NodeJS.ProcessEnv = process.env,
  warn: (line: string) => void = (line) => console.error(line)): string {
  if (values.token !== undefined && values['token-file'] !== undefined) throw new UsageError('pass --token or --token-file, not both');
  if (values.token !== undefined) {
    warn(TOKEN_FLAG_WARNING);
    return values.token;
  }
  if (values['token-file'] !== undefined) return readTokenFile(values['token-file'], '--token-file', warn);
  if (env.CALLPLANE_TOKEN) return env.CALLPLANE_TOKEN;
  if (env.CALLPLANE_TOKEN_FILE) return readTokenFile(env.CALLPLANE_TOKEN_FILE, 'CALLPLANE_TOKEN_FILE', warn);
  throw new UsageError('a token is missing: set CALLPLANE_TOKEN, or pass --token-file FILE (or set CALLPLANE_TOKEN_FILE)');
}

/** The client for --url (else CALLPLANE_URL) and the token resolveToken finds. */
export function apiClient(values: { url?: string; token?: string; 'token-file'?: string }, env: NodeJS.ProcessEnv = process.env): CallplaneClient {
  const baseUrl = values.url ?? env.CALLPLANE_URL;
  if (!baseUrl) throw new UsageError('the service URL is missing: pass --url http://host:8080 or set CALLPLANE_URL');
  if (!/^https?:\/\/[^/]/i.test(baseUrl)) throw new UsageError(`--url must be an http(s) URL (got '${baseUrl}')`);
  const token = resolveToken(values, env);
  return createCallplaneClient({ baseUrl, token, headers: { 'user-agent': 'callplane-cli' } });
}

/** `--account 12` as targetAccountId (undefined when absent); a bad value is a usage error. */
export function accountId(value: string | undefined, flag = '--account'): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,10}$/.test(value) || Number(value) < 1 || Number(value) > 2147483647) throw new UsageError(`${flag} must be an account id (got '${value}')`);
  return Number(value);
}
