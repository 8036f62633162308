// What a test of a call over the fake voice transport sets up first: an organization's agent with a
// configuration, published; a conversation of a call with it; and the turn runner a voice session
// answers through (its outbound HTTP guarded as the platform's). Used by the voice session,
// voice parity and streamed voice tests.
import assert from 'node:assert/strict';
import { accountRepo } from '../../src/modules/accounts/repository.ts';
import { messageSecret } from '../../src/modules/accounts/message-secret.ts';
import { turnRunner } from '../../src/modules/conversations/turn.ts';
import { guardedDispatcher, policyFromConfig } from '../../src/webhooks/ssrf.ts';
import type { Harness } from './harness.ts';

export async function agentOnCall(h: Harness, config: Record<string, unknown>, opts: { direction?: 'inbound' | 'outbound'; counterpart?: string; now?: () => number } = {}) {
  const r = await h.reseller();
  const o = await h.organization(r.id);
  const token = await h.tokenFor(o.agentId);
  const set = await h.call('POST', '/api/v2/agent', { token, body: config });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  assert.equal((await h.call('POST', '/api/v2/agent/publish', { token })).status, 200);
  const db = h.database.db;
  const now = opts.now ?? Date.now;
  const agent = (await accountRepo.findById(db, o.agentId))!;
  const live = await h.services.agents.liveConfig(agent);
  const opened = await db.transaction().execute((tx) => h.services.conversations.open(tx, {
    agent, channel: 'sip', direction: opts.direction ?? 'inbound', counterpart: opts.counterpart ?? '+14155552671', counterpartKind: 'phone', fresh: true,
  }, Date.now()));
  const http = guardedDispatcher(policyFromConfig(h.config));
  const turns = turnRunner({
    db, models: h.services.models, knowledge: h.services.knowledge, context: h.services.context, tasks: h.services.tasks,
    http, messageSecret: (orgId) => messageSecret(db, h.box, orgId), now,
  });
  return { db, org: o, agent, live, opened, http, turns };
}
