import { startServer, measure, type Engine } from './lib.ts';
const engine = (process.argv[2] ?? 'sqlite') as Engine;
const role = process.argv[3] ?? 'all';
const dir = process.argv[4] ?? '/tmp/prof';
const server = await startServer(engine, role, { NODE_OPTIONS: `--import /tmp/profhook.mjs`, PROF_DIR: dir });
async function api(method: string, url: string, query: Record<string, unknown>, body?: unknown) {
  const qs = new URLSearchParams({ token: server.token, ...Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])) });
  const res = await fetch(`${server.url}${url}?${qs}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return await res.json() as any;
}
const partner = await api('GET', '/api/v2/account', {});
const reseller = await api('POST', '/api/v2/createReseller', { targetPartnerId: partner.id }, { resellerName: 'R' });
const org = await api('POST', '/api/v2/createOrganization', { targetResellerId: reseller.reseller.id }, { orgName: 'O' });
const token = (await api('POST', '/api/v2/tokens', { targetAccountId: org.organization.id }, { type: 'admin', description: 'b' })).token.token;
const post = `${server.url}/api/v2/tasks?token=${token}`;
await measure(post, { seconds: 2, method: 'POST', body: JSON.stringify({ type: 'ping' }) });
const m = await measure(post, { seconds: 6, method: 'POST', body: JSON.stringify({ type: 'ping' }) });
console.log(engine, role, m.requestsPerSec.toFixed(0), 'req/s');
await server.stop();
