// Live: the conversations in progress below the organization, each with its transcript as it is
// spoken, from the live feed (GET /api/v2/conversations/live). A dropped stream is taken up again
// with growing waits; the page says in words whether it is connected.
import { useEffect, useState } from 'react';
import { useSession } from '../../session.tsx';
import { Link } from '../../router.tsx';
import { Badge, Note, Page, Section } from '../../ui/parts.tsx';
import { AccountName } from '../../ui/names.tsx';
import { when } from '../../api.ts';
import { applyEvent, followLive, type FeedStatus, type LiveCall } from './live-feed.ts';
import { OutcomeBadge, Transcript, conversationPath } from './parts.tsx';

function statusWords(s: FeedStatus): string {
  switch (s.state) {
    case 'connecting': return 'Connecting to the live feed…';
    case 'connected': return 'Connected: new lines appear as they are said.';
    case 'reconnecting': return `Reconnecting (attempt ${s.attempt}, in ${s.inSeconds} s): ${s.reason}.`;
    case 'stopped': return `Not connected: ${s.reason}`;
  }
}

function CallCard({ call }: { call: LiveCall }) {
  const kind = call.eventType === 'call' ? 'Call' : 'Conversation';
  const who = call.counterpartName ? `${call.counterpartName} (${call.counterpart})` : call.counterpart;
  const ended = call.endedAt !== null || call.gone;
  return (
    <Section
      title={`${kind} ${call.direction === 'inbound' ? 'from' : 'to'} ${who}`}
      actions={call.gone && call.endedAt === null ? <Badge tone="neutral">No longer in progress</Badge> : <OutcomeBadge outcome={call.outcome} />}
    >
      <p className="muted">
        {call.channel} · agent <AccountName id={Number(String(call.agentId).replace(/^camp/, ''))} /> · started {when(call.startedAt)}
        {call.answeredBy ? ` · answered by ${call.answeredBy}` : ''}
        {call.endedAt !== null ? ` · ended ${when(call.endedAt)}${call.duration !== null ? ` after ${call.duration} s` : ''}` : ''}
      </p>
      {call.messages.length === 0 ? <p className="muted">Nothing said yet.</p> : null}
      <Transcript lines={call.messages} channel={call.channel} live label={`Transcript of the ${kind.toLowerCase()} with ${who}`} />
      {ended ? <p><Link to={conversationPath(call.roomId, call.uuid)}>Open the full conversation</Link></p> : null}
    </Section>
  );
}

export default function Live() {
  const { target, orgId } = useSession();
  // Another organization chosen at the top is another feed: the page starts again, empty.
  return <LiveFeed key={`${orgId}/${target.targetAccountId}`} targetId={target.targetAccountId} />;
}

function LiveFeed({ targetId }: { targetId: number | undefined }) {
  const [calls, setCalls] = useState<LiveCall[]>([]);
  const [status, setStatus] = useState<FeedStatus>({ state: 'connecting' });

  useEffect(() => {
    const abort = new AbortController();
    void followLive({
      target: targetId === undefined ? {} : { targetAccountId: targetId },
      signal: abort.signal,
      onEvent: (e) => setCalls((cs) => applyEvent(cs, e)),
      onStatus: setStatus,
    });
    return () => abort.abort();
  }, [targetId]);

  const open = calls.filter((c) => c.endedAt === null && !c.gone);
  const ended = calls.filter((c) => c.endedAt !== null || c.gone);
  return (
    <Page title="Live">
      <p role="status" className={status.state === 'connected' || status.state === 'connecting' ? 'note' : 'error'} data-feed={status.state}>{statusWords(status)}</p>
      <div className="live-calls">
        <h2>In progress ({open.length})</h2>
        {open.length === 0 ? <p className="muted">No call or conversation is in progress. New ones appear here as they start.</p> : null}
        {open.map((c) => <CallCard key={c.uuid} call={c} />)}
        {ended.length > 0 ? <h2>Ended while this page was open ({ended.length})</h2> : null}
        {ended.map((c) => <CallCard key={c.uuid} call={c} />)}
      </div>
      {status.state === 'stopped' ? <Note>Reload the page to try again.</Note> : null}
    </Page>
  );
}
