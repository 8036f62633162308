// The phone-number operations as calls of a test harness (test/modules/numbers*.test.ts).
import type { Harness } from './harness.ts';

const PATH = '/api/v2/phoneNumber';

export function numberCalls(h: () => Harness) {
  const post = (path: string, token: string, body: unknown, query: Record<string, unknown> = {}) =>
    h().call('POST', `${PATH}${path}`, { token, body, query });
  return {
    locality: (token: string, body: unknown, query?: Record<string, unknown>) => post('/search/local/locality', token, body, query),
    prefix: (token: string, body: unknown, query?: Record<string, unknown>) => post('/search/local/prefix', token, body, query),
    phrase: (token: string, body: unknown, query?: Record<string, unknown>) => post('/search/local/phrase', token, body, query),
    assign: (token: string, body: unknown, query?: Record<string, unknown>) => post('/assign', token, body, query),
    byo: (token: string, body: unknown, query?: Record<string, unknown>) => post('/byo/assign', token, body, query),
    ret: (token: string, body: unknown, query?: Record<string, unknown>) => post('/return', token, body, query),
    list: (token: string, query: Record<string, unknown> = {}) => h().call('GET', '/api/v2/phoneNumbers', { token, query }),
  };
}
