// Webhook relays: the organization's relay configurations (listWebhookRelays; secrets masked as
// the API answers them), and a form that configures one (upsertWebhookRelay). Secrets typed into
// the form are sent once and never shown back; a signing secret the API issues is shown the one
// time it answers it in full.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { api, CallplaneError, ok } from '../../api.ts';
import { Link } from '../../router.tsx';
import { relayChanged, webhookQueries } from '../../queries/webhooks.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table, TextArea } from '../../ui/parts.tsx';
import { Checkbox } from '../tasks/common.tsx';
import { WebhookNav } from './subscriptions.tsx';

export type RelayConfig = paths['/api/v2/webhookRelay/{type}']['get']['responses'][200]['content']['application/json']['config'];
type Upserted = paths['/api/v2/webhookRelay/{type}']['post']['responses'][200]['content']['application/json'];

export function Verification({ config }: { config: RelayConfig }) {
  const v = (config.verification ?? {}) as { scheme?: string; ready?: boolean; detail?: string };
  return (
    <span>
      {!config.enabled ? <Badge tone="bad">disabled</Badge> : v.ready === false ? <Badge tone="warn">not ready</Badge> : <Badge tone="good">ready</Badge>}
      {v.detail ? <><br /><small>{v.detail}</small></> : null}
    </span>
  );
}

export default function RelaysPage() {
  const acting = useSession();
  const list = useQuery(webhookQueries.relays(acting));
  // Relays are a premium feature: the API refuses every relay operation with 403 otherwise. Then the
  // page says so, and why, instead of a form that cannot work.
  const refused = list.error;
  if (refused instanceof CallplaneError && refused.status === 403 && /premium/i.test(refused.message)) {
    return (
      <Page title="Webhook relays" actions={<WebhookNav />}>
        <Section title="Relays">
          <Note>Relays are not available to this organization: they are a premium feature (the organization&apos;s <code>vidaPremium</code> setting, which its reseller or partner turns on with <code>updateOrganization</code>). The API answered: {refused.message}</Note>
          <p className="muted">Event subscriptions (the <Link to="/webhooks">Subscriptions</Link> page) work on every plan.</p>
        </Section>
      </Page>
    );
  }
  return (
    <Page title="Webhook relays" actions={<WebhookNav />}>
      <Section title="Relays">
        <p className="muted">A relay receives a provider's webhooks at its ingress URL, checks that the provider sent them, and forwards them to your URL with retries.</p>
        {list.isPending ? <Loading what="Loading relays" /> : list.error ? <ErrorNote error={list.error} /> : (
          <Table<RelayConfig>
            caption="Relays"
            rows={list.data}
            rowKey={(c) => c.type}
            empty="No relays configured."
            columns={[
              { key: 'type', label: 'Type', cell: (c) => <Link to={`/webhooks/relays/${encodeURIComponent(c.type)}`}>{c.type}</Link> },
              { key: 'url', label: 'Forwards to', cell: (c) => <span className="break">{c.url}</span> },
              { key: 'ingress', label: 'Ingress URL', cell: (c) => <span className="break">{c.ingressUrl}</span> },
              { key: 'state', label: 'Verification', cell: (c) => <Verification config={c} /> },
              { key: 'secret', label: 'Signing secret', cell: (c) => <code>{c.signingSecret}</code> },
            ]}
          />
        )}
      </Section>
      <Section title="Configure a relay">
        <RelayForm />
      </Section>
    </Page>
  );
}

/** Status codes as ranges (`200–299, 304`), which is how a person reads and writes them. */
export function codeRanges(codes: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < codes.length; i++) {
    let j = i;
    while (j + 1 < codes.length && codes[j + 1] === codes[j] + 1) j++;
    out.push(j > i ? `${codes[i]}-${codes[j]}` : String(codes[i]));
    i = j;
  }
  return out.join(', ');
}

/** `200-299, 304` as the list of codes the API takes; a piece that is not a code is sent as it is, for the API to name. */
function codesOf(text: string): number[] {
  const out: number[] = [];
  for (const piece of text.split(/[\s,]+/).filter(Boolean)) {
    const m = /^(\d{3})\s*[-–]\s*(\d{3})$/.exec(piece);
    if (m && Number(m[2]) >= Number(m[1])) for (let n = Number(m[1]); n <= Number(m[2]); n++) out.push(n);
    else out.push(Number(piece));
  }
  return out;
}

function headersOf(text: string): Record<string, string>[] {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
    const i = l.indexOf(':');
    return i < 0 ? { [l]: '' } : { [l.slice(0, i).trim()]: l.slice(i + 1).trim() };
  });
}

/** Creates a relay (no `existing`) or updates one: fields left empty keep their stored values. */
export function RelayForm({ existing }: { existing?: RelayConfig }) {
  const { orgId, target } = useSession();
  const client = useQueryClient();
  const types = useQuery({ ...webhookQueries.relayTypes(), enabled: !existing });
  const [type, setType] = useState(existing?.type ?? 'generic');
  const [url, setUrl] = useState(existing?.url ?? '');
  const [timeout, setTimeoutMs] = useState(existing ? String(existing.timeout) : '');
  const [codes, setCodes] = useState(existing ? codeRanges(existing.successStatusCodes) : '');
  const [headers, setHeaders] = useState('');
  const [clearHeaders, setClearHeaders] = useState(false);
  const [stripeSecret, setStripeSecret] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [rotate, setRotate] = useState(false);
  const save = useMutation({
    mutationFn: (body: Record<string, unknown>) => ok(api.POST('/api/v2/webhookRelay/{type}', { params: { path: { type }, query: { ...target } }, body: body as { url: string } })),
    onSuccess: () => {
      // Secrets typed here are not kept in the page once sent.
      setStripeSecret(''); setPassword(''); setHeaders(''); setRotate(false); setClearHeaders(false);
      void relayChanged(client, orgId, type);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const body: Record<string, unknown> = { url };
    if (timeout.trim()) body.timeout = Number(timeout);
    if (codes.trim()) body.successStatusCodes = codesOf(codes);
    if (clearHeaders) body.headers = [];
    else if (headers.trim()) body.headers = headersOf(headers);
    if (type === 'stripe' && stripeSecret) body.stripeSigningSecret = stripeSecret;
    if (type === 'chargebee' && username) body.username = username;
    if (type === 'chargebee' && password) body.password = password;
    if (rotate) body.rotateSigningSecret = true;
    save.mutate(body);
  };
  const answer = save.data as Upserted | undefined;
  return (
    <form onSubmit={submit} aria-label={existing ? 'Change the relay' : 'Configure a relay'}>
      <div className="grid-2 cp-grid">
        {existing ? null : (
          <Select label="Relay type" value={type} onChange={(e) => setType(e.target.value)}
            options={(types.data?.types ?? [{ name: 'generic', description: '' }]).map((t) => ({ value: t.name, label: t.description ? `${t.name}: ${t.description}` : t.name }))} />
        )}
        <Field label="Forward to URL" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} placeholder="https://app.example.com/hooks" />
        <Field label="Timeout (ms)" type="number" min={1} max={30000} value={timeout} onChange={(e) => setTimeoutMs(e.target.value)} hint="1–30000; empty: 15000 (or the stored value)." />
        <Field label="Success status codes" value={codes} onChange={(e) => setCodes(e.target.value)} hint="Codes and ranges, e.g. 200-299, 304; empty: any 2xx (or the stored codes)." />
        <TextArea label="Custom headers" value={headers} onChange={(e) => setHeaders(e.target.value)}
          hint={existing ? 'One "Name: value" a line; empty keeps the stored headers (shown masked below).' : 'One "Name: value" a line.'} />
        {type === 'stripe' ? <Field label="Stripe signing secret" type="password" autoComplete="off" value={stripeSecret} onChange={(e) => setStripeSecret(e.target.value)} hint="whsec_… from Stripe; empty keeps the stored one." /> : null}
        {type === 'chargebee' ? (
          <>
            <Field label="Chargebee username" autoComplete="off" value={username} onChange={(e) => setUsername(e.target.value)} />
            <Field label="Chargebee password" type="password" autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} />
          </>
        ) : null}
      </div>
      {existing ? <Checkbox label="Remove all custom headers" checked={clearHeaders} onChange={setClearHeaders} /> : null}
      {existing ? <Checkbox label="Issue a new signing secret" checked={rotate} onChange={setRotate} hint="The old one stops working at once; the new one is shown once." /> : null}
      <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>{existing ? 'Save relay' : 'Configure relay'}</Button></div>
      <ErrorNote error={types.error ?? save.error} />
      {answer ? (
        <Note>
          {answer.message}{' '}
          {answer.signingSecret ? <>Signing secret, shown this once: <code>{answer.signingSecret}</code>. </> : null}
          {answer.username ? <>Chargebee username: <code>{answer.username}</code>. </> : null}
          {answer.password ? <>Chargebee password, shown this once: <code>{answer.password}</code>. </> : null}
          {existing ? null : <Link to={`/webhooks/relays/${encodeURIComponent(answer.config.type)}`}>Open the {answer.config.type} relay</Link>}
        </Note>
      ) : null}
    </form>
  );
}
