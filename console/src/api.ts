// The console's one way to the API: the typed client of sdk/ (paths, parameters and answers checked
// by the compiler), on the service the page came from. The sign-in is an HttpOnly cookie the page
// cannot read; CONSOLE_HEADER on every request is what lets the service accept it (docs/console.md).
import createClient from 'openapi-fetch';
import type { paths } from '../../sdk/schema.d.ts';
import { CallplaneError, ok, type ErrorBody } from '../../sdk/index.ts';

export { CallplaneError, ok };

const CONSOLE_HEADER = { 'x-callplane-console': '1' };

export const api = createClient<paths>({ baseUrl: window.location.origin, headers: CONSOLE_HEADER, credentials: 'same-origin' });

/** An answer's message for a person: the API's own (it names the field), or what went wrong on the way. */
export function messageOf(err: unknown): string {
  if (err instanceof CallplaneError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** The console's own routes (its sign-in), outside the API's typed paths. */
export async function consoleRequest<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: { ...CONSOLE_HEADER, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = (await res.json().catch(() => ({ success: false, message: `${res.status} ${res.statusText}` }))) as ErrorBody | T;
  if (!res.ok) throw new CallplaneError(res.status, data as ErrorBody);
  return data as T;
}

/** Unix seconds (the API's times) as a local date and time. */
export function when(seconds: number | string | null | undefined): string {
  if (seconds === null || seconds === undefined || seconds === '') return '—';
  const n = Number(seconds);
  if (!Number.isFinite(n) || n <= 0) return '—';
  return new Date(n * 1000).toLocaleString();
}
