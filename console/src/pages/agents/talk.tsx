// "Talk to this agent": a spoken test call with the agent's staging configuration from the browser
// (docs/console.md, "Test call"; docs/voice.md, "Talking from the browser"). POST
// /api/v2/agent/{agentId}/talk mints a one-call token; the WebSocket it names carries the
// microphone as 16 kHz PCM16 (resampled here from the audio context's rate) and brings back the
// agent's voice (played in order as it comes) and the live transcript. When no model is configured
// the page says the replies are SIMULATED before anything is said. Loaded with its tab only.
import { useEffect, useRef, useState } from 'react';
import { api, ok } from '../../api.ts';
import { Badge, Button, ErrorNote, Note, Section } from '../../ui/parts.tsx';

const RATE = 16000;
/** What the agent's audio must reach (RMS of 16-bit samples) to count as heard speech rather than silence. */
const SPEECH_RMS = 300;

interface Line { key: string; from: 'caller' | 'agent'; text: string; interrupted?: boolean }
type State = 'idle' | 'connecting' | 'live' | 'ended';

/**
 * Microphone blocks (the audio context's rate, 44.1 or 48 kHz) to 16 kHz: each output sample the
 * mean of the input samples within half a step of it (a box filter, so what 16 kHz cannot carry is
 * damped rather than folded back), the input's tail carried across blocks.
 */
class Downsampler {
  private carry = new Float32Array(0);
  /** Where the next output sample falls, in samples of the carried tail joined to the next block. */
  private pos = 0;
  constructor(private readonly from: number) {}
  push(input: Float32Array): Int16Array {
    const buf = new Float32Array(this.carry.length + input.length);
    buf.set(this.carry);
    buf.set(input, this.carry.length);
    const step = this.from / RATE;
    const half = Math.max(0.5, step / 2);
    const out: number[] = [];
    for (; this.pos + half < buf.length; this.pos += step) {
      const lo = Math.max(0, Math.ceil(this.pos - half));
      const hi = Math.min(buf.length - 1, Math.floor(this.pos + half));
      let sum = 0;
      for (let i = lo; i <= hi; i++) sum += buf[i]!;
      out.push(hi >= lo ? sum / (hi - lo + 1) : buf[Math.min(buf.length - 1, Math.round(this.pos))]!);
    }
    const keep = Math.min(buf.length, Math.ceil(half) + 2);
    this.carry = buf.slice(buf.length - keep);
    this.pos -= buf.length - keep;
    const pcm = new Int16Array(out.length);
    for (let k = 0; k < out.length; k++) pcm[k] = Math.max(-32768, Math.min(32767, Math.round(out[k]! * 32767)));
    return pcm;
  }
}

export default function TalkPanel({ id }: { id: number }) {
  const [state, setState] = useState<State>('idle');
  const [lines, setLines] = useState<Line[]>([]);
  const [simulated, setSimulated] = useState<boolean | null>(null);
  const [ended, setEnded] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [heardMs, setHeardMs] = useState(0);
  const call = useRef<{ hangup(): void } | null>(null);

  useEffect(() => () => call.current?.hangup(), []);

  async function start() {
    setError(null);
    setLines([]);
    setEnded('');
    setHeardMs(0);
    setState('connecting');
    let audio: AudioContext | undefined;
    let mic: MediaStream | undefined;
    let socket: WebSocket | undefined;
    const stop = () => {
      mic?.getTracks().forEach((t) => t.stop());
      void audio?.close().catch(() => undefined);
      call.current = null;
    };
    try {
      const minted = await ok(api.POST('/api/v2/agent/{agentId}/talk', { params: { path: { agentId: `camp${id}` } }, body: { sampleRate: RATE } }));
      // Said before anything else: the replies will not come from a model.
      setSimulated(minted.simulated);
      mic = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
      audio = new AudioContext();
      const ctx = audio;
      const url = new URL(minted.path, window.location.href);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      socket = new WebSocket(url);
      socket.binaryType = 'arraybuffer';
      const ws = socket;
      // The agent's voice: each piece scheduled after the one before; `clear` drops what is scheduled.
      let playAt = 0;
      let scheduled: AudioBufferSourceNode[] = [];
      const play = (pcm: Int16Array) => {
        const buf = ctx.createBuffer(1, pcm.length, RATE);
        const ch = buf.getChannelData(0);
        let sum = 0;
        for (let i = 0; i < pcm.length; i++) { ch[i] = pcm[i]! / 32768; sum += pcm[i]! * pcm[i]!; }
        const src = ctx.createBufferSource();
        src.buffer = buf;
        src.connect(ctx.destination);
        playAt = Math.max(playAt, ctx.currentTime + 0.05);
        src.start(playAt);
        playAt += buf.duration;
        scheduled.push(src);
        src.onended = () => { scheduled = scheduled.filter((s) => s !== src); };
        if (Math.sqrt(sum / Math.max(1, pcm.length)) > SPEECH_RMS) setHeardMs((ms) => ms + Math.round(buf.duration * 1000));
      };
      ws.onmessage = (ev) => {
        if (ev.data instanceof ArrayBuffer) { play(new Int16Array(ev.data)); return; }
        const m = JSON.parse(String(ev.data)) as Record<string, unknown>;
        if (m.type === 'ready') { setState('live'); if (typeof m.simulated === 'boolean') setSimulated(m.simulated); }
        if (m.type === 'transcript') {
          const from = m.role === 'caller' ? 'caller' : 'agent';
          setLines((ls) => [...ls, { key: `${ls.length}`, from, text: String(m.text) }]);
        }
        if (m.type === 'interrupted') setLines((ls) => ls.map((l, i) => (i === ls.length - 1 && l.from === 'agent' ? { ...l, text: String(m.heard), interrupted: true } : l)));
        if (m.type === 'clear') { for (const s of scheduled) s.stop(); scheduled = []; playAt = 0; }
        if (m.type === 'ended') setEnded(String(m.reason));
      };
      ws.onclose = (ev) => {
        setState('ended');
        if (ev.code !== 1000) setEnded((e) => e || `The call could not go on (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`);
        stop();
      };
      // The microphone, resampled to 16 kHz, sent as it comes (ScriptProcessor: no module to load under the page's CSP).
      const source = ctx.createMediaStreamSource(mic);
      const proc = ctx.createScriptProcessor(2048, 1, 1);
      const down = new Downsampler(ctx.sampleRate);
      proc.onaudioprocess = (e) => {
        if (ws.readyState !== WebSocket.OPEN) return;
        const pcm = down.push(e.inputBuffer.getChannelData(0));
        if (pcm.length > 0) ws.send(pcm.buffer);
      };
      source.connect(proc);
      // A processor runs only when connected onwards; it writes nothing, so nothing is heard of it.
      proc.connect(ctx.destination);
      call.current = {
        hangup: () => {
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'hangup' }));
          else ws.close();
        },
      };
    } catch (err) {
      setError(err);
      setState('idle');
      socket?.close();
      stop();
    }
  }

  const live = state === 'connecting' || state === 'live';
  return (
    <Section title="Test call with staging" actions={live
      ? <Button onClick={() => call.current?.hangup()}>Hang up</Button>
      : <Button kind="primary" onClick={() => void start()}>Talk to this agent</Button>}>
      <p className="muted">A spoken call from this browser to the staging configuration, through the same voice engines and call policy as a phone call (no keypad, no transfers). Your microphone is used while the call lasts; the conversation is recorded as a test, apart from customer conversations.</p>
      {simulated ? <p className="note" role="status" data-testid="talk-simulated"><Badge tone="warn">SIMULATED</Badge> No language model is configured: the agent&apos;s replies in this call are SIMULATED (a fixed text that says so), not a model&apos;s.</p> : null}
      {state === 'connecting' ? <p className="muted" role="status">Connecting…</p> : null}
      {state === 'live' ? <p role="status"><Badge tone="live">Live</Badge> Speak: the agent hears you. <span className="muted" data-testid="talk-heard" data-heard-ms={heardMs}>Agent speech played: {(heardMs / 1000).toFixed(1)} s</span></p> : null}
      <ol className="transcript" aria-label="Test call transcript" aria-live="polite">
        {lines.map((l) => (
          <li key={l.key} className={l.from === 'agent' ? 'outbound' : 'inbound'}>
            <p className="who">{l.from === 'agent' ? 'Agent' : 'You'}{l.interrupted ? ' (cut short)' : ''}</p>
            <p className="said">{l.text}</p>
          </li>
        ))}
      </ol>
      {state === 'ended' ? <Note>The call ended{ended ? `: ${ended}` : ''}. Agent speech played: <span data-testid="talk-heard-total" data-heard-ms={heardMs}>{(heardMs / 1000).toFixed(1)} s</span>.</Note> : null}
      {error ? <ErrorNote error={error} /> : null}
    </Section>
  );
}
