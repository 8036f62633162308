// The commands that act through the API (tokens, tasks import, agents publish, calls watch) use
// the typed client of sdk/ (@callplane/client) with the service's URL and a token, from
// --url/--token or CALLPLANE_URL/CALLPLANE_TOKEN. index.js there is the client compiled by
// `npm run sdk:generate`, checked in: the compiled command loads it without a build of its own.
import { createCallplaneClient, type CallplaneClient } from '../../sdk/client.js';
import { UsageError } from './usage.ts';

export const API_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
} as const;

/** The client for --url/--token (else CALLPLANE_URL/CALLPLANE_TOKEN). */
export function apiClient(values: { url?: string; token?: string }, env: NodeJS.ProcessEnv = process.env): CallplaneClient {
  const baseUrl = values.url ?? env.CALLPLANE_URL;
  const token = values.token ?? env.CALLPLANE_TOKEN;
  if (!baseUrl) throw new UsageError('the service URL is missing: pass --url http://host:8080 or set CALLPLANE_URL');
  if (!/^https?:\/\/[^/]/i.test(baseUrl)) throw new UsageError(`--url must be an http(s) URL (got '${baseUrl}')`);
  if (!token) throw new UsageError('a token is missing: pass --token cpl_… or set CALLPLANE_TOKEN');
  return createCallplaneClient({ baseUrl, token, headers: { 'user-agent': 'callplane-cli' } });
}

/** `--account 12` as targetAccountId (undefined when absent); a bad value is a usage error. */
export function accountId(value: string | undefined, flag = '--account'): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,10}$/.test(value) || Number(value) < 1 || Number(value) > 2147483647) throw new UsageError(`${flag} must be an account id (got '${value}')`);
  return Number(value);
}
