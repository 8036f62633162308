// A SIP ladder diagram: one vertical line per party (our endpoint first, then the peers in the order
// they appear) and one arrow per message in time order, labelled with its method or status line and
// its time. The same messages follow as an ordered list, which is what screen readers and narrow
// screens read (the drawing is hidden from the former and scrolls inside its box on the latter).
import { useId } from 'react';

export interface CapturedMessage {
  timestamp: number;
  direction: string;
  transport: string;
  source: string;
  destination: string;
  message: string;
}

export interface Step {
  from: number;
  to: number;
  /** `REGISTER` or `401 Unauthorized`. */
  label: string;
  /** The message's first line. */
  line: string;
  at: number;
  transport: string;
  request: boolean;
}

/** The message's first line as a short label: the method of a request, the status and reason of a response. */
export function labelOf(message: string): { label: string; line: string; request: boolean } {
  const end = message.indexOf('\r\n');
  const line = (end < 0 ? message : message.slice(0, end)).trim();
  const response = /^SIP\/2\.0\s+(\d{3})\s*(.*)$/.exec(line);
  if (response) return { label: `${response[1]} ${response[2]}`.trim(), line, request: false };
  const request = /^([A-Za-z]+)\s/.exec(line);
  return { label: request ? request[1].toUpperCase() : line.slice(0, 40), line, request: true };
}

/** Parties (ours first) and the steps between them, in time order. */
export function ladderOf(messages: readonly CapturedMessage[]): { parties: string[]; ours: Set<string>; steps: Step[] } {
  const ours = new Set<string>();
  for (const m of messages) ours.add(m.direction === 'out' ? m.source : m.destination);
  const parties = [...ours];
  for (const m of messages) for (const a of [m.source, m.destination]) if (!parties.includes(a)) parties.push(a);
  const sorted = [...messages].sort((a, b) => a.timestamp - b.timestamp);
  const steps = sorted.map((m) => ({
    from: parties.indexOf(m.source), to: parties.indexOf(m.destination), at: m.timestamp, transport: m.transport, ...labelOf(m.message),
  }));
  return { parties, ours, steps };
}

/** hh:mm:ss.mmm, local time. */
export function clock(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

const LANE = 220;
const TOP = 56;
const ROW = 40;
const MARGIN = 110;

export function Ladder({ messages, title }: { messages: readonly CapturedMessage[]; title: string }) {
  const id = useId();
  const { parties, ours, steps } = ladderOf(messages);
  const name = (p: string) => (ours.has(p) ? `callplane ${p}` : p);
  const width = MARGIN * 2 + LANE * Math.max(1, parties.length - 1);
  const height = TOP + ROW * (steps.length + 1);
  const x = (i: number) => MARGIN + LANE * i;
  return (
    <div className="ladder">
      <div className="ladder-wrap">
        <svg
          viewBox={`0 0 ${width} ${height}`} width={width} height={height} role="img" aria-labelledby={`${id}-t`}
          className="ladder-svg" data-testid="sip-ladder"
        >
          <title id={`${id}-t`}>{title}: {steps.length} messages between {parties.map(name).join(', ')}</title>
          <defs>
            <marker id={`${id}-arrow`} viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" className="ladder-head" />
            </marker>
          </defs>
          {parties.map((p, i) => (
            <g key={p} className="ladder-party">
              <text x={x(i)} y={18} textAnchor="middle" className="ladder-name">{ours.has(p) ? 'callplane' : 'peer'}</text>
              <text x={x(i)} y={36} textAnchor="middle" className="ladder-addr">{p}</text>
              <line x1={x(i)} y1={TOP - 10} x2={x(i)} y2={height - 8} className="ladder-lane" />
            </g>
          ))}
          {steps.map((s, n) => {
            const y = TOP + ROW * (n + 1) - 8;
            const self = s.from === s.to;
            const x1 = x(s.from);
            const x2 = self ? x1 + 40 : x(s.to);
            const mid = (x1 + x2) / 2;
            return (
              <g key={n} className={s.request ? 'ladder-step ladder-request' : 'ladder-step ladder-response'} data-label={s.label}>
                <text x={self ? x1 + 46 : mid} y={y - 7} textAnchor={self ? 'start' : 'middle'} className="ladder-label">{s.label}</text>
                <line x1={x1} y1={y} x2={x2} y2={y} markerEnd={`url(#${id}-arrow)`} className="ladder-arrow" />
                <text x={8} y={y + 4} className="ladder-time">{clock(s.at)}</text>
              </g>
            );
          })}
        </svg>
      </div>
      <ol className="ladder-list" aria-label={`${title}: the messages in order`}>
        {steps.map((s, n) => (
          <li key={n}>
            <time dateTime={new Date(s.at).toISOString()}>{clock(s.at)}</time>{' '}
            <strong>{s.label}</strong>{' '}
            <span className="muted">{name(parties[s.from])} → {name(parties[s.to])} ({s.transport})</span>
            {s.line !== s.label ? <code className="ladder-line">{s.line}</code> : null}
          </li>
        ))}
      </ol>
    </div>
  );
}
