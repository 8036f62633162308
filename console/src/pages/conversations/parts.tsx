// Parts the conversation pages share: a transcript (each line says who spoke, in words), the
// words for outcomes and channels, and links to a room and a conversation.
import type { ReactNode } from 'react';
import { Badge } from '../../ui/parts.tsx';
import './conversations.css';

export interface Line {
  uuid: string;
  message: string;
  timestamp: number;
  direction: string;
  status?: string;
  tool?: { name: string; refused: boolean; arguments?: unknown; result?: unknown };
}

const WHO: Record<string, string> = { inbound: 'Caller', outbound: 'Agent', tool: 'Tool' };

export function whoSaid(direction: string, channel?: string): string {
  if (direction === 'inbound') return channel === 'voice' || channel === 'sip' ? 'Caller' : 'Contact';
  return WHO[direction] ?? direction;
}

function clock(seconds: number): string {
  return new Date(seconds * 1000).toLocaleTimeString();
}

/** A transcript, oldest first. `live` makes it a polite live region: new lines are read out. */
export function Transcript({ lines, channel, live, label }: { lines: readonly Line[]; channel?: string; live?: boolean; label: string }) {
  return (
    <ol className="transcript" aria-label={label} aria-live={live ? 'polite' : undefined} aria-relevant={live ? 'additions' : undefined}>
      {lines.map((l) => (
        <li key={l.uuid} className={l.direction} data-direction={l.direction}>
          <p className="who">{whoSaid(l.direction, channel)} · {clock(l.timestamp)}{l.status && l.status !== 'success' ? ` · ${l.status}` : ''}</p>
          {l.tool ? (
            <p><strong>{l.tool.refused ? 'Refused:' : 'Ran:'}</strong> {l.message || l.tool.name}</p>
          ) : <p className="said">{l.message}</p>}
        </li>
      ))}
    </ol>
  );
}

export function OutcomeBadge({ outcome }: { outcome: string }): ReactNode {
  if (outcome === 'open') return <Badge tone="live">In progress</Badge>;
  const tone = outcome === 'failed' ? 'bad' : outcome === 'no_response' || outcome === 'hung_up' || outcome === 'voicemail' ? 'warn' : 'good';
  return <Badge tone={tone}>Ended: {outcome.replace(/_/g, ' ')}</Badge>;
}

export const roomPath = (roomId: string) => `/conversations/${encodeURIComponent(roomId)}`;
export const conversationPath = (roomId: string, uuid: string) => `/conversations/${encodeURIComponent(roomId)}/${encodeURIComponent(uuid)}`;

/** What the shell hands a page (pages/index.ts's PageProps; declared here, since importing the registry from a page would be a circle). */
export interface PageProps { params: Record<string, string>; query: URLSearchParams }
