// Calls over SIP end to end: `call` tasks of an organization with outbound routes are run by the
// harness's worker through its SIP runtime (127.0.0.1) to sipp as the far end (127.0.0.5), and their
// outcomes become task states; captures are served per Call-ID. Inbound INVITEs come from sipp as a
// caller on 127.0.0.6 and are refused with 403 unless the address is on the organization's whitelist.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { verifyAuthorization } from '../../src/sip/digest.ts';
import { newCallId, newTag, SipEndpoint } from '../../src/sip/endpoint.ts';
import { parseMessage, SipHeaders } from '../../src/sip/message.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { freePort, peersSkip, sippFlow, startSipp, waitFor, type Sipp } from '../helpers/sip-peers.ts';
import { within } from '../helpers/wait.ts';

const FAR_END = '127.0.0.5';
const CALLER = '127.0.0.6';
const FINAL = ['finished', 'failed', 'canceled'];

const exitOf = (sipp: Sipp, ms = 10_000) => within(sipp.exited, ms, () => 'still running');

describe('calls over SIP', { skip: peersSkip(['sipp']) }, () => {
  forEachEngine('SIP calls', (h) => {
    async function org() {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      return { r, o };
    }
    const addRoute = async (token: string, route: string) => {
      const res = await h().call('POST', '/api/v2/sip/outboundRoutes', { token, body: { route } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    };
    async function runTask(token: string, body: Record<string, unknown> = {}) {
      const created = await h().call('POST', '/api/v2/tasks', { token, body: { type: 'call', target: '+14155552671', ...body } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return waitFor('the task to end', async () => {
        const t = await h().call('GET', `/api/v2/tasks/${created.body.task.id}`, { token });
        return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
      }, 20_000);
    }
    const captures = (token: string, sipCallId: string, format?: string) =>
      h().call('GET', '/api/v2/sip/captures', { token, query: { sipCallId, ...(format ? { format } : {}) } });

    for (const transport of ['udp', 'tcp'] as const) {
      it(`places a call task over a ${transport} route: INVITE, 180, 200, ACK, BYE after CALLPLANE_CALL_MAX_SECONDS; finished completed, Call-ID as providerRef, messages in the captures`, async () => {
        const { o } = await org();
        const sipp = await startSipp({ host: FAR_END, transport: transport === 'tcp' ? 'TCP' : 'UDP' });
        try {
          await addRoute(o.token, `${FAR_END}:${sipp.port};transport=${transport}`);
          const started = Date.now();
          const task = await runTask(o.token);
          assert.equal(task.state, 'finished', JSON.stringify(task));
          assert.equal(task.provider, 'sip');
          assert.equal(task.result.outcome, 'completed');
          assert.equal(task.result.sipStatus, 200);
          assert.equal(task.result.endedBy, 'local');
          assert.ok(Date.now() - started >= 1000, 'held for the maximum call length');
          assert.equal(task.result.durationSeconds, 1, 'and no longer: sipp never hangs up, we did');
          assert.equal(await exitOf(sipp), 0, sipp.output());
          assert.deepEqual(sippFlow(sipp), ['> INVITE', '< 180', '< 200', '> ACK', '> BYE', '< 200']);

          const callId = task.providerRef;
          assert.match(callId, /@/);
          const invite = parseMessage(Buffer.from(sipp.messages().split(/-{47} [^\n]*\n/).find((p) => /message received/.test(p))!.replace(/^[^\n]*\n\n/, '')));
          assert.equal(invite.headers.get('call-id'), callId);
          assert.equal(invite.kind === 'request' && invite.uri, `sip:+14155552671@${FAR_END}:${sipp.port}${transport === 'tcp' ? ';transport=tcp' : ''}`);

          const json = await waitFor('the captured call', async () => {
            const c = await captures(o.token, callId);
            return c.status === 200 && c.body.captures.length >= 6 ? c : undefined;
          });
          assert.deepEqual(json.body.captures.map((c: any) => `${c.direction} ${c.message.split('\r\n')[0].replace(/ sip:\S+/, '').replace(/ SIP\/2\.0$/, '')}`), [
            'out INVITE', 'in SIP/2.0 180 Ringing', 'in SIP/2.0 200 OK', 'out ACK', 'out BYE', 'in SIP/2.0 200 OK',
          ]);
          assert.ok(json.body.captures.every((c: any) => c.transport === transport.toUpperCase()));
          const text = await captures(o.token, callId, 'text');
          assert.match(text.body, /INVITE sip:\+14155552671@/);
          // Another organization does not see them.
          const other = await org();
          assert.equal((await captures(other.o.token, callId)).status, 404);
        } finally {
          await sipp.stop();
        }
      });
    }

    it('maps busy (486), declined (603) and unanswered calls (CANCEL after CALLPLANE_SIP_RING_SECONDS) to finished outcomes', async () => {
      const cases: Array<[string, Record<string, string> | undefined, string, string[]]> = [
        ['uas-reject.xml', { status: '486', reason: 'Busy Here' }, 'busy', ['> INVITE', '< 486', '> ACK']],
        ['uas-reject.xml', { status: '603', reason: 'Decline' }, 'declined', ['> INVITE', '< 603', '> ACK']],
        ['uas-no-answer.xml', undefined, 'no-answer', ['> INVITE', '< 180', '> CANCEL', '< 200', '< 487', '> ACK']],
      ];
      for (const [scenario, vars, outcome, flow] of cases) {
        const { o } = await org();
        const sipp = await startSipp({ host: FAR_END, scenario, vars });
        try {
          await addRoute(o.token, `${FAR_END}:${sipp.port}`);
          const task = await runTask(o.token);
          assert.deepEqual([task.state, task.result.outcome], ['finished', outcome], JSON.stringify(task));
          assert.equal(task.error, null);
          assert.equal(await exitOf(sipp), 0, sipp.output());
          assert.deepEqual(sippFlow(sipp), flow);
        } finally {
          await sipp.stop();
        }
      }
    });

    it('fails a call the far end refuses otherwise, naming the SIP status', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-reject.xml', vars: { status: '404', reason: 'Not Found' } });
      try {
        await addRoute(o.token, `${FAR_END}:${sipp.port}`);
        const task = await runTask(o.token);
        assert.equal(task.state, 'failed');
        assert.match(task.error, /404 Not Found/);
        assert.deepEqual([task.result.outcome, task.result.sipStatus], ['failed', 404]);
      } finally {
        await sipp.stop();
      }
    });

    it('tries the next route when one cannot be reached', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END });
      try {
        const dead = await freePort(FAR_END);
        await addRoute(o.token, `${FAR_END}:${dead};transport=tcp`);
        await addRoute(o.token, `${FAR_END}:${sipp.port}`);
        const task = await runTask(o.token);
        assert.deepEqual([task.state, task.result.outcome, task.result.route], ['finished', 'completed', `${FAR_END}:${sipp.port}`], JSON.stringify(task));
      } finally {
        await sipp.stop();
      }
    });

    /** A registration owned by another (live) worker: only its credentials matter here. */
    const registration = async (orgId: number, extra: { proxy?: string; challenge_realm?: string } = {}) => {
      const now = Date.now();
      await h().database.db.insertInto('sip_registrations').values({
        org_id: orgId, aor: 'sip:bob@pbx.callplane.test', aor_key: `sip:bob-${orgId}-${h().engine}@pbx.callplane.test`, username: 'bob', password: h().box.seal('b0bpw'),
        transport: 'UDP', lease_owner: 'another-worker', lease_expires_at: now + 3600_000, created_at: now, updated_at: now, ...extra,
      }).execute();
    };
    const invitesOf = async (token: string, callId: string, n: number) => {
      const caps = await waitFor('captures', async () => {
        const c = await captures(token, callId);
        return c.status === 200 && c.body.captures.filter((m: any) => m.message.startsWith('INVITE')).length >= n ? c : undefined;
      });
      return caps.body.captures.filter((m: any) => m.message.startsWith('INVITE')).map((m: any) => parseMessage(Buffer.from(m.message)));
    };

    it('answers a proxy\'s 407 with the registration\'s credentials when the route\'s proxy is the registrar, sending through proxyAddress', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-proxy-auth.xml' });
      try {
        // The registration REGISTERs through the proxy the route sends to: that host may have its password.
        await registration(o.id, { proxy: `${FAR_END}:${sipp.port}` });
        await addRoute(o.token, `pbx.callplane.test;proxyAddress=${FAR_END}:${sipp.port}`);
        const task = await runTask(o.token);
        assert.deepEqual([task.state, task.result.outcome], ['finished', 'completed'], JSON.stringify(task));
        const caps = await waitFor('captures', async () => {
          const c = await captures(o.token, task.providerRef);
          return c.status === 200 && c.body.captures.filter((m: any) => m.message.startsWith('INVITE')).length === 2 ? c : undefined;
        });
        const invites = caps.body.captures.filter((m: any) => m.message.startsWith('INVITE')).map((m: any) => parseMessage(Buffer.from(m.message)));
        assert.equal(invites[0].headers.has('proxy-authorization'), false);
        assert.equal(verifyAuthorization(invites[1].headers.get('proxy-authorization'), { username: 'bob', password: 'b0bpw' }, 'INVITE'), true);
        assert.equal(invites[1].headers.get('route'), `<sip:${FAR_END}:${sipp.port};lr>`);
        assert.match(invites[1].headers.get('from'), /<sip:bob@pbx\.callplane\.test>/);
      } finally {
        await sipp.stop();
      }
    });

    it('never answers a challenge from a route\'s next hop that is not the registrar with the registration\'s password', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-proxy-auth.xml' });
      try {
        // The registrar is pbx.callplane.test; the route goes to another host, which challenges with a realm of its choosing.
        await registration(o.id);
        await addRoute(o.token, `${FAR_END}:${sipp.port}`);
        const task = await runTask(o.token);
        assert.deepEqual([task.state, task.result.sipStatus], ['failed', 407], JSON.stringify(task));
        const invites = await invitesOf(o.token, task.providerRef, 1);
        await new Promise((r) => setTimeout(r, 500));
        const all = await invitesOf(o.token, task.providerRef, 1);
        assert.equal(all.length, 1, 'one INVITE: the challenge was not answered');
        assert.equal(invites[0].headers.has('proxy-authorization'), false);
        assert.equal(invites[0].headers.has('authorization'), false);
      } finally {
        await sipp.stop();
      }
    });

    it('answers the registrar\'s challenge of another realm than the one it registered us in with nothing', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-proxy-auth.xml' });
      try {
        // The registrar's host, but it challenged the REGISTER in realm pbx.realm: sipp.test is not it.
        await registration(o.id, { proxy: `${FAR_END}:${sipp.port}`, challenge_realm: 'pbx.realm' });
        await addRoute(o.token, `${FAR_END}:${sipp.port}`);
        const task = await runTask(o.token);
        assert.deepEqual([task.state, task.result.sipStatus], ['failed', 407], JSON.stringify(task));
        const invites = await invitesOf(o.token, task.providerRef, 1);
        assert.equal(invites.length, 1);
        assert.equal(invites[0].headers.has('proxy-authorization'), false);
      } finally {
        await sipp.stop();
      }
    });

    it('answers a route\'s challenge with the route\'s own credentials (sealed, shown masked), never the registration\'s', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END, scenario: 'uas-proxy-auth.xml' });
      try {
        await registration(o.id);
        const route = `${FAR_END}:${sipp.port}`;
        const bad = await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route, username: 'trunk' } });
        assert.equal(bad.status, 400);
        assert.deepEqual([bad.body.success, /password/.test(bad.body.message)], [false, true], bad.body.message);
        const added = await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route, username: 'trunk', password: 'tr0nk-secret-pw' } });
        assert.equal(added.status, 201, JSON.stringify(added.body));
        assert.deepEqual(added.body.routeCredentials, [{ route, username: 'trunk', password: '****t-pw' }]);
        assert.doesNotMatch(JSON.stringify((await h().call('GET', '/api/v2/sip/outboundRoutes', { token: o.token })).body), /tr0nk-secret/);
        const stored = await h().database.db.selectFrom('sip_outbound_routes').select('password').where('org_id', '=', o.id).executeTakeFirstOrThrow();
        assert.doesNotMatch(stored.password!, /tr0nk/, 'sealed at rest');
        const task = await runTask(o.token);
        assert.deepEqual([task.state, task.result.outcome], ['finished', 'completed'], JSON.stringify(task));
        const invites = await invitesOf(o.token, task.providerRef, 2);
        const answer = invites[1].headers.get('proxy-authorization');
        assert.equal(verifyAuthorization(answer, { username: 'trunk', password: 'tr0nk-secret-pw' }, 'INVITE'), true);
        assert.equal(verifyAuthorization(answer.replace('"trunk"', '"bob"'), { username: 'bob', password: 'b0bpw' }, 'INVITE'), false);
        // Sent again for the same route, credentials replace its own (200).
        const replaced = await h().call('POST', '/api/v2/sip/outboundRoutes', { token: o.token, body: { route, username: 'trunk2', password: 'another-secret-pw' } });
        assert.deepEqual([replaced.status, replaced.body.message, replaced.body.routeCredentials[0].username], [200, 'Route credentials updated', 'trunk2']);
      } finally {
        await sipp.stop();
      }
    });

    it('keeps texts on the organization\'s carrier: an outbound route is for calls', async () => {
      const { o } = await org();
      await addRoute(o.token, `${FAR_END}:5099`);
      const created = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'text', target: '+14155552671', content: 'hi' } });
      const task = await waitFor('the text', async () => {
        const t = await h().call('GET', `/api/v2/tasks/${created.body.task.id}`, { token: o.token });
        return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
      });
      assert.deepEqual([task.state, task.provider], ['finished', 'simulated']);
    });

    it('ends a call canceled through the API: BYE, task canceled', async () => {
      const { o } = await org();
      const sipp = await startSipp({ host: FAR_END });
      try {
        await addRoute(o.token, `${FAR_END}:${sipp.port}`);
        const created = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'call', target: '+14155552671' } });
        const id = created.body.task.id;
        await waitFor('the call to be answered', () => sippFlow(sipp).includes('> ACK'));
        const cancel = await h().call('POST', `/api/v2/tasks/${id}`, { token: o.token, body: { state: 'canceled' } });
        assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
        const task = await waitFor('the task to end', async () => {
          const t = await h().call('GET', `/api/v2/tasks/${id}`, { token: o.token });
          return FINAL.includes(t.body.task.state) ? t.body.task : undefined;
        });
        assert.equal(task.state, 'canceled', JSON.stringify(task));
        assert.equal(await exitOf(sipp), 0, sipp.output());
        assert.deepEqual(sippFlow(sipp), ['> INVITE', '< 180', '< 200', '> ACK', '> BYE', '< 200']);
      } finally {
        await sipp.stop();
      }
    });

    describe('inbound INVITEs', () => {
      const ourUri = (user: string) => `sip:${user}@127.0.0.1:${h().sip!.endpoint!.port}`;
      const dial = (scenario: string, to: string) =>
        startSipp({ host: CALLER, scenario, vars: { to }, extra: [`127.0.0.1:${h().sip!.endpoint!.port}`] });

      it('refuses an INVITE from an address no organization whitelisted with 403, and answers OPTIONS', async () => {
        const sipp = await dial('uac-forbidden.xml', ourUri('1001'));
        try {
          assert.equal(await exitOf(sipp), 0, sipp.output());
          assert.deepEqual(sippFlow(sipp), ['< INVITE', '> 403', '< ACK']);
        } finally {
          await sipp.stop();
        }
        // OPTIONS (a PBX's keep-alive probe) is answered whoever asks.
        const probe = new SipEndpoint({ host: CALLER, port: 0 });
        await probe.start();
        try {
          const headers = new SipHeaders([['From', `<sip:probe@${CALLER}>;tag=${newTag()}`], ['To', `<${ourUri('1001')}>`], ['Call-ID', newCallId()], ['CSeq', '1 OPTIONS']]);
          const res = await probe.request({ kind: 'request', method: 'OPTIONS', uri: ourUri('1001'), headers, body: Buffer.alloc(0) },
            { transport: 'UDP', host: '127.0.0.1', port: h().sip!.endpoint!.port }, { timeoutMs: 5000 });
          assert.equal(res.status, 200);
          assert.match(res.headers.get('allow')!, /INVITE/);
        } finally {
          await probe.stop();
        }
      });

      /** A registration naming the organization's AOR and user, owned by another (live) worker so none REGISTERs it here. */
      const registration = async (orgId: number, user: string) => {
        const now = Date.now();
        const aor = `sip:${user}@pbx.callplane.test`;
        await h().database.db.insertInto('sip_registrations').values({
          org_id: orgId, aor, aor_key: aor, username: user, password: h().box.seal('x'),
          transport: 'UDP', lease_owner: 'another-worker', lease_expires_at: now + 3600_000, created_at: now, updated_at: now,
        }).execute();
        return aor;
      };

      it('answers an INVITE from an address on the organization\'s whitelist, holds it until the caller\'s BYE, and captures it for that organization', async () => {
        const a = await org();
        const b = await org();
        // The calls are for a's user (its registration's, called at our Contact)…
        await registration(a.o.id, `reception-${h().engine}`);
        // …but another organization's registration names the AOR called here: the whitelist that counts is its own.
        const aor = await registration(b.o.id, `front-${h().engine}`);
        assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: a.o.token, body: { ip: `${CALLER}/32`, label: 'PBX' } })).status, 201);

        const refused = await dial('uac-forbidden.xml', aor);
        try {
          assert.equal(await exitOf(refused), 0, refused.output());
        } finally {
          await refused.stop();
        }

        const answered = await dial('uac-call.xml', ourUri(`reception-${h().engine}`));
        let callId: string;
        try {
          assert.equal(await exitOf(answered), 0, answered.output());
          assert.deepEqual(sippFlow(answered), ['< INVITE', '> 100', '> 200', '< ACK', '< BYE', '> 200']);
          const invite = parseMessage(Buffer.from(answered.messages().split(/-{47} [^\n]*\n/).find((p) => /message sent/.test(p))!.replace(/^[^\n]*\n\n/, '')));
          callId = invite.headers.get('call-id')!;
        } finally {
          await answered.stop();
        }
        const caps = await waitFor('the inbound call\'s captures', async () => {
          const c = await captures(a.o.token, callId);
          return c.status === 200 && c.body.captures.length >= 6 ? c : undefined;
        });
        // The start line's method, or a response's status: 100 Trying goes out while the agent gets ready.
        const startLine = (m: string) => (m.startsWith('SIP/2.0') ? m.split(' ')[1] : m.split(' ')[0]);
        assert.deepEqual(caps.body.captures.map((c: any) => `${c.direction} ${startLine(c.message)}`).slice(0, 6),
          ['in INVITE', 'out 100', 'out 200', 'in ACK', 'in BYE', 'out 200']);
        assert.match(caps.body.captures[2].message, /^SIP\/2\.0 200 OK\r\n[\s\S]*Content-Type: application\/sdp/);
        assert.equal((await captures(b.o.token, callId)).status, 404);

        // Off the whitelist again: refused.
        assert.equal((await h().call('DELETE', '/api/v2/sip/ipWhitelist', { token: a.o.token, body: { ip: CALLER } })).status, 200);
        const again = await dial('uac-forbidden.xml', ourUri(`reception-${h().engine}`));
        try {
          assert.equal(await exitOf(again), 0, again.output());
        } finally {
          await again.stop();
        }
      });

      it('answers a call that arrives through a registration for its organization, though another registers the same user and whitelists the same trunk', async () => {
        const a = await org();
        const b = await org();
        const user = `shared-${h().engine}`;
        // a registers through its PBX (the caller's address); b registers the same user elsewhere…
        const now = Date.now();
        for (const [orgId, aor, proxy] of [[a.o.id, `sip:${user}@pbx-a.callplane.test`, CALLER], [b.o.id, `sip:${user}@pbx-b.callplane.test`, null]] as const) {
          await h().database.db.insertInto('sip_registrations').values({
            org_id: orgId, aor, aor_key: aor, username: user, password: h().box.seal('x'), proxy,
            transport: 'UDP', lease_owner: 'another-worker', lease_expires_at: now + 3600_000, created_at: now, updated_at: now,
          }).execute();
        }
        // …and both whitelist a's trunk address.
        for (const t of [a.o.token, b.o.token]) {
          assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: t, body: { ip: CALLER, label: 'PBX' } })).status, 201);
        }
        const answered = await dial('uac-call.xml', ourUri(user));
        let callId: string;
        try {
          assert.equal(await exitOf(answered), 0, answered.output());
          assert.deepEqual(sippFlow(answered), ['< INVITE', '> 100', '> 200', '< ACK', '< BYE', '> 200']);
          const invite = parseMessage(Buffer.from(answered.messages().split(/-{47} [^\n]*\n/).find((p) => /message sent/.test(p))!.replace(/^[^\n]*\n\n/, '')));
          callId = invite.headers.get('call-id')!;
        } finally {
          await answered.stop();
        }
        await waitFor('the call captured for a', async () => {
          const c = await captures(a.o.token, callId);
          return c.status === 200 && c.body.captures.length >= 3 ? c : undefined;
        });
        assert.equal((await captures(b.o.token, callId)).status, 404);
      });

      it('ends an answered inbound call after CALLPLANE_CALL_MAX_SECONDS with our BYE', async () => {
        const a = await org();
        await registration(a.o.id, `long-${h().engine}`);
        assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: a.o.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
        const started = Date.now();
        const sipp = await dial('uac-held.xml', ourUri(`long-${h().engine}`));
        try {
          assert.equal(await exitOf(sipp), 0, sipp.output());
          assert.deepEqual(sippFlow(sipp), ['< INVITE', '> 100', '> 200', '< ACK', '> BYE', '< 200']);
          assert.ok(Date.now() - started >= 1000, 'held for the maximum call length');
        } finally {
          await sipp.stop();
          await h().call('DELETE', '/api/v2/sip/ipWhitelist', { token: a.o.token, body: { ip: CALLER } });
        }
      });
    });
  }, { CALLPLANE_CALL_MAX_SECONDS: '1', CALLPLANE_SIP_RING_SECONDS: '1', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, {
    worker: true, sip: { pollMs: 100 }, runtime: { heartbeatMs: 200 },
  });
});
