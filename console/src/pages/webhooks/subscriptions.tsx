// Webhooks: the organization's event subscriptions (listWebhooks, addWebhook, removeWebhook), the
// log of what was sent to them (listWebhookDeliveries, refreshed every 3 s) with replay
// (replayWebhookDelivery). Secrets are shown masked, as the API answers them; a new subscription's
// secret is shown the one time the API answers it in full.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { api, ok, when } from '../../api.ts';
import { Link, useRoute } from '../../router.tsx';
import { deliveriesChanged, subscriptionAdded, subscriptionRemoved, webhookQueries } from '../../queries/webhooks.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { DeliveriesTable, type Delivery } from './deliveries.tsx';

type Webhook = paths['/api/v2/webhooks']['get']['responses'][200]['content']['application/json']['webhooks'][number];
/** Each subscription type and what it sends (docs/webhooks.md, "Which types have events today"). */
const TYPES: readonly { type: string; meaning: string }[] = [
  { type: 'task', meaning: 'every state change of a task (pending, running, finished, failed, canceled)' },
  { type: 'conversation', meaning: 'a conversation ended, then its analysis done or failed' },
  { type: 'incoming', meaning: 'an inbound conversation opened (a call or message to an agent)' },
  { type: 'agent', meaning: 'an agent\'s live configuration changed (published or restored)' },
  { type: 'registration', meaning: 'the SIP registration\'s status changed (registered, failed, unregistered, presence)' },
  { type: 'contact', meaning: 'accepted for compatibility with the contract: nothing sends these events yet' },
  { type: 'onboarding', meaning: 'accepted for compatibility with the contract: nothing sends these events yet' },
];
const STATES = ['pending', 'running', 'finished', 'failed', 'canceled'] as const;
const PAGE = 25;

export function WebhookNav() {
  const { path } = useRoute();
  return (
    <nav aria-label="Webhooks pages" className="actions cp-subnav">
      <Link to="/webhooks" aria-current={path === '/webhooks' ? 'page' : undefined}>Subscriptions</Link>
      <Link to="/webhooks/relays" aria-current={path === '/webhooks/relays' ? 'page' : undefined}>Relays</Link>
    </nav>
  );
}

export default function WebhooksPage() {
  return (
    <Page title="Webhooks" actions={<WebhookNav />}>
      <Subscriptions />
      <Deliveries />
    </Page>
  );
}

function Subscriptions() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const list = useQuery(webhookQueries.subscriptions(acting));
  const [form, setForm] = useState<{ url: string; label: string; types: string[] }>({ url: '', label: '', types: ['task'] });
  // The API takes one type per subscription: one POST per event type ticked, each with its own secret.
  const add = useMutation({
    mutationFn: async () => {
      const made: { type: string; signingSecret?: string }[] = [];
      for (const type of form.types) {
        const r = await ok(api.POST('/api/v2/webhooks', { params: { query: { ...target } }, body: { url: form.url, label: form.label, type } }));
        made.push({ type, signingSecret: (r as { signingSecret?: string }).signingSecret });
      }
      return made;
    },
    onSuccess: () => { setForm({ url: '', label: '', types: form.types }); },
    onSettled: () => void subscriptionAdded(client, orgId),
  });
  const remove = useMutation({
    mutationFn: (w: Webhook) => ok(api.DELETE('/api/v2/webhooks', { params: { query: { ...target } }, body: { url: w.url, type: w.type } })),
    onSuccess: () => { add.reset(); void subscriptionRemoved(client, orgId); },
  });
  // One signed webhook.test event to one subscription (testWebhook), followed below in the deliveries.
  const test = useMutation({
    mutationFn: (w: Webhook) => ok(api.POST('/api/v2/webhooks/{id}/test', { params: { path: { id: w.id }, query: { ...target } } })),
    onSuccess: () => void deliveriesChanged(client, orgId),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); add.mutate(); };
  const created = add.data;
  const toggle = (type: string, on: boolean) => setForm({ ...form, types: on ? [...form.types, type] : form.types.filter((t) => t !== type) });
  return (
    <Section title="Subscriptions">
      <p className="muted">Where the organization's events are sent, signed with each subscription's own secret (Standard Webhooks).</p>
      {list.isPending ? <Loading what="Loading subscriptions" /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table<Webhook>
          caption="Subscriptions"
          rows={list.data.webhooks}
          rowKey={(w) => w.id}
          empty="No subscriptions yet."
          columns={[
            { key: 'label', label: 'Label', cell: (w) => w.label || '—' },
            { key: 'url', label: 'URL', cell: (w) => <span className="break">{w.url}</span> },
            { key: 'type', label: 'Events', cell: (w) => <>{w.type}<br /><small className="muted">{TYPES.find((t) => t.type === w.type)?.meaning}</small></> },
            { key: 'secret', label: 'Signing secret', cell: (w) => <code>{w.signingSecret}</code> },
            { key: 'created', label: 'Created', cell: (w) => when(w.timestamp) },
            { key: 'test', label: 'Test', cell: (w) => <Button onClick={() => test.mutate(w)} disabled={test.isPending} aria-label={`Send a test event to the ${w.type} subscription`}>Send a test event</Button> },
            { key: 'remove', label: 'Remove', cell: (w) => <Confirm label={`Remove ${w.type} subscription`} question={`Stop sending ${w.type} events to ${w.url}?`} confirm="Yes, remove it" onConfirm={() => remove.mutate(w)} disabled={remove.isPending} /> },
          ]}
        />
      )}
      {test.isSuccess ? <Note>{test.data.message} It is listed below with its attempts.</Note> : null}
      <ErrorNote error={test.error} />
      <ErrorNote error={remove.error} />
      <form onSubmit={submit} aria-label="Add a subscription">
        <h3>Add a subscription</h3>
        <div className="inline-form cp-inline">
          <Field label="URL" type="url" required value={form.url} onChange={(e) => setForm({ ...form, url: e.target.value })} placeholder="https://hooks.example.com/callplane" />
          <Field label="Label" value={form.label} onChange={(e) => setForm({ ...form, label: e.target.value })} maxLength={200} />
        </div>
        <fieldset className="event-types">
          <legend>Events to send</legend>
          {TYPES.map((t) => (
            <label key={t.type} className="event-type">
              <input type="checkbox" checked={form.types.includes(t.type)} onChange={(e) => toggle(t.type, e.target.checked)} />
              {' '}<strong>{t.type}</strong>: <span className="muted">{t.meaning}</span>
            </label>
          ))}
        </fieldset>
        <Button kind="primary" type="submit" disabled={add.isPending || form.types.length === 0}>Add subscription</Button>
        <ErrorNote error={add.error} />
        {created && created.length > 0 ? (
          <Note>
            Added {created.map((c) => c.type).join(', ')}. Each signing secret is shown this once (copy it now; afterwards only its last four characters are shown):
            {created.map((c) => <span key={c.type}><br />{c.type}: <code>{c.signingSecret ?? '(existing subscription)'}</code></span>)}
          </Note>
        ) : null}
      </form>
    </Section>
  );
}

function Deliveries() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const [state, setState] = useState('');
  const [offset, setOffset] = useState(0);
  const list = useQuery(webhookQueries.deliveries(acting, { limit: PAGE, offset, ...(state ? { state } : {}) }));
  const replay = useMutation({
    mutationFn: (d: Delivery) => ok(api.POST('/api/v2/webhooks/deliveries/{id}/replay', { params: { path: { id: d.id }, query: { ...target } } })),
    onSuccess: () => void deliveriesChanged(client, orgId),
  });
  const total = list.data?.total ?? 0;
  return (
    <Section title="Deliveries">
      <div className="inline-form cp-inline">
        <Select label="Delivery state" value={state} onChange={(e) => { setState(e.target.value); setOffset(0); }} options={[{ value: '', label: 'Any' }, ...STATES.map((s) => ({ value: s, label: s === 'finished' ? 'delivered' : s }))]} />
      </div>
      {list.isPending ? <Loading what="Loading deliveries" /> : list.error ? <ErrorNote error={list.error} /> : (
        <>
          <DeliveriesTable caption="Deliveries to subscriptions" rows={list.data.deliveries} withTarget onReplay={(d) => replay.mutate(d)} replaying={replay.isPending ? replay.variables?.id : undefined} />
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
