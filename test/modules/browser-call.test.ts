// "Talk to this agent" from the browser (docs/voice.md, "Talking from the browser"), on both
// engines, offline: a token minted by the authenticated POST opens the WebSocket; the client here
// is a browser's stand-in that streams espeak-ng speech as 16 kHz PCM16 in real time (silence
// around it, as a microphone does) and keeps what it is sent. The agent's voice session hears it
// (VAD, pocketsphinx), the scripted model double answers, and the reply as the client heard it is
// recognised with pocketsphinx; the socket's transcript messages and the stored conversation (on
// the test channel) say the same. Also: what is refused (bad, reused, expired, another tenant's
// token; a second call of the same account; a rate not offered). The SIMULATED notice is the
// console test's (test/console/talk.test.ts: a deployment without a model).
// @lane wall
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { messageRepo } from '../../src/modules/conversations/repository.ts';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { resample } from '../../src/speech/resample.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { freePort, waitFor } from '../helpers/wait.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const RATE = 16000;
const FRAME = RATE / 50;
const PHRASES = ['what are your opening hours', 'goodbye', 'hello there'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until nothing more has come for 600 ms (the agent finished speaking). */
async function quiet(c: { heard: Int16Array[] }) {
  for (let n = -1; n !== c.heard.length;) {
    n = c.heard.length;
    await sleep(600);
  }
}
const rms = (pcm: Int16Array) => Math.sqrt(pcm.reduce((s, x) => s + x * x, 0) / Math.max(1, pcm.length));

/** A browser's stand-in on the talk socket: a microphone streaming in real time, and a speaker keeping what comes. */
class TalkClient {
  readonly messages: Array<Record<string, any>> = [];
  readonly heard: Int16Array[] = [];
  closed: { code: number; reason: string } | undefined;
  private mic: Int16Array[] = [];
  private timer: NodeJS.Timeout | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, binary) => {
      const buf = data as Buffer;
      if (binary) {
        const pcm = new Int16Array(buf.length / 2);
        for (let i = 0; i < pcm.length; i++) pcm[i] = buf.readInt16LE(i * 2);
        this.heard.push(pcm);
      } else {
        this.messages.push(JSON.parse(buf.toString('utf8')));
      }
    });
    ws.on('close', (code, reason) => { this.closed = { code, reason: reason.toString() }; clearInterval(this.timer); });
  }

  static async open(url: string): Promise<TalkClient> {
    const ws = new WebSocket(url);
    const c = new TalkClient(ws);
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); ws.once('close', () => resolve()); });
    return c;
  }

  /** Streams the microphone: 20 ms each 20 ms, what was queued with speak() else silence. */
  startMic(): void {
    this.timer = setInterval(() => {
      if (this.ws.readyState !== WebSocket.OPEN) return;
      const next = this.mic.shift() ?? new Int16Array(FRAME);
      this.ws.send(Buffer.from(next.buffer, next.byteOffset, next.byteLength), { binary: true });
    }, 20);
  }

  speak(pcm: Int16Array): void {
    for (let at = 0; at < pcm.length; at += FRAME) {
      const f = new Int16Array(FRAME);
      f.set(pcm.subarray(at, at + FRAME));
      this.mic.push(f);
    }
  }

  hangUp(): void {
    this.ws.send(JSON.stringify({ type: 'hangup' }));
  }

  closedWith(): Promise<{ code: number; reason: string }> {
    return waitFor('the socket closed', async () => this.closed, 10_000);
  }

  stop(): void {
    clearInterval(this.timer);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close();
  }
}

for (const engine of ENGINES) {
  describe(`talking to an agent from the browser [${engine}]`, { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
    let h: Harness;
    let llm: FakeLlm;
    let base: string;
    const tts = new EspeakEngine();
    const stt = new PocketsphinxEngine();

    before(async () => {
      await tts.check();
      await stt.check();
      llm = await startFakeLlm({ models: ['fake-model'] });
      const port = await freePort();
      base = `ws://127.0.0.1:${port}`;
      h = await startHarness(engine, {
        CALLPLANE_PUBLIC_URL: `http://127.0.0.1:${port}`,
        CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
      }, { voiceGrammar: { kind: 'phrases', phrases: PHRASES } });
      await h.app.listen({ port, host: '127.0.0.1' });
      await h.vad.ready();
    });
    after(async () => {
      await h?.close();
      await llm?.close();
    });

    async function org(name: string) {
      const r = await h.reseller();
      const o = await h.organization(r.id, { orgName: `${name} ${engine}` });
      // The staging configuration is what the call talks to: nothing is published.
      const set = await h.call('POST', '/api/v2/agent', { token: o.token, body: { welcomeMessage: 'Hello there.', agentInstructions: 'You are the front desk of Acme Dental.', callerResponseTimeout: 60, speakingTimeout: 700 } });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      return o;
    }
    const mint = (o: { agentId: number; token: string }, body: Record<string, unknown> = {}) =>
      h.call('POST', `/api/v2/agent/${o.agentId}/talk`, { token: o.token, body });

    it('hears the caller, answers through the model, and the caller hears the reply; the transcript comes over the socket and is kept on the test channel', async () => {
      const o = await org('Browser Talk');
      const minted = await mint(o);
      assert.equal(minted.status, 200, JSON.stringify(minted.body));
      assert.equal(minted.body.simulated, false);
      assert.equal(minted.body.engine, 'model');
      assert.equal(minted.body.sampleRate, RATE);
      assert.match(minted.body.path, new RegExp(`^/api/v2/agent/${o.agentId}/talk\\?token=`));
      // One call at a time per account: a second token is refused while this one's call runs (below).
      llm.script.push({ text: 'We open at nine.' });
      const client = await TalkClient.open(base + minted.body.path);
      client.startMic();
      try {
        const ready = await waitFor('ready', async () => client.messages.find((m) => m.type === 'ready'), 10_000);
        assert.equal(ready.sampleRate, RATE);
        assert.equal(ready.simulated, false);
        // The welcome is heard, and shown.
        await waitFor('the welcome', async () => client.heard.filter((f) => rms(f) > 300).length >= 20
          && client.messages.some((m) => m.type === 'transcript' && m.role === 'agent' && m.text === 'Hello there.'), 15_000);
        const busy = await mint(o);
        assert.equal(busy.status, 409, JSON.stringify(busy.body));
        assert.equal(busy.body.success, false);
        await quiet(client);
        const welcomeFrames = client.heard.length;

        const asked = llm.requests.length;
        const said = await tts.synthesize('what are your opening hours', { language: 'en-US' });
        client.speak(resample(said.pcm16, said.sampleRate, RATE));
        await waitFor('the model asked', async () => llm.requests.length > asked, 20_000);
        const request = llm.requests.at(-1)!.body.messages;
        assert.match(request[0]!.content!, /front desk of Acme Dental/);
        assert.deepEqual(request.slice(1).map((m) => `${m.role}:${m.content}`), ['assistant:Hello there.', 'user:what are your opening hours']);

        // The reply as the browser heard it (paced in real time), recognised.
        await waitFor('the reply heard', async () => client.messages.some((m) => m.type === 'transcript' && m.text === 'We open at nine.')
          && client.heard.slice(welcomeFrames).filter((f) => rms(f) > 300).length > 20, 20_000);
        await quiet(client);
        const reply = client.heard.slice(welcomeFrames);
        const pcm = new Int16Array(reply.reduce((n, f) => n + f.length, 0));
        let at = 0;
        for (const f of reply) { pcm.set(f, at); at += f.length; }
        const recognised = await stt.transcribe(resample(pcm, RATE, 16000), 16000, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['we open at nine', 'we close at five', 'hello there'] } });
        assert.equal(recognised.text, 'we open at nine');

        const lines = client.messages.filter((m) => m.type === 'transcript').map((m) => `${m.role}:${m.text}`);
        assert.deepEqual(lines, ['agent:Hello there.', 'caller:what are your opening hours', 'agent:We open at nine.']);
        const stored = (await messageRepo.ofConversation(h.database.db, ready.conversationUuid)).map((m) => `${m.direction}:${m.text}`);
        assert.deepEqual(stored, ['outbound:Hello there.', 'inbound:what are your opening hours', 'outbound:We open at nine.']);

        client.hangUp();
        const closed = await client.closedWith();
        assert.equal(closed.code, 1000);
        const c = await waitFor('the conversation ended', async () => {
          const row = await h.database.db.selectFrom('conversations').selectAll().where('id', '=', ready.conversationUuid).executeTakeFirst();
          return row?.ended_at !== null && row;
        });
        assert.equal(c.channel, 'test');
        assert.equal(c.org_id, o.id);
        // Kept out of the inbox like the staging chat, and counted as test usage.
        const inbox = await h.call('GET', '/api/v2/conversations', { token: o.token });
        assert.equal(inbox.body.totalRooms, 0, JSON.stringify(inbox.body));
        const usage = await h.call('GET', '/api/v2/stats/usage', { token: o.token, query: { allItems: true } });
        assert.equal(usage.body.usage.conversations, 0, JSON.stringify(usage.body.usage));
        assert.equal(usage.body.usage.testConversations, 1, JSON.stringify(usage.body.usage));
        // The account may call again once the call is over.
        await waitFor('the call released', async () => (await mint(o)).status === 200);
      } finally {
        client.stop();
      }
    });

    it('refuses sockets without a valid, unused token for that agent, another tenant\'s agent, and rates it does not offer', async () => {
      const o = await org('Browser Refusals');
      const other = await org('Browser Other');
      const bad = await mint(o, { sampleRate: 12000 });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /sampleRate/);
      const foreign = await h.call('POST', `/api/v2/agent/${other.agentId}/talk`, { token: o.token, body: {} });
      assert.equal(foreign.status, 404, JSON.stringify(foreign.body));
      assert.equal((await h.call('POST', `/api/v2/agent/${o.agentId}/talk`, { token: null, body: {} })).status, 401);

      const conversationsBefore = (await h.database.db.selectFrom('conversations').select('id').execute()).length;
      for (const path of [`/api/v2/agent/${o.agentId}/talk`, `/api/v2/agent/${o.agentId}/talk?token=v1.1.1.16000.9999999999.AAAAAAAAAAAAAAAAAAAAAA.${'A'.repeat(43)}`]) {
        const c = await TalkClient.open(base + path);
        assert.equal((await c.closedWith()).code, 1008, path);
      }
      // A real token on another agent's path, then on its own twice: the second is refused.
      const minted = await mint(o, { sampleRate: 8000 });
      assert.equal(minted.status, 200);
      const elsewhere = await TalkClient.open(`${base}/api/v2/agent/${other.agentId}/talk?token=${encodeURIComponent(minted.body.token)}`);
      assert.equal((await elsewhere.closedWith()).code, 1008);
      assert.equal((await h.database.db.selectFrom('conversations').select('id').execute()).length, conversationsBefore, 'a refused socket opens nothing');
      const first = await TalkClient.open(base + minted.body.path);
      try {
        const ready = await waitFor('ready', async () => first.messages.find((m) => m.type === 'ready'), 10_000);
        assert.equal(ready.sampleRate, 8000);
        const again = await TalkClient.open(base + minted.body.path);
        assert.equal((await again.closedWith()).code, 1008);
      } finally {
        first.hangUp();
        await first.closedWith();
      }
    });
  });
}
