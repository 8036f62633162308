// Bad input to every SIP route never becomes a 5xx (502 is the registration's own answer when no
// worker takes it, which is all a valid body can get here): odd strings, numbers, objects and
// arrays in every field, on both engines (PostgreSQL's bigint and text columns refuse more than
// SQLite does). Found the 500 a fractional captures bound gave on PostgreSQL.
// @engines sqlite
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';

const values: unknown[] = ['', ' ', 'a', 'sip:', 'sip:@', 'sip:a@', 'sip:a@b', 'sip:a@[::1]', 'sip:a@[::1]:99999', '[::1', '1.2.3.4:', ':5060', '1.2.3.4;transport', ';', ';;', 'x;proxyAddress=', 'x;proxyAddress=[', 'x;proxyAddress=a:b', 'é@ü.com', 'a@b@c', '\u202e', 'x'.repeat(600), 5, -1, 1.5, 1e308, null, true, [], {}, ['a'], { a: 1 }, '10.0.0.0/', '/8', '::/0', '0.0.0.0/0', '::ffff:1.2.3.4/120', '::ffff:1.2.3.4/10', '1.2.3.4/33', '1.2.3.4/-1', 'sips:a@b', 'tel:1', 'SIP:A@B', 'a:b@c', '%zz@h', '%41@h', 'a@h:0', 'a@h:65536', 'a@-h', 'a@h.', 'a@.h', 'a@1.2.3', 'a@999.1.1.1', 'udp', 'TLS', 'tls ', 'Tcp'];
const fields = ['aor', 'username', 'authUsername', 'password', 'sipRealm', 'proxy', 'port', 'transport', 'subscribe'];

forEachEngine('SIP API with odd input', (h) => {
  it('never answers 5xx for bad input on any SIP route', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const bad: string[] = [];
    const check = async (m: string, p: string, opts: any) => {
      const res = await h().call(m, `/api/v2/sip/${p}`, { token: o.token, ...opts });
      if (res.status >= 500 && res.status !== 502) bad.push(`${m} ${p} ${JSON.stringify(opts)} -> ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status === 502 && p !== 'registration') bad.push(`${m} ${p} 502`);
      return res;
    };
    // Each value in every field at once (a valid registration body waits a moment for a worker that never comes).
    await Promise.all(values.map(async (v) => {
      await Promise.all(fields.map((f) => check('POST', 'registration', { body: { aor: 'sip:1@pbx.example.com', password: 'x', [f]: v } })));
      await check('POST', 'registration/available', { body: { aor: v } });
      await check('POST', 'registration/available', { body: { username: v, sipRealm: 'x.com' } });
      await check('POST', 'registration/available', { body: { username: 'a', sipRealm: v } });
      await check('POST', 'ipWhitelist', { body: { ip: v, label: 'x' } });
      await check('POST', 'ipWhitelist', { body: { ip: '1.2.3.4', label: v } });
      await check('DELETE', 'ipWhitelist', { body: { ip: v } });
      await check('POST', 'outboundRoutes', { body: { route: v } });
      await check('DELETE', 'outboundRoutes', { body: { route: v } });
      if (typeof v !== 'object') {
        await check('GET', 'captures', { query: { sipCallId: v } });
        await check('GET', 'captures', { query: { sipCallId: 'x', format: v } });
        await check('GET', 'captures', { query: { sipCallId: 'x', from: v } });
        await check('GET', 'captures/calls', { query: { limit: v } });
      }
    }));
    await check('POST', 'registration', { payload: 'not json', headers: { 'content-type': 'application/json' } });
    await check('POST', 'registration', { payload: '[]', headers: { 'content-type': 'application/json' } });
    await check('DELETE', 'ipWhitelist', {});
    await check('GET', 'captures', { query: { sipCallId: 'x', from: 5, to: 1 } });
    assert.deepEqual(bad, []);
  });
}, {}, { sipWorkerWaitMs: 1 });
