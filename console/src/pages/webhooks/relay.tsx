// One webhook relay: its configuration as the API shows it (getWebhookRelay, secrets masked), a
// form to change it (upsertWebhookRelay), delete (deleteWebhookRelay, asked first), and the log of
// its forwards (listWebhookRelayDeliveries, refreshed every 3 s) with replay.
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok } from '../../api.ts';
import { navigate } from '../../router.tsx';
import { relayDeleted, relayDeliveriesChanged, webhookQueries } from '../../queries/webhooks.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Loading, Note, Page, Section } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { DeliveriesTable, type Delivery } from './deliveries.tsx';
import { codeRanges, RelayForm, Verification } from './relays.tsx';
import { WebhookNav } from './subscriptions.tsx';

const PAGE = 25;

export default function RelayPage({ params }: { params: Record<string, string> }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const type = params.type;
  const relay = useQuery(webhookQueries.relay(acting, type));
  const remove = useMutation({
    mutationFn: () => ok(api.DELETE('/api/v2/webhookRelay/{type}', { params: { path: { type }, query: { ...target } } })),
    onSuccess: () => { void relayDeleted(client, orgId); navigate('/webhooks/relays'); },
  });
  const c = relay.data?.config;
  return (
    <Page title={`Webhook relay: ${type}`} actions={<WebhookNav />}>
      {relay.isPending ? <Loading what="Loading the relay" /> : relay.error ? <ErrorNote error={relay.error} /> : c ? (
        <>
          <Section title="Configuration" actions={<Confirm label="Delete relay" question="Delete this relay? Its ingress URL stops answering and its log goes with it." confirm="Yes, delete it" onConfirm={() => remove.mutate()} disabled={remove.isPending} />}>
            <ErrorNote error={remove.error} />
            <dl className="kv">
              <dt>Ingress URL</dt><dd className="break"><code>{c.ingressUrl}</code></dd>
              <dt>Forwards to</dt><dd className="break">{c.url}</dd>
              <dt>Verification</dt><dd><Verification config={c} /></dd>
              <dt>Timeout</dt><dd>{c.timeout} ms</dd>
              <dt>Success codes</dt><dd>{codeRanges(c.successStatusCodes)}</dd>
              <dt>Custom headers</dt><dd>{c.headers.length ? c.headers.map((h) => Object.entries(h).map(([k, v]) => `${k}: ${String(v)}`).join('')).join('; ') : 'none'}</dd>
              <dt>Signing secret</dt><dd><code>{c.signingSecret}</code></dd>
            </dl>
          </Section>
          <Section title="Change">
            <RelayForm key={c.type} existing={c} />
          </Section>
          <RelayDeliveries type={type} />
        </>
      ) : null}
    </Page>
  );
}

function RelayDeliveries({ type }: { type: string }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const [offset, setOffset] = useState(0);
  const list = useQuery(webhookQueries.relayDeliveries(acting, type, { limit: PAGE, offset }));
  const replay = useMutation({
    mutationFn: (d: Delivery) => ok(api.POST('/api/v2/webhookRelay/{type}/deliveries/{id}/replay', { params: { path: { type, id: d.id }, query: { ...target } } })),
    onSuccess: () => void relayDeliveriesChanged(client, orgId, type),
  });
  const total = list.data?.total ?? 0;
  return (
    <Section title="Deliveries">
      {list.isPending ? <Loading what="Loading deliveries" /> : list.error ? <ErrorNote error={list.error} /> : (
        <>
          <DeliveriesTable caption="Forwards of this relay" rows={list.data.deliveries} onReplay={(d) => replay.mutate(d)} replaying={replay.isPending ? replay.variables?.id : undefined} />
          <div className="pager">
            <span>{total === 0 ? 'No deliveries' : `Deliveries ${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}`}</span>
            <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>Previous page</Button>
            <Button disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>Next page</Button>
          </div>
        </>
      )}
      <ErrorNote error={replay.error} />
      {replay.isSuccess ? <Note>Sent again as a new delivery of the same event ({replay.data.delivery.eventId}).</Note> : null}
    </Section>
  );
}
