// The history of conversations on both engines: the inbox and the junk inbox (paging, unread,
// mark read), the junk rules and the organization's decision, recent and room messages, one
// conversation and a batch of them, and the logs (window, filters, fields, paging, bad
// parameters, a streamed CSV with formula-looking cells neutralised, the CSV 404) — with tenancy
// everywhere. Rooms, conversations and messages are written through the conversation
// repository, as the engine writes them.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { before, describe, it } from 'node:test';
import { request } from 'undici';
import { parse } from 'csv-parse/sync';
import type { ConversationChannel, ConversationOutcome, MessageDirection, RoomRow } from '../../src/db/types.ts';
import { csvCell } from '../../src/lib/csv-cell.ts';
import { CSV_BATCH } from '../../src/modules/conversations/logs-csv.ts';
import {
  decideJunk, isAlphanumericSender, isAutomatedAddress, isShortCode, junkByRules, matchesRejectRegex,
} from '../../src/modules/conversations/junk.ts';
import { conversationRepo, inboxRepo, messageRepo, roomRepo } from '../../src/modules/conversations/repository.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness, Reply } from '../helpers/harness.ts';
import { DEFAULT_SETTINGS as NONE, resolveAgentSettings } from '../../src/modules/agents/settings.ts';

const MINUTE = 60_000;
const DAY = 86_400_000;

interface SeedMessage { dir: MessageDirection; text: string; at?: number; status?: 'received' | 'pending' | 'success' | 'failed'; attachments?: unknown[]; data?: unknown }
interface SeedConversation {
  orgId: number;
  accountId: number;
  counterpart: string;
  kind?: RoomRow['counterpart_kind'];
  displayName?: string | null;
  channel?: ConversationChannel;
  direction?: 'inbound' | 'outbound';
  at: number;
  messages?: SeedMessage[];
  outcome?: ConversationOutcome;
  durationMs?: number;
  model?: string | null;
  provider?: string | null;
  taskId?: string | null;
}

/** A room (found or created), one conversation in it and its messages, as the engine records them. */
async function seed(h: Harness, s: SeedConversation) {
  const db = h.database.db;
  const channel = s.channel ?? 'sms';
  const room = await roomRepo.findOrCreate(db, {
    org_id: s.orgId, account_id: s.accountId, counterpart: s.counterpart, counterpart_kind: s.kind ?? 'phone',
    display_name: s.displayName ?? null, junk: 0, junk_reason: null,
  }, s.at);
  const c = await conversationRepo.insert(db, {
    id: crypto.randomUUID(), room_id: room.id, org_id: s.orgId, account_id: s.accountId, channel, direction: s.direction ?? 'inbound',
    counterpart: s.counterpart, agent_version: null, engine: s.model ? 'model' : 'simulated', provider: s.provider ?? null, model: s.model ?? null,
    task_id: s.taskId ?? null, carrier_ref: null, started_at: s.at, last_activity_at: s.at, state: '{}', created_at: s.at, updated_at: s.at,
  });
  const ids: string[] = [];
  let t = s.at;
  for (const m of s.messages ?? []) {
    t = m.at ?? t + 1000;
    const id = crypto.randomUUID();
    ids.push(id);
    await messageRepo.insert(db, {
      id, conversation_id: c.id, room_id: room.id, org_id: s.orgId, direction: m.dir, text: m.text, source: channel,
      status: m.status ?? (m.dir === 'inbound' ? 'received' : 'success'), attachments: JSON.stringify(m.attachments ?? []),
      data: m.data === undefined ? null : JSON.stringify(m.data), at: t,
    });
    if (m.dir !== 'tool') {
      await conversationRepo.count(db, c.id, t, m.dir === 'inbound' ? { in: 1 } : { out: 1, calls: 1, tokensIn: 10, tokensOut: 5 });
      await roomRepo.touch(db, room.id, m.text, t, m.dir === 'inbound');
    }
  }
  if (s.outcome) await conversationRepo.end(db, c.id, s.outcome, null, s.at + (s.durationMs ?? 60_000));
  return { room: (await roomRepo.find(db, room.id))!, conversation: (await conversationRepo.find(db, c.id))!, messageIds: ids, roomId: `${s.accountId}:${room.id}` };
}

const ok = (res: Reply, label = '') => assert.equal(res.status, 200, `${label} ${res.status} ${JSON.stringify(res.body).slice(0, 600)}`);
function bad(res: Reply, status: number, pattern: RegExp) {
  assert.equal(res.status, status, `expected ${status}, got ${res.status} ${JSON.stringify(res.body).slice(0, 400)}`);
  assert.equal(res.body.success, false);
  assert.match(res.body.message, pattern);
}

/** A CSV document's rows (RFC 4180: quoted fields may hold commas, quotes and line breaks). */
const parseCsv = (text: string): string[][] => parse(text, { relax_column_count: true }) as string[][];

describe('junk rules (pure)', () => {
  it('short codes, alphanumeric sender ids and automated addresses, each with its reason', () => {
    assert.ok(isShortCode('12345') && isShortCode('+262966') && isShortCode('911'));
    assert.ok(!isShortCode('12') && !isShortCode('1234567') && !isShortCode('+14155552671'));
    assert.ok(isAlphanumericSender('AMAZON') && isAlphanumericSender('uber') && isAlphanumericSender('BANK-INFO') && isAlphanumericSender('My Shop'));
    assert.ok(!isAlphanumericSender('123456') && !isAlphanumericSender('averyveryverylongname') && !isAlphanumericSender('+14155552671') && !isAlphanumericSender('a@b.co'));
    assert.ok(isAutomatedAddress('no-reply@example.com') && isAutomatedAddress('NoReply@x.io') && isAutomatedAddress('mailer-daemon@mx.example')
      && isAutomatedAddress('do-not-reply+bounce@shop.example') && isAutomatedAddress('donotreply@a.b'));
    assert.ok(!isAutomatedAddress('reply@example.com') && !isAutomatedAddress('jane@noreply.example') && !isAutomatedAddress('no-reply'));
    assert.deepEqual(junkByRules({ counterpart: '12345', channel: 'sms' }, NONE), { junk: 1, reason: 'shortCode' });
    assert.deepEqual(junkByRules({ counterpart: 'amazon', channel: 'sms' }, NONE), { junk: 1, reason: 'alphanumericSender' });
    assert.deepEqual(junkByRules({ counterpart: 'no-reply@shop.example', channel: 'api' }, NONE), { junk: 1, reason: 'automatedAddress' });
    assert.deepEqual(junkByRules({ counterpart: '+14155552671', channel: 'sms' }, NONE), { junk: 0, reason: null });
  });

  it('short codes and sender ids are judged on SMS only (an API user id or a SIP extension is not junk)', () => {
    assert.deepEqual(junkByRules({ counterpart: '4521', channel: 'api' }, NONE), { junk: 0, reason: null });
    assert.deepEqual(junkByRules({ counterpart: 'alice', channel: 'api' }, NONE), { junk: 0, reason: null });
    assert.deepEqual(junkByRules({ counterpart: '1001', channel: 'sip' }, NONE), { junk: 0, reason: null });
    assert.deepEqual(junkByRules({ counterpart: 'web:visitor-1', channel: 'web' }, NONE), { junk: 0, reason: null });
  });

  it('the agent\'s cnamAutoRejectRegex matches the counterpart or its caller name, and wins over the other rules', () => {
    const config = resolveAgentSettings({ cnamAutoRejectRegex: '^\\+1900|SPAM LIKELY' });
    assert.ok(matchesRejectRegex(config, { counterpart: '+19005550100' }));
    assert.ok(matchesRejectRegex(config, { counterpart: '+14155552671', displayName: 'SPAM LIKELY' }));
    assert.ok(!matchesRejectRegex(config, { counterpart: '+14155552671', displayName: 'Jane' }));
    assert.ok(!matchesRejectRegex(resolveAgentSettings({ cnamAutoRejectRegex: null }), { counterpart: '+19005550100' }));
    assert.ok(!matchesRejectRegex(resolveAgentSettings({ cnamAutoRejectRegex: '(' }), { counterpart: '(' }), 'a regex that does not compile matches nothing');
    assert.deepEqual(junkByRules({ counterpart: '12345', channel: 'sms' }, resolveAgentSettings({ cnamAutoRejectRegex: '^123' })), { junk: 1, reason: 'cnamAutoRejectRegex' });
    assert.deepEqual(junkByRules({ counterpart: '+19005550100', channel: 'voice' }, config), { junk: 1, reason: 'cnamAutoRejectRegex' });
  });

  it('the organization\'s decision wins both ways; null leaves it to the rules', () => {
    assert.deepEqual(decideJunk({ counterpart: '+14155552671', channel: 'sms', override: 1 }, NONE), { junk: 1, reason: 'marked' });
    assert.deepEqual(decideJunk({ counterpart: '12345', channel: 'sms', override: 0 }, NONE), { junk: 0, reason: null });
    assert.deepEqual(decideJunk({ counterpart: '12345', channel: 'sms', override: null }, NONE), { junk: 1, reason: 'shortCode' });
  });
});

describe('csv cells', () => {
  it('neutralises formula-looking text and quotes separators', () => {
    assert.equal(csvCell('=HYPERLINK("http://x")'), '"\'=HYPERLINK(""http://x"")"');
    assert.equal(csvCell('+14155552671'), '\'+14155552671');
    assert.equal(csvCell('-1+2'), '\'-1+2');
    assert.equal(csvCell('@SUM(A1)'), '\'@SUM(A1)');
    assert.equal(csvCell('\tx'), '"\'\tx"');
    assert.equal(csvCell('\rx'), '"\'\rx"');
    assert.equal(csvCell('a,b'), '"a,b"');
    assert.equal(csvCell('line\nbreak'), '"line\nbreak"');
    assert.equal(csvCell(-5), '-5');
    assert.equal(csvCell(null), '');
    assert.equal(csvCell('plain'), 'plain');
  });
});

forEachEngine('conversation history', (h) => {
  let reseller: { id: number; token: string };
  const tenant = async () => {
    const o = await h().organization(reseller.id);
    return { ...o, agentToken: await h().tokenFor(o.agentId) };
  };
  before(async () => {
    reseller = await h().reseller();
  });

  describe('inbox', () => {
    it('lists the organization\'s rooms newest activity first with the contract\'s fields, paged 0-based', async () => {
      const o = await tenant();
      const now = Date.now();
      const a = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550101', displayName: 'Ann', at: now - 30 * MINUTE, messages: [{ dir: 'inbound', text: 'first' }] });
      const b = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550102', at: now - 10 * MINUTE, messages: [{ dir: 'inbound', text: 'hi' }, { dir: 'outbound', text: 'hello back' }] });
      const c = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: 'user-7', kind: 'address', channel: 'api', at: now - 20 * MINUTE, messages: [{ dir: 'inbound', text: 'api says' }] });

      const all = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true } });
      ok(all);
      assert.equal(all.body.totalRooms, 3);
      assert.equal(all.body.pageNumber, 0);
      assert.equal(all.body.pageSize, 20);
      assert.deepEqual(all.body.rooms.map((r: any) => r.roomId), [b.roomId, c.roomId, a.roomId]);
      const rb = all.body.rooms[0];
      assert.equal(rb.roomId, `${o.agentId}:${b.room.id}`);
      assert.equal(rb.id, b.room.id);
      assert.equal(rb.name, '+14155550102');
      assert.equal(rb.vidaPhoneNumber, '+14155550102');
      assert.equal(rb.unregistered, true);
      assert.equal(rb.unregisteredDisplayName, '+14155550102');
      assert.equal(rb.lastMessage, 'hello back');
      assert.equal(rb.lastMessageTimestamp, Math.floor(b.room.last_message_at / 1000));
      assert.equal(rb.chatAgentCampaignId, `camp${o.agentId}`);
      assert.equal(rb.unread, 1);
      assert.equal(rb.junk, false);
      assert.equal(rb.junkReason, null);
      assert.equal(all.body.rooms[2].name, 'Ann');
      assert.equal(all.body.rooms[1].vidaPhoneNumber, undefined, 'an API address is not a phone number');

      const p1 = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true, page: 1, pageSize: 2 } });
      ok(p1);
      assert.equal(p1.body.pageNumber, 1);
      assert.equal(p1.body.pageSize, 2);
      assert.equal(p1.body.totalRooms, 3);
      assert.deepEqual(p1.body.rooms.map((r: any) => r.roomId), [a.roomId]);
      const past = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { page: 5, pageSize: 2 } });
      ok(past);
      assert.deepEqual(past.body.rooms, []);

      const unpaged = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: false } });
      ok(unpaged);
      assert.equal(unpaged.body.rooms.length, 3);

      bad(await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pageSize: 1001 } }), 400, /pageSize/);
      bad(await h().call('GET', '/api/v2/conversations', { token: o.token, query: { page: -1 } }), 400, /page/);
      bad(await h().call('GET', '/api/v2/conversations', { token: o.token, query: { unread: 'maybe' } }), 400, /unread/);
    });

    it('unread filters; reading a room\'s messages marks it read; a message after the read stays unread', async () => {
      const o = await tenant();
      const now = Date.now();
      const a = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550201', at: now - 5 * MINUTE, messages: [{ dir: 'inbound', text: 'one' }, { dir: 'inbound', text: 'two' }] });
      const b = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550202', at: now - 4 * MINUTE, messages: [{ dir: 'outbound', text: 'we wrote first' }] });
      const unread = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true, unread: true } });
      ok(unread);
      assert.deepEqual(unread.body.rooms.map((r: any) => [r.roomId, r.unread]), [[a.roomId, 2]]);
      const every = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true, unread: false } });
      assert.deepEqual(every.body.rooms.map((r: any) => r.roomId), [b.roomId, a.roomId], 'unread=false does not filter');

      ok(await h().call('GET', `/api/v2/messages/${a.roomId}`, { token: o.token }));
      const after = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true, unread: true } });
      assert.deepEqual(after.body.rooms, []);
      const row = await roomRepo.find(h().database.db, a.room.id);
      assert.equal(row!.unread, 0);

      // A read that saw only messages up to t leaves a message that arrived later unread.
      await roomRepo.touch(h().database.db, a.room.id, 'three', now + MINUTE, true);
      await inboxRepo.markRead(h().database.db, a.room.id, now);
      assert.equal((await roomRepo.find(h().database.db, a.room.id))!.unread, 1);
    });
  });

  describe('messages', () => {
    it('a room\'s messages oldest first in the contract\'s shape, tool calls left out', async () => {
      const o = await tenant();
      const now = Date.now() - 3 * MINUTE;
      const s = await seed(h(), {
        orgId: o.id, accountId: o.agentId, counterpart: '+14155550301', displayName: 'Bob', at: now,
        messages: [
          { dir: 'inbound', text: 'Hi, can I book?', attachments: [{ type: 'image/png', url: 'https://cdn.example/a/photo.png' }] },
          { dir: 'tool', text: 'book: ok', data: { name: 'book', arguments: '{"day":"mon"}', result: 'ok', refused: false } },
          { dir: 'outbound', text: 'Booked for Monday.' },
        ],
      });
      const res = await h().call('GET', `/api/v2/messages/${s.roomId}`, { token: o.token });
      ok(res);
      assert.ok(Array.isArray(res.body));
      assert.equal(res.body.length, 2);
      const [inb, out] = res.body;
      assert.equal(inb.message, 'Hi, can I book?');
      assert.equal(inb.from, s.room.id);
      assert.equal(inb.fromUser, 'Bob');
      assert.equal(inb.fromNumber, '+14155550301');
      assert.equal(inb.to, o.agentId);
      assert.equal(typeof inb.toUser, 'string');
      assert.equal(inb.status, 'success');
      assert.equal(inb.source, 'sms');
      assert.equal(inb.roomId, s.roomId);
      assert.equal(inb.uuid, s.messageIds[0]);
      assert.equal(inb.timestamp, Math.floor((now + 1000) / 1000));
      assert.equal(inb.date, new Date(now + 1000).toISOString());
      assert.equal(inb.roomInitiator, 'Bob');
      assert.equal(typeof inb.attachments, 'string', 'the contract types attachments here as a string');
      assert.deepEqual(JSON.parse(inb.attachments), [{ 'content-type': 'image/png', filename: 'photo.png', 'content-url': 'https://cdn.example/a/photo.png', attachmentType: 'image/png' }]);
      assert.equal(out.message, 'Booked for Monday.');
      assert.equal(out.from, o.agentId);
      assert.equal(out.to, s.room.id);
      assert.equal(out.toNumber, '+14155550301');
      assert.equal(out.direction, 'outbound');

      const limited = await h().call('GET', `/api/v2/messages/${s.roomId}`, { token: o.token, query: { limit: 1 } });
      assert.deepEqual(limited.body.map((m: any) => m.message), ['Booked for Monday.']);
    });

    it('recent messages across the rooms, newest first, junk included and marked, bounded by limit', async () => {
      const o = await tenant();
      const now = Date.now() - 10 * MINUTE;
      const a = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550401', at: now, messages: [{ dir: 'inbound', text: 'a1' }, { dir: 'outbound', text: 'a2' }] });
      const j = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '12345', kind: 'address', at: now + 5000, messages: [{ dir: 'inbound', text: 'WIN A PRIZE', attachments: [{ type: 'file', url: 'https://x.example/f.pdf' }] }, { dir: 'tool', text: 'x: y' }] });
      await roomRepo.setJunk(h().database.db, j.room.id, 1, 'shortCode', Date.now());
      const same = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550402', at: now - 60_000, messages: [{ dir: 'outbound', text: 'answer', at: now - 59_000 }, { dir: 'inbound', text: 'question', at: now - 59_000 }] });
      const res = await h().call('GET', '/api/v2/messages/recent', { token: o.token });
      ok(res);
      assert.deepEqual(res.body.map((m: any) => m.message), ['WIN A PRIZE', 'a2', 'a1', 'answer', 'question'], 'newest first; in one millisecond the answer is newer');
      const room = await h().call('GET', `/api/v2/messages/${same.roomId}`, { token: o.token });
      assert.deepEqual(room.body.map((m: any) => m.message), ['question', 'answer']);
      const [spam, reply] = res.body;
      assert.equal(spam.targetInbox, 'junk');
      assert.equal(spam.roomId, j.roomId);
      assert.deepEqual(spam.attachments, [{ 'content-type': 'application/octet-stream', filename: 'f.pdf', 'content-url': 'https://x.example/f.pdf', attachmentType: 'file' }]);
      assert.equal(reply.targetInbox, 'inbox');
      assert.equal(reply.aiAgent, true);
      assert.equal(reply.campaignId, `camp${o.agentId}`);
      assert.equal(reply.type, 'message');
      assert.equal(reply.eventType, 'outbound-message');
      assert.equal(reply.agentReplyCount, 1);
      assert.equal(reply.roomId, a.roomId);
      assert.equal(res.body[2].aiAgent, false);
      assert.equal(res.body[4].aiAgent, false);
      const one = await h().call('GET', '/api/v2/messages/recent', { token: o.token, query: { limit: 1 } });
      assert.deepEqual(one.body.map((m: any) => m.message), ['WIN A PRIZE']);
      bad(await h().call('GET', '/api/v2/messages/recent', { token: o.token, query: { limit: 501 } }), 400, /limit/);
    });
  });

  describe('conversations', () => {
    it('one conversation: the contract\'s one-item array, tool calls with a tool object, uuid suffixes stripped', async () => {
      const o = await tenant();
      const at = Date.now() - 20 * MINUTE;
      const s = await seed(h(), {
        orgId: o.id, accountId: o.agentId, counterpart: '+14155550501', channel: 'voice', at, outcome: 'completed',
        // All in one millisecond: the order is what was said, the tool it led to, the answer.
        messages: [
          { dir: 'outbound', text: 'I cannot transfer you.', at: at + 1000 },
          { dir: 'tool', text: 'transfer: refused', status: 'failed', at: at + 1000, data: { name: 'transfer', arguments: '{"to":"+1"}', result: 'not granted', refused: true } },
          { dir: 'inbound', text: 'Hello?', at: at + 1000 },
        ],
      });
      for (const uuid of [s.conversation.id, `${s.conversation.id}:${Math.floor(at / 1000)}`, `${s.conversation.id}:${Math.floor(at / 1000)}:${Math.floor(at / 1000) + 60}`]) {
        const res = await h().call('GET', `/api/v2/conversation/${s.roomId}/${encodeURIComponent(uuid)}`, { token: o.token });
        ok(res, uuid);
        assert.ok(Array.isArray(res.body));
        assert.equal(res.body.length, 1);
        const [conv] = res.body;
        assert.equal(conv.success, true);
        assert.equal(conv.message, 'Success');
        assert.equal(conv.uuid, s.conversation.id);
        assert.equal(conv.outcome, 'completed');
        assert.equal(conv.eventType, 'call');
        assert.equal(conv.truncated, false);
        assert.deepEqual(conv.conversation.map((l: any) => l.direction), ['inbound', 'tool', 'outbound']);
        const [first, tool] = conv.conversation;
        assert.equal(first.message, 'Hello?');
        assert.equal(first.source, 'voice');
        assert.equal(typeof first.timestamp, 'number');
        assert.equal(first.date, new Date(at + 1000).toISOString());
        assert.deepEqual(tool.tool, { name: 'transfer', arguments: '{"to":"+1"}', result: 'not granted', refused: true });
        assert.equal(first.tool, undefined);
      }
      const other = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550502', at, messages: [{ dir: 'inbound', text: 'x' }] });
      bad(await h().call('GET', `/api/v2/conversation/${other.roomId}/${s.conversation.id}`, { token: o.token }), 404, /uuid/);
      bad(await h().call('GET', `/api/v2/conversation/${s.roomId}/${crypto.randomUUID()}`, { token: o.token }), 404, /uuid/);
      bad(await h().call('GET', `/api/v2/conversation/nonsense/${s.conversation.id}`, { token: o.token }), 404, /roomId/);
    });

    it('a call\'s speech engines: state.speech as written by the voice side (times in seconds), null without one, malformed changes left out', async () => {
      const o = await tenant();
      const at = Date.now() - 10 * MINUTE;
      const s = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550503', channel: 'sip', at, outcome: 'completed', messages: [{ dir: 'inbound', text: 'hi', at }] });
      const read = async () => (await h().call('GET', `/api/v2/conversation/${s.roomId}/${s.conversation.id}`, { token: o.token })).body[0].speech;
      assert.equal(await read(), null, 'no voice session wrote one');
      const change = { at: at + 4000, from: 'deepgram', to: 'pocketsphinx', reason: 'deepgram dropped the socket twice' };
      await conversationRepo.setState(h().database.db, s.conversation.id, JSON.stringify({
        transport: 'rtp', noResponse: 1,
        speech: {
          stt: 'pocketsphinx', tts: 'espeak-ng', offline: true, vad: 'silero', voice: 'default female en-US', streamed: false,
          ttsRequested: 'cartesia', ttsSubstituted: 'cartesia has no key on this process (CALLPLANE_CARTESIA_API_KEY)',
          changes: [change, { at: 'soon', from: 'x' }], ttsChanges: 'not a list',
        },
      }), Date.now());
      assert.deepEqual(await read(), {
        stt: 'pocketsphinx', tts: 'espeak-ng', offline: true, vad: 'silero', voice: 'default female en-US', streamed: false,
        ttsRequested: 'cartesia', ttsSubstituted: 'cartesia has no key on this process (CALLPLANE_CARTESIA_API_KEY)',
        changes: [{ ...change, at: change.at / 1000 }],
      });
      await conversationRepo.setState(h().database.db, s.conversation.id, JSON.stringify({ speech: 'text' }), Date.now());
      assert.equal(await read(), null, 'a speech that is not an object');
    });

    it('a batch: per-item results, unknown and foreign pairs as failed items, stats; 0 or more than 200 items is a 400 naming items', async () => {
      const o = await tenant();
      const foreign = await tenant();
      const at = Date.now() - 30 * MINUTE;
      const x = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550601', at, messages: [{ dir: 'inbound', text: 'x1' }, { dir: 'outbound', text: 'x2' }] });
      const y = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550602', at, messages: [{ dir: 'inbound', text: 'y1' }] });
      const f = await seed(h(), { orgId: foreign.id, accountId: foreign.agentId, counterpart: '+14155550603', at, messages: [{ dir: 'inbound', text: 'secret' }] });
      const items = [
        { roomId: x.roomId, uuid: `${x.conversation.id}:${Math.floor(at / 1000)}` },
        { roomId: y.roomId, uuid: y.conversation.id },
        { roomId: x.roomId, uuid: crypto.randomUUID() },
        { roomId: f.roomId, uuid: f.conversation.id },
        { roomId: x.roomId, uuid: y.conversation.id },
        { roomId: 'garbage', uuid: 'garbage' },
      ];
      const res = await h().call('POST', '/api/v2/conversation/batch', { token: o.token, body: { items } });
      ok(res);
      assert.equal(res.body.success, true);
      assert.deepEqual(res.body.stats, { requested: 6, ok: 2, failed: 4 });
      assert.deepEqual(res.body.results.map((r: any) => r.success), [true, true, false, false, false, false]);
      assert.equal(res.body.results[0].uuid, items[0].uuid, 'the pair is answered as sent');
      assert.equal(res.body.results[0].conversationUuid, x.conversation.id);
      assert.deepEqual(res.body.results[0].conversation.map((l: any) => l.message), ['x1', 'x2']);
      assert.deepEqual(res.body.results[1].conversation.map((l: any) => l.message), ['y1']);
      assert.equal(res.body.results[3].conversation, undefined);
      assert.match(res.body.results[3].message, /roomId .* was not found/);
      assert.match(res.body.results[2].message, /uuid .* was not found/);
      assert.match(res.body.results[4].message, /uuid .* was not found/);
      assert.ok(!JSON.stringify(res.body).includes('secret'));

      bad(await h().call('POST', '/api/v2/conversation/batch', { token: o.token, body: { items: [] } }), 400, /^items/);
      const many = Array.from({ length: 201 }, () => ({ roomId: x.roomId, uuid: x.conversation.id }));
      bad(await h().call('POST', '/api/v2/conversation/batch', { token: o.token, body: { items: many } }), 400, /^items/);
      bad(await h().call('POST', '/api/v2/conversation/batch', { token: o.token, body: {} }), 400, /^items is required/);
      const max = await h().call('POST', '/api/v2/conversation/batch', { token: o.token, body: { items: many.slice(0, 200) } });
      ok(max);
      assert.deepEqual(max.body.stats, { requested: 200, ok: 200, failed: 0 });
    });
  });

  describe('junk', () => {
    it('rooms the rules or the organization mark junk are in the junk inbox with their reason; false and null change it back', async () => {
      const o = await tenant();
      const now = Date.now() - MINUTE;
      const shortCode = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '72345', kind: 'address', at: now, messages: [{ dir: 'inbound', text: 'Your code is 1234' }] });
      const person = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+19005550100', displayName: 'SPAM LIKELY', at: now + 1000, messages: [{ dir: 'inbound', text: 'hello' }] });
      const noReply = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: 'no-reply@shop.example', kind: 'address', channel: 'api', at: now + 2000, messages: [{ dir: 'inbound', text: 'receipt' }] });
      const list = async (path: string) => (await h().call('GET', path, { token: o.token, query: { pagination: true } })).body.rooms as any[];
      assert.equal((await list('/api/v2/junkConversations')).length, 0, 'the engine applies the rules; nothing is junk before that');

      // Returning a room to the rules decides it now: short code on SMS, automated address on any channel.
      const decided = await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: { junk: null } });
      ok(decided);
      assert.equal(decided.body.room.junk, true);
      assert.equal(decided.body.room.junkReason, 'shortCode');
      assert.equal(decided.body.room.junkOverride, null);
      ok(await h().call('POST', `/api/v2/conversations/${noReply.roomId}/junk`, { token: o.token, body: { junk: null } }));
      const still = await h().call('POST', `/api/v2/conversations/${person.roomId}/junk`, { token: o.token, body: { junk: null } });
      assert.equal(still.body.room.junk, false, 'no rule matches before the agent has a cnamAutoRejectRegex');

      // The agent's live cnamAutoRejectRegex (published) matches the caller name.
      ok(await h().call('POST', '/api/v2/agent', { token: o.agentToken, body: { cnamAutoRejectRegex: 'SPAM LIKELY' } }));
      ok(await h().call('POST', '/api/v2/agent/publish', { token: o.agentToken }));
      const cnam = await h().call('POST', `/api/v2/conversations/${person.roomId}/junk`, { token: o.token, body: { junk: null } });
      assert.equal(cnam.body.room.junkReason, 'cnamAutoRejectRegex');

      const junk = await list('/api/v2/junkConversations');
      assert.deepEqual(junk.map((r) => [r.roomId, r.junkReason]), [[noReply.roomId, 'automatedAddress'], [person.roomId, 'cnamAutoRejectRegex'], [shortCode.roomId, 'shortCode']]);
      assert.equal((await list('/api/v2/conversations')).length, 0);

      // The organization's decision: not junk (kept even though a rule matches), then junk.
      const notJunk = await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: { junk: false } });
      ok(notJunk);
      assert.equal(notJunk.body.room.junk, false);
      assert.equal(notJunk.body.room.junkOverride, false);
      assert.deepEqual((await list('/api/v2/conversations')).map((r) => r.roomId), [shortCode.roomId]);
      const marked = await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: { junk: true } });
      assert.equal(marked.body.room.junkReason, 'marked');
      assert.equal(marked.body.room.junkOverride, true);
      const row = await roomRepo.find(h().database.db, shortCode.room.id);
      assert.equal(row!.junk_override, 1);
      // Cleared: the rules decide again.
      const cleared = await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: { junk: null } });
      assert.equal(cleared.body.room.junkReason, 'shortCode');
      assert.equal((await roomRepo.find(h().database.db, shortCode.room.id))!.junk_override, null);

      bad(await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: {} }), 400, /junk is required/);
      bad(await h().call('POST', `/api/v2/conversations/${shortCode.roomId}/junk`, { token: o.token, body: { junk: 'yes' } }), 400, /junk/);
      bad(await h().call('POST', '/api/v2/conversations/1:999999/junk', { token: o.token, body: { junk: true } }), 404, /roomId/);
    });
  });

  describe('logs', () => {
    let o: Awaited<ReturnType<typeof tenant>>;
    let second: { id: number; token: string };
    const now = Date.now();
    const seeded: Awaited<ReturnType<typeof seed>>[] = [];
    before(async () => {
      o = await tenant();
      second = await h().agent(o.id);
      seeded.push(
        await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550701', channel: 'sms', at: now - 3 * DAY, outcome: 'completed', durationMs: 120_000, model: 'fake-model', provider: 'default', messages: [{ dir: 'inbound', text: 'sms in' }, { dir: 'outbound', text: 'sms out' }] }),
        await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550702', displayName: '=HYPERLINK("http://evil.example","click")', channel: 'voice', at: now - 2 * DAY, outcome: 'hung_up', durationMs: 30_000, messages: [{ dir: 'inbound', text: '@everyone, hi' }, { dir: 'tool', text: 'hang_up: ok' }, { dir: 'outbound', text: 'Bye, then' }] }),
        await seed(h(), { orgId: o.id, accountId: second.id, counterpart: 'user-9', kind: 'address', channel: 'api', at: now - 1 * DAY, messages: [{ dir: 'inbound', text: 'still open' }] }),
        await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155550704', channel: 'sms', direction: 'outbound', at: now - 10 * DAY, outcome: 'completed', messages: [{ dir: 'outbound', text: 'old' }] }),
      );
    });
    const logs = (query: Record<string, unknown> = {}, token = o.token) => h().call('GET', '/api/v2/logs', { token, query });

    it('the last 7 days by default, newest first, one entry per conversation with its fields', async () => {
      const res = await logs();
      ok(res);
      assert.equal(res.body.success, true);
      assert.equal(res.body.totalCount, 3);
      assert.equal(res.body.count, 3);
      assert.deepEqual(res.body.pagination, { page: 1, pageSize: 20, totalPages: 1, totalCount: 3, hasMore: false, pageCount: 1 });
      assert.deepEqual(res.body.logs.map((l: any) => l.id), [seeded[2].conversation.id, seeded[1].conversation.id, seeded[0].conversation.id]);
      const sms = res.body.logs[2];
      assert.equal(sms.timestamp, new Date(now - 3 * DAY).toISOString());
      assert.equal(sms.account_id, o.agentId);
      assert.equal(sms.org_id, o.id);
      assert.equal(sms.eventType, 'message');
      assert.equal(sms.uuid, seeded[0].conversation.id);
      assert.equal(sms.roomId, seeded[0].roomId);
      assert.equal(sms.agentId, `camp${o.agentId}`);
      assert.equal(sms.channel, 'sms');
      assert.equal(sms.direction, 'inbound');
      assert.equal(sms.counterpart, '+14155550701');
      assert.equal(sms.outcome, 'completed');
      assert.equal(sms.durationMs, 120_000);
      assert.equal(sms.model, 'fake-model');
      assert.equal(sms.provider, 'default');
      assert.equal(sms.engine, 'model');
      assert.equal(sms.messagesIn, 1);
      assert.equal(sms.messagesOut, 1);
      assert.equal(sms.tokensIn, 10);
      assert.equal(sms.tokensOut, 5);
      assert.equal(sms.startedAt, Math.floor((now - 3 * DAY) / 1000));
      assert.equal(sms.endedAt, Math.floor((now - 3 * DAY + 120_000) / 1000));
      assert.equal(sms.transcript, undefined, 'no transcript unless fields asks for it');
      assert.equal(res.body.logs[0].outcome, 'open');
      assert.equal(res.body.logs[0].endedAt, null);
      assert.equal(res.body.logs[1].eventType, 'call');
      assert.equal(res.body.schema, undefined);

      const wide = await logs({ start: Math.floor((now - 30 * DAY) / 1000) });
      assert.equal(wide.body.totalCount, 4);
      const exact = await logs({ start: Math.floor((now - 3 * DAY) / 1000), end: Math.floor((now - 2 * DAY) / 1000) });
      assert.deepEqual(exact.body.logs.map((l: any) => l.id), [seeded[1].conversation.id, seeded[0].conversation.id], 'start and end are inclusive');
    });

    it('pages from 1; pageSize up to 10000', async () => {
      const p2 = await logs({ page: 2, pageSize: 2 });
      ok(p2);
      assert.equal(p2.body.count, 1);
      assert.deepEqual(p2.body.logs.map((l: any) => l.id), [seeded[0].conversation.id]);
      assert.deepEqual(p2.body.pagination, { page: 2, pageSize: 2, totalPages: 2, totalCount: 3, hasMore: false, pageCount: 2 });
      const p1 = await logs({ page: 1, pageSize: 2 });
      assert.equal(p1.body.pagination.hasMore, true);
      const beyond = await logs({ page: 9, pageSize: 2 });
      assert.deepEqual(beyond.body.logs, []);
      ok(await logs({ pageSize: 10000 }));
    });

    it('filters: channel, eventType, direction, outcome (open), agentId, roomId, counterpart, engine, model', async () => {
      const ids = async (q: Record<string, unknown>) => {
        const r = await logs({ start: Math.floor((now - 30 * DAY) / 1000), ...q });
        ok(r, JSON.stringify(q));
        return r.body.logs.map((l: any) => l.id) as string[];
      };
      const [s0, s1, s2, s3] = seeded.map((s) => s.conversation.id);
      assert.deepEqual(await ids({ channel: 'sms' }), [s0, s3]);
      assert.deepEqual(await ids({ channel: 'sms,api' }), [s2, s0, s3]);
      assert.deepEqual(await ids({ eventType: 'call' }), [s1]);
      assert.deepEqual(await ids({ eventType: 'call', channel: 'sms' }), []);
      assert.deepEqual(await ids({ direction: 'outbound' }), [s3]);
      assert.deepEqual(await ids({ outcome: 'open' }), [s2]);
      assert.deepEqual(await ids({ outcome: 'open,hung_up' }), [s2, s1]);
      assert.deepEqual(await ids({ agentId: `camp${second.id}` }), [s2]);
      assert.deepEqual(await ids({ agentId: String(o.agentId) }), [s1, s0, s3]);
      assert.deepEqual(await ids({ targetAccountId: second.id }), [s2], 'an org token may name one of its agents');
      assert.deepEqual(await ids({ roomId: seeded[1].roomId }), [s1]);
      assert.deepEqual(await ids({ roomId: seeded[1].roomId, agentId: `camp${second.id}` }), [], 'a room of another agent than agentId names');
      assert.deepEqual(await ids({ roomId: seeded[2].roomId, channel: 'api' }), [s2]);
      assert.deepEqual(await ids({ counterpart: '+1 (415) 555-0701' }), [s0]);
      assert.deepEqual(await ids({ engine: 'model' }), [s0]);
      assert.deepEqual(await ids({ model: 'fake-model', provider: 'default' }), [s0]);
    });

    it('fields picks and orders the fields; transcript on request; includeFields answers the schema', async () => {
      const res = await logs({ fields: 'eventType,id,transcript' });
      ok(res);
      assert.deepEqual(Object.keys(res.body.logs[1]), ['eventType', 'id', 'transcript']);
      assert.equal(res.body.logs[1].transcript, 'inbound: @everyone, hi\noutbound: Bye, then', 'tool calls are not in the transcript');
      const schema = await logs({ includeFields: 'true', fields: 'id' });
      assert.ok(schema.body.schema.includes('transcript'));
      assert.ok(schema.body.schema.includes('counterpartName'));
      assert.equal((await logs({ includeFields: '1' })).body.schema.length, schema.body.schema.length);
    });

    it('bad parameters are a 400 naming the parameter', async () => {
      bad(await logs({ start: 'yesterday' }), 400, /^start/);
      bad(await logs({ end: '1.5' }), 400, /^end/);
      bad(await logs({ start: 2000, end: 1000 }), 400, /^start .* must not be after end/);
      bad(await logs({ fields: 'id,secret' }), 400, /^fields: unknown field secret/);
      bad(await logs({ fields: ',' }), 400, /^fields/);
      bad(await logs({ pageSize: 0 }), 400, /^pageSize/);
      bad(await logs({ pageSize: 10001 }), 400, /^pageSize/);
      bad(await logs({ pageSize: 1001, fields: 'id,transcript' }), 400, /^pageSize must be at most 1000 when fields includes transcript/);
      bad(await logs({ page: 0 }), 400, /^page/);
      bad(await logs({ format: 'xml' }), 400, /^format/);
      bad(await logs({ includeFields: 'perhaps' }), 400, /^includeFields/);
      bad(await logs({ channel: 'fax' }), 400, /^channel must be one of/);
      bad(await logs({ outcome: 'won' }), 400, /^outcome/);
      bad(await logs({ roomId: '12' }), 400, /^roomId/);
      bad(await logs({ agentId: 'bob' }), 400, /^agentId/);
      bad(await logs({ colour: 'red' }), 400, /unknown query parameter colour/);
      bad(await logs({ colour: 'red', size: 'L' }), 400, /unknown query parameters colour, size/);
    });

    it('format=csv streams a file; formula-looking cells are neutralised; explicit pages export that page', async () => {
      const res = await h().app.inject({ method: 'GET', url: '/api/v2/logs', query: { token: o.token, format: 'csv', fields: 'id,counterpart,counterpartName,transcript,durationMs' } });
      assert.equal(res.statusCode, 200, res.body);
      assert.match(String(res.headers['content-type']), /^text\/csv/);
      assert.match(String(res.headers['content-disposition']), /^attachment; filename="logs-\d+-\d{8}-\d{8}\.csv"$/);
      const rows = parseCsv(res.body);
      assert.deepEqual(rows[0], ['id', 'counterpart', 'counterpartName', 'transcript', 'durationMs']);
      assert.equal(rows.length, 4);
      const call = rows.find((r) => r[0] === seeded[1].conversation.id)!;
      assert.equal(call[1], '\'+14155550702');
      assert.equal(call[2], '\'=HYPERLINK("http://evil.example","click")');
      assert.equal(call[3], 'inbound: @everyone, hi\noutbound: Bye, then');
      assert.equal(call[4], '30000');
      assert.ok(res.body.includes('"\'=HYPERLINK(""http://evil.example"",""click"")"'), 'the raw cell is quoted and neutralised');
      const open = rows.find((r) => r[0] === seeded[2].conversation.id)!;
      assert.equal(open[4], '', 'null is an empty cell');

      const paged = await h().app.inject({ method: 'GET', url: '/api/v2/logs', query: { token: o.token, format: 'csv', fields: 'id', page: '2', pageSize: '1' } });
      assert.deepEqual(parseCsv(paged.body), [['id'], [seeded[1].conversation.id]]);
    });

    it('format=csv: a formula after a ; or a tab inside a cell is neutralised too, and the cell quoted (issue 23)', async () => {
      const t = await tenant();
      const payload = 'x;=1+1;@SUM(1+1)';
      const s = await seed(h(), { orgId: t.id, accountId: t.agentId, counterpart: '+14155550801', displayName: payload, channel: 'sms', at: now - MINUTE,
        messages: [{ dir: 'inbound', text: 'hi\t=cmd|\' /C calc\'!A0' }] });
      const res = await h().app.inject({ method: 'GET', url: '/api/v2/logs', query: { token: t.token, format: 'csv', fields: 'id,counterpartName,transcript' } });
      assert.equal(res.statusCode, 200, res.body);
      assert.ok(res.body.includes(`,"x;'=1+1;'@SUM(1+1)",`), `the raw name cell is quoted and each part neutralised: ${res.body}`);
      assert.ok(res.body.includes(`"inbound: hi\t'=cmd|' /C calc'!A0"`), `the transcript's part after the tab is neutralised: ${res.body}`);
      const row = parseCsv(res.body).find((r) => r[0] === s.conversation.id)!;
      assert.equal(row[1], `x;'=1+1;'@SUM(1+1)`);
      // A spreadsheet that splits on ';' (or tabs) without honouring quotes still finds no live formula.
      for (const part of res.body.split(/[;,\t\r\n]/)) assert.doesNotMatch(part.replace(/^"/, ''), /^ *[=+\-@]/, part);
    });

    it('format=csv with nothing matching is the contract\'s 404', async () => {
      const res = await logs({ format: 'csv', channel: 'web' });
      bad(res, 404, /^No logs found for CSV export$/);
      bad(await logs({ format: 'csv', eventType: 'call', channel: 'sms' }), 404, /No logs found/);
    });
  });

  describe('logs at size', () => {
    it(`a CSV of more rows than one batch (${CSV_BATCH}) is streamed over HTTP, every row once, newest first`, async () => {
      const o = await tenant();
      const db = h().database.db;
      const room = await roomRepo.findOrCreate(db, { org_id: o.id, account_id: o.agentId, counterpart: '+14155550800', counterpart_kind: 'phone', display_name: null, junk: 0, junk_reason: null }, Date.now());
      const n = CSV_BATCH * 2 + 500;
      const base = Date.now() - DAY;
      await db.transaction().execute(async (tx) => {
        for (let i = 0; i < n; i++) {
          // Pairs share a start time: the cursor must tell them apart by id.
          const at = base + Math.floor(i / 2) * 1000;
          await conversationRepo.insert(tx, {
            id: crypto.randomUUID(), room_id: room.id, org_id: o.id, account_id: o.agentId, channel: 'sms', direction: 'inbound', counterpart: room.counterpart,
            agent_version: null, engine: 'simulated', provider: null, model: null, task_id: null, carrier_ref: null,
            started_at: at, last_activity_at: at, state: '{}', created_at: at, updated_at: at,
          });
        }
      });
      const listening = await h().app.listen({ port: 0, host: '127.0.0.1' }).then(() => h().app.server.address() as AddressInfo);
      const res = await request(`http://127.0.0.1:${listening.port}/api/v2/logs?token=${o.token}&format=csv&fields=id,timestamp`);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['transfer-encoding'], 'chunked', 'streamed, not a body of known length');
      assert.equal(res.headers['content-length'], undefined);
      let chunks = 0;
      let text = '';
      for await (const chunk of res.body) {
        chunks++;
        text += (chunk as Buffer).toString('utf8');
      }
      assert.ok(chunks > 1, `several chunks (${chunks})`);
      const rows = parseCsv(text).slice(1);
      assert.equal(rows.length, n);
      assert.equal(new Set(rows.map((r) => r[0])).size, n, 'every conversation once');
      const times = rows.map((r) => Date.parse(r[1]));
      assert.ok(times.every((t, i) => i === 0 || t <= times[i - 1]), 'newest first');
      // With transcripts the stream reads smaller batches; still every row once.
      const withTranscripts = await h().app.inject({ method: 'GET', url: '/api/v2/logs', query: { token: o.token, format: 'csv', fields: 'id,transcript' } });
      assert.equal(withTranscripts.statusCode, 200);
      const transcriptRows = parseCsv(withTranscripts.body).slice(1);
      assert.deepEqual(transcriptRows.map((r) => r[0]), rows.map((r) => r[0]));
      const json = await h().call('GET', '/api/v2/logs', { token: o.token, query: { pageSize: 10000 } });
      assert.equal(json.body.totalCount, n);
      assert.deepEqual(json.body.logs.map((l: any) => l.id), rows.map((r) => r[0]), 'the CSV has the JSON\'s rows in the JSON\'s order');
    });
  });

  describe('tenancy', () => {
    it('another organization\'s rooms and conversations are 404 and never listed', async () => {
      const a = await tenant();
      const b = await tenant();
      const at = Date.now() - MINUTE;
      const s = await seed(h(), { orgId: a.id, accountId: a.agentId, counterpart: '+14155550901', at, messages: [{ dir: 'inbound', text: 'private to a' }] });
      bad(await h().call('GET', `/api/v2/messages/${s.roomId}`, { token: b.token }), 404, /roomId/);
      bad(await h().call('GET', `/api/v2/conversation/${s.roomId}/${s.conversation.id}`, { token: b.token }), 404, /roomId/);
      bad(await h().call('POST', `/api/v2/conversations/${s.roomId}/junk`, { token: b.token, body: { junk: true } }), 404, /roomId/);
      // Another organization's agent id with this organization's room id part is no room either.
      bad(await h().call('GET', `/api/v2/messages/${b.agentId}:${s.room.id}`, { token: b.token }), 404, /roomId/);
      const lists = [
        await h().call('GET', '/api/v2/conversations', { token: b.token, query: { pagination: true } }),
        await h().call('GET', '/api/v2/messages/recent', { token: b.token }),
        await h().call('GET', '/api/v2/logs', { token: b.token }),
      ];
      for (const l of lists) {
        ok(l);
        assert.ok(!JSON.stringify(l.body).includes('private to a') && !JSON.stringify(l.body).includes(s.conversation.id));
      }
      bad(await h().call('GET', '/api/v2/logs', { token: b.token, query: { agentId: `camp${a.agentId}` } }), 404, /agentId/);
      bad(await h().call('GET', '/api/v2/logs', { token: b.token, query: { roomId: s.roomId } }), 404, /roomId/);
      bad(await h().call('GET', '/api/v2/logs', { token: b.token, query: { roomId: `${b.agentId}:${s.room.id}` } }), 404, /roomId/);
      const batch = await h().call('POST', '/api/v2/conversation/batch', { token: b.token, body: { items: [{ roomId: s.roomId, uuid: s.conversation.id }] } });
      assert.deepEqual(batch.body.stats, { requested: 1, ok: 0, failed: 1 });
      assert.equal((await roomRepo.find(h().database.db, s.room.id))!.unread, 1, 'a refused read marks nothing read');
    });

    it('an agent\'s token sees only its own agent\'s rooms, messages and logs', async () => {
      const o = await tenant();
      const other = await h().agent(o.id);
      const at = Date.now() - MINUTE;
      const mine = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155551001', at, messages: [{ dir: 'inbound', text: 'to the default agent' }] });
      const theirs = await seed(h(), { orgId: o.id, accountId: other.id, counterpart: '+14155551001', at: at + 1000, messages: [{ dir: 'inbound', text: 'to the other agent' }] });
      const inbox = await h().call('GET', '/api/v2/conversations', { token: o.agentToken, query: { pagination: true } });
      assert.deepEqual(inbox.body.rooms.map((r: any) => r.roomId), [mine.roomId]);
      const orgInbox = await h().call('GET', '/api/v2/conversations', { token: o.token, query: { pagination: true } });
      assert.deepEqual(orgInbox.body.rooms.map((r: any) => r.roomId), [theirs.roomId, mine.roomId]);
      const recent = await h().call('GET', '/api/v2/messages/recent', { token: o.agentToken });
      assert.deepEqual(recent.body.map((m: any) => m.message), ['to the default agent']);
      bad(await h().call('GET', `/api/v2/messages/${theirs.roomId}`, { token: o.agentToken }), 404, /roomId/);
      bad(await h().call('GET', `/api/v2/conversation/${theirs.roomId}/${theirs.conversation.id}`, { token: o.agentToken }), 404, /roomId/);
      const logs = await h().call('GET', '/api/v2/logs', { token: o.agentToken });
      assert.deepEqual(logs.body.logs.map((l: any) => l.id), [mine.conversation.id]);
      bad(await h().call('GET', '/api/v2/logs', { token: o.agentToken, query: { agentId: `camp${other.id}` } }), 404, /agentId/);
      bad(await h().call('GET', '/api/v2/logs', { token: o.agentToken, query: { roomId: theirs.roomId } }), 404, /roomId/);
      const batch = await h().call('POST', '/api/v2/conversation/batch', {
        token: o.agentToken, body: { items: [{ roomId: mine.roomId, uuid: mine.conversation.id }, { roomId: theirs.roomId, uuid: theirs.conversation.id }] },
      });
      assert.deepEqual(batch.body.stats, { requested: 2, ok: 1, failed: 1 });
    });

    it('resellers name the organization or agent with targetAccountId; without it they are refused; another reseller\'s is 404', async () => {
      const o = await tenant();
      const s = await seed(h(), { orgId: o.id, accountId: o.agentId, counterpart: '+14155551101', at: Date.now() - MINUTE, messages: [{ dir: 'inbound', text: 'via reseller' }] });
      bad(await h().call('GET', '/api/v2/conversations', { token: reseller.token, query: { pagination: true } }), 403, /targetAccountId/);
      const viaOrg = await h().call('GET', '/api/v2/conversations', { token: reseller.token, query: { pagination: true, targetAccountId: o.id } });
      assert.deepEqual(viaOrg.body.rooms.map((r: any) => r.roomId), [s.roomId]);
      ok(await h().call('GET', `/api/v2/messages/${s.roomId}`, { token: reseller.token, query: { targetAccountId: o.agentId } }));
      const logs = await h().call('GET', '/api/v2/logs', { token: reseller.token, query: { targetAccountId: o.id } });
      assert.deepEqual(logs.body.logs.map((l: any) => l.id), [s.conversation.id]);
      const stranger = await h().reseller();
      bad(await h().call('GET', '/api/v2/conversations', { token: stranger.token, query: { targetAccountId: o.id } }), 404, /targetAccountId/);
      bad(await h().call('GET', '/api/v2/logs', { token: stranger.token, query: { targetAccountId: o.id } }), 404, /targetAccountId/);
    });
  });
});
