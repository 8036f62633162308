// The deliveries log shared by subscriptions and relays: each delivery's state in words, its
// attempts, the last response code or error, and when the next try is due; a replay button for a
// delivery that has ended (the API answers 409 while one is pending or running).
import { when } from '../../api.ts';
import { Badge, Button, Table } from '../../ui/parts.tsx';
import '../tasks/tasks.css';
import './webhooks.css';

export interface Delivery {
  id: string; eventId: string; state: string; nextAttemptAt: number | null; createdAt: number; attempts: unknown[];
  [key: string]: unknown;
}

interface Attempt { attempt?: number; at?: number; statusCode?: number | null; error?: string | null; durationMs?: number; responseExcerpt?: string | null; nextAttemptAt?: number | null }

const TONE: Record<string, 'neutral' | 'good' | 'warn' | 'bad' | 'live'> = { pending: 'neutral', running: 'live', finished: 'good', failed: 'bad', canceled: 'warn' };
const WORDS: Record<string, string> = { finished: 'delivered', failed: 'failed', pending: 'pending', running: 'sending', canceled: 'canceled' };

export function DeliveryState({ state }: { state: string }) {
  return <Badge tone={TONE[state] ?? 'neutral'}>{WORDS[state] ?? state}</Badge>;
}

const text = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
const count = (v: unknown) => (typeof v === 'number' ? v : undefined);

export function DeliveriesTable({ caption, rows, withTarget, onReplay, replaying }: {
  caption: string; rows: readonly Delivery[]; withTarget?: boolean; onReplay: (d: Delivery) => void; replaying?: string;
}) {
  return (
    <Table<Delivery>
      caption={caption}
      rows={rows}
      rowKey={(d) => d.id}
      empty="No deliveries yet."
      columns={[
        { key: 'event', label: 'Event', cell: (d) => <><span>{text(d.eventType) ?? 'relayed request'}</span><br /><small className="muted break">{d.eventId}</small></> },
        ...(withTarget ? [{ key: 'to', label: 'To', cell: (d: Delivery) => <span className="break cp-url">{text(d.url) ?? '—'}<br /><small className="muted">{text(d.type)}</small></span> }] : []),
        { key: 'state', label: 'Status', cell: (d) => <DeliveryState state={d.state} /> },
        { key: 'attempts', label: 'Attempts', cell: (d) => `${count(d.attempt) ?? d.attempts.length}${count(d.maxAttempts) ? ` of ${count(d.maxAttempts)}` : ''}` },
        { key: 'code', label: 'Response', cell: (d) => <span className="break">{count(d.lastStatusCode) ?? '—'}{text(d.lastError) ? <><br /><small>{text(d.lastError)}</small></> : null}</span> },
        { key: 'next', label: 'Next try', cell: (d) => (d.state === 'pending' ? when(d.nextAttemptAt) : '—') },
        { key: 'created', label: 'Created', cell: (d) => when(d.createdAt) },
        { key: 'payload', label: 'Payload', cell: (d) => (d.payload === undefined ? <span className="muted">—</span> : (
          <details><summary>Show payload</summary><pre className="json" aria-label={`Payload of ${d.eventId}`}>{JSON.stringify(d.payload, null, 2)}</pre></details>
        )) },
        { key: 'log', label: 'Attempt log', cell: (d) => <AttemptLog attempts={d.attempts as Attempt[]} /> },
        {
          key: 'replay', label: 'Replay', cell: (d) => (d.state === 'pending' || d.state === 'running' ? <span className="muted">—</span>
            : <Button onClick={() => onReplay(d)} disabled={replaying === d.id} aria-label={`Replay delivery ${d.id}`}>Replay</Button>),
        },
      ]}
    />
  );
}

function AttemptLog({ attempts }: { attempts: Attempt[] }) {
  if (!attempts.length) return <span className="muted">none yet</span>;
  return (
    <details>
      <summary>{attempts.length} attempt{attempts.length === 1 ? '' : 's'}</summary>
      <ol className="attempts">
        {attempts.map((a, i) => (
          <li key={i}>
            {when(a.at)}: {a.statusCode ?? 'no response'}{a.error ? `, ${a.error}` : ''}{a.durationMs !== undefined ? ` (${a.durationMs} ms)` : ''}
            {a.nextAttemptAt ? `; next at ${when(a.nextAttemptAt)}` : ''}
            {a.responseExcerpt ? <pre className="json">{a.responseExcerpt}</pre> : null}
          </li>
        ))}
      </ol>
    </details>
  );
}
