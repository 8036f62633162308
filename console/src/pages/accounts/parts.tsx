// Parts of the account pages: a delete that asks first, an account's state in words, and the
// tokens of one account (prefixes listed; a new one shown once, with a copy button; revoke) and its
// console sessions (each with the token it was made from; end one).
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { sessionsChanged, tokenDeleted, tokenQueries, tokensChanged } from '../../queries/tokens.ts';
import { Badge, Button, ErrorNote, Field, Loading, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';

export function ActiveBadge({ active }: { active: unknown }) {
  return active === false ? <Badge tone="warn">Suspended</Badge> : <Badge tone="good">Active</Badge>;
}

/** Copies text to the clipboard, saying in words that it did (or could not). */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [said, setSaid] = useState('');
  return (
    <>
      <Button onClick={() => {
        navigator.clipboard.writeText(text).then(() => setSaid('Copied.'), () => setSaid('Could not copy: select the text and copy it.'));
      }}>{label}</Button>
      <span role="status" className="muted">{said}</span>
    </>
  );
}

interface TokenRow { token: string; description: string; type: string; timestamp: string; userId: number }
interface SessionRow { sessionId: number; origin: string; originType: string; createdAt: number; lastUsedAt: number; expiresAt: number; current: boolean }

/** An account's API tokens: GET/POST/DELETE /api/v2/tokens?targetAccountId=. */
export function TokensPanel({ accountId, self }: { accountId: number; self: boolean }) {
  const client = useQueryClient();
  const target = self ? {} : { targetAccountId: accountId };
  const tokens = useQuery(tokenQueries.list(accountId, target));
  const [description, setDescription] = useState('');
  const [created, setCreated] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/tokens', { params: { query: target }, body: { type: 'admin', description } })),
    onSuccess: (r) => { setCreated(r.token.token); setDescription(''); void tokensChanged(client, accountId); },
  });
  const revoke = useMutation({
    mutationFn: (prefix: string) => ok(api.DELETE('/api/v2/tokens', { params: { query: target }, body: { token: prefix } })),
    // Deleting a token ends the sessions made from it.
    onSuccess: () => void tokenDeleted(client, accountId),
  });
  const sessions = useQuery(tokenQueries.sessions(accountId, target));
  const end = useMutation({
    mutationFn: (sessionId: number) => ok(api.DELETE('/api/v2/tokens/sessions/{sessionId}', { params: { path: { sessionId }, query: target } })),
    onSuccess: () => void sessionsChanged(client, accountId),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); setCreated(null); create.mutate(); };
  return (
    <div className="stack">
      <form className="inline-form" onSubmit={submit}>
        <Field label="New token's description" value={description} onChange={(e) => setDescription(e.target.value)} maxLength={200} />
        <Button kind="primary" type="submit" disabled={create.isPending}>Create token</Button>
      </form>
      <ErrorNote error={create.error} />
      {created ? (
        <div className="note" role="status">
          <p>The new token. Copy it now: it is not shown again (the list shows only its prefix).</p>
          <p><code className="secret" data-testid="new-token">{created}</code></p>
          <CopyButton text={created} label="Copy token" />
        </div>
      ) : null}
      {tokens.isPending ? <Loading /> : tokens.error ? <ErrorNote error={tokens.error} /> : (
        <Table<TokenRow> caption={`Tokens of account ${accountId}`} rows={tokens.data.tokens as TokenRow[]} rowKey={(t) => t.token} empty="No tokens."
          columns={[
            { key: 'prefix', label: 'Prefix', cell: (t) => <code>{t.token}</code> },
            { key: 'description', label: 'Description', cell: (t) => t.description },
            { key: 'type', label: 'Type', cell: (t) => t.type },
            { key: 'created', label: 'Created', cell: (t) => when(t.timestamp) },
            { key: 'actions', label: 'Actions', cell: (t) => <Confirm label="Delete" name={`Delete token ${t.token}`} question={`Delete token ${t.token}? This cannot be undone.`} confirm={`Yes, delete token ${t.token}`} busy={revoke.isPending} onConfirm={() => revoke.mutate(t.token)} /> },
          ]} />
      )}
      <ErrorNote error={revoke.error} />
      {sessions.isPending ? <Loading /> : sessions.error ? <ErrorNote error={sessions.error} /> : (
        <Table<SessionRow> caption={`Console sessions of account ${accountId}`} rows={sessions.data.sessions as SessionRow[]} rowKey={(s) => String(s.sessionId)} empty="No console sessions."
          columns={[
            { key: 'origin', label: 'Made from', cell: (s) => <><code>{s.origin}</code> {s.originType === 'one-time' ? '(sign-in link)' : '(token)'}</> },
            { key: 'created', label: 'Signed in', cell: (s) => when(s.createdAt) },
            { key: 'used', label: 'Last used', cell: (s) => when(s.lastUsedAt) },
            { key: 'expires', label: 'Expires', cell: (s) => when(s.expiresAt) },
            { key: 'actions', label: 'Actions', cell: (s) => s.current ? <span className="muted">This session</span> : <Confirm label="End session" name={`End session ${s.sessionId}`} question={`End the console session made from ${s.origin}? It is signed out at once.`} confirm={`Yes, end session ${s.sessionId}`} busy={end.isPending} onConfirm={() => end.mutate(s.sessionId)} /> },
          ]} />
      )}
      <ErrorNote error={end.error} />
    </div>
  );
}
