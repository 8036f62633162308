// Conversations: the organization's rooms, the priority inbox (GET /api/v2/conversations) or the
// junk inbox (GET /api/v2/junkConversations), newest activity first, with a room moved to or from
// junk (POST /api/v2/conversations/{roomId}/junk).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, ok, when } from '../../api.ts';
import { Link } from '../../router.tsx';
import { conversationQueries, inboxChanged, INBOX_PAGE_SIZE, type InboxPage } from '../../queries/conversations.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Loading, Page, Section, Table } from '../../ui/parts.tsx';
import { roomPath, type PageProps } from './parts.tsx';

type Room = InboxPage['rooms'][number];

const JUNK_REASONS: Record<string, string> = {
  marked: 'marked by you', cnamAutoRejectRegex: 'caller name rule', shortCode: 'short code',
  alphanumericSender: 'sender id', automatedAddress: 'automated address',
};

export default function Conversations({ query }: PageProps) {
  const junk = query.get('inbox') === 'junk';
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const [page, setPage] = useState(0);
  const inbox = useQuery(conversationQueries.inbox(acting, junk, page));
  const move = useMutation({
    mutationFn: ({ roomId, junk: to }: { roomId: string; junk: boolean | null }) =>
      ok(api.POST('/api/v2/conversations/{roomId}/junk', { params: { path: { roomId }, query: { ...target } }, body: { junk: to } })),
    onSuccess: () => inboxChanged(client, orgId),
  });

  const columns = [
    { key: 'who', label: 'Contact', cell: (r: Room) => <Link to={roomPath(r.roomId)}>{r.name}</Link> },
    { key: 'last', label: 'Last message', cell: (r: Room) => r.lastMessage || <span className="muted">—</span> },
    { key: 'at', label: 'When', cell: (r: Room) => when(r.lastMessageTimestamp) },
    { key: 'unread', label: 'Unread', cell: (r: Room) => r.unread > 0 ? <Badge tone="live">{r.unread} unread</Badge> : 'none' },
    ...(junk ? [{ key: 'why', label: 'Why junk', cell: (r: Room) => JUNK_REASONS[r.junkReason ?? ''] ?? r.junkReason ?? '—' }] : []),
    {
      key: 'act', label: 'Actions', cell: (r: Room) => (
        <div className="actions">
          <Button onClick={() => move.mutate({ roomId: r.roomId, junk: !junk })} disabled={move.isPending} aria-label={`${junk ? 'Not junk' : 'Move to junk'}: ${r.name}`}>
            {junk ? 'Not junk' : 'Move to junk'}
          </Button>
          {r.junkOverride !== null ? (
            <Button onClick={() => move.mutate({ roomId: r.roomId, junk: null })} disabled={move.isPending} aria-label={`Let the junk rules decide: ${r.name}`}>Let the rules decide</Button>
          ) : null}
        </div>
      ),
    },
  ];

  const total = inbox.data?.totalRooms ?? 0;
  const pages = Math.max(1, Math.ceil(total / INBOX_PAGE_SIZE));
  return (
    <Page title="Conversations">
      <nav aria-label="Conversation pages">
        <ul className="conv-tabs">
          <li><Link to="/conversations" aria-current={junk ? undefined : 'page'} onClick={() => setPage(0)}>Inbox</Link></li>
          <li><Link to="/conversations?inbox=junk" aria-current={junk ? 'page' : undefined} onClick={() => setPage(0)}>Junk</Link></li>
          <li><Link to="/live">Live</Link></li>
          <li><Link to="/logs">Logs</Link></li>
        </ul>
      </nav>
      <Section title={junk ? 'Junk' : 'Inbox'}>
        <ErrorNote error={move.error} />
        {inbox.isPending ? <Loading /> : inbox.error ? <ErrorNote error={inbox.error} /> : (
          <>
            <Table caption={junk ? 'Junk rooms' : 'Rooms'} columns={columns} rows={inbox.data.rooms} rowKey={(r) => r.roomId}
              empty={junk ? 'No room is in the junk inbox.' : 'No conversation yet.'} />
            {pages > 1 ? (
              <div className="actions">
                <Button disabled={page === 0} onClick={() => setPage(page - 1)}>Previous page</Button>
                <span>Page {page + 1} of {pages}</span>
                <Button disabled={page + 1 >= pages} onClick={() => setPage(page + 1)}>Next page</Button>
              </div>
            ) : null}
          </>
        )}
      </Section>
    </Page>
  );
}
