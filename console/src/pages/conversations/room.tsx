// A room: its latest messages (GET /api/v2/messages/{roomId}, which marks the room read), grouped
// by conversation, each with a link to the whole conversation.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { when } from '../../api.ts';
import { conversationQueries, inboxChanged } from '../../queries/conversations.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { ErrorNote, Loading, Page, Section } from '../../ui/parts.tsx';
import { Transcript, conversationPath, type PageProps } from './parts.tsx';

export default function Room({ params }: PageProps) {
  const roomId = params.roomId!;
  const acting = useSession();
  const { orgId } = acting;
  const client = useQueryClient();
  const messages = useQuery(conversationQueries.room(acting, roomId));
  // Reading the room marked it read: the inbox's unread counts changed.
  useEffect(() => {
    if (messages.isSuccess) void inboxChanged(client, orgId);
  }, [messages.isSuccess, messages.dataUpdatedAt, client, orgId]);

  const groups: { uuid: string; source: string; lines: NonNullable<typeof messages.data> }[] = [];
  for (const m of messages.data ?? []) {
    const last = groups[groups.length - 1];
    if (last && last.uuid === m.conversationUuid) last.lines.push(m);
    else groups.push({ uuid: m.conversationUuid, source: m.source, lines: [m] });
  }
  const name = messages.data?.find((m) => m.direction === 'inbound')?.fromUser ?? messages.data?.[0]?.toUser ?? roomId;
  return (
    <Page title={`Room ${name}`} actions={<Link to="/conversations">Back to the inbox</Link>}>
      {messages.isPending ? <Loading /> : messages.error ? <ErrorNote error={messages.error} /> : groups.length === 0 ? <p className="muted">No message in this room yet.</p> : (
        groups.map((g) => (
          <Section key={g.uuid} title={`${g.source === 'voice' || g.source === 'sip' ? 'Call' : 'Conversation'} of ${when(g.lines[0]!.timestamp)}`}
            actions={<Link to={conversationPath(roomId, g.uuid)}>Open conversation of {when(g.lines[0]!.timestamp)}</Link>}>
            <Transcript lines={g.lines} channel={g.source} label={`Messages of ${when(g.lines[0]!.timestamp)}`} />
          </Section>
        ))
      )}
    </Page>
  );
}
