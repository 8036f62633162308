// SIP: the organization's registration with its PBX or carrier (status in words, refreshed on its
// own), the IP whitelist inbound INVITEs are admitted from, outbound routes, and the captured SIP
// messages drawn as a ladder diagram with the pcap to download (docs/console.md, "SIP").
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { registrationDeleted, registrationSaved, routeAdded, routeRemoved, sipQueries, whitelistAdded, whitelistRemoved, type Registration } from '../../queries/sip.ts';
import { numberQueries } from '../../queries/numbers.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { useBlobUrl } from '../../ui/blob-url.ts';
import { Confirm } from '../../ui/confirm.tsx';
import { Ladder, type CapturedMessage } from './ladder.tsx';
import './sip.css';

export default function Sip() {
  return (
    <Page title="SIP">
      <div className="sip-page">
        <Ingress />
        <Registration />
        <div className="grid-2 sip-lists">
          <Whitelist />
          <Routes />
        </div>
        <Captures />
      </div>
    </Page>
  );
}

/** Where to send calls: our address, port, transports, and the Request-URIs that reach the organization (with its numbers filled in). */
function Ingress() {
  const acting = useSession();
  const ingress = useQuery(sipQueries.ingress(acting));
  const numbers = useQuery(numberQueries.list(acting));
  const i = ingress.data;
  const held = (numbers.data?.phoneNumbers ?? []).map((n) => n.number);
  const at = i ? (i.port === null ? i.host : `${i.host}:${i.port}`) : '';
  return (
    <Section title="Where to send calls">
      {ingress.isPending ? <Loading /> : ingress.error ? <ErrorNote error={ingress.error} /> : i ? (
        <>
          {!i.enabled ? <Note>This deployment runs no SIP listener (CALLPLANE_SIP_ENABLED is false): it takes no SIP calls.</Note> : null}
          <dl className="sip-ingress" aria-label="Where to send calls">
            <dt>Address</dt><dd><code>{i.host}</code></dd>
            <dt>Port</dt><dd>{i.port === null ? 'chosen when the service starts' : <code>{i.port}</code>}</dd>
            <dt>Transport</dt><dd>{i.transports.map((t) => t.toUpperCase()).join(' or ')}</dd>
            <dt>Request-URI</dt>
            <dd>
              <ul className="plain-list">
                {i.uriForms.map((u) => <li key={u.form}><code>{u.form}</code>: {u.meaning}</li>)}
                {held.slice(0, 3).map((n) => <li key={n}>For example <code>{`sip:${n}@${at}`}</code></li>)}
              </ul>
            </dd>
          </dl>
          <p className="muted">Add your PBX's or carrier's address to the IP whitelist below first: an INVITE from any other address is refused.</p>
        </>
      ) : null}
    </Section>
  );
}

type Reg = Registration;

const STATUS: Record<string, { words: string; tone: 'good' | 'warn' | 'bad' | 'neutral' }> = {
  registered: { words: 'Registered', tone: 'good' },
  pending: { words: 'Waiting for the registrar\'s first answer', tone: 'warn' },
  failed: { words: 'Not registered: the last attempt failed', tone: 'bad' },
  deleting: { words: 'Being removed', tone: 'neutral' },
};

function Registration() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const reg = useQuery(sipQueries.registration(acting));
  const remove = useMutation({
    mutationFn: () => ok(api.DELETE('/api/v2/sip/registration', { params: { query: { ...target } } })),
    onSuccess: () => registrationDeleted(client, orgId),
  });
  const [editing, setEditing] = useState(false);
  if (reg.isPending) return <Section title="Registration"><Loading /></Section>;
  if (reg.error) return <Section title="Registration"><ErrorNote error={reg.error} /></Section>;
  const r = reg.data;
  return (
    <Section
      title="Registration"
      actions={r && !editing ? (
        <>
          <Button onClick={() => setEditing(true)}>Change registration</Button>
          <Confirm label="Delete registration" question={`Un-REGISTER ${r.aor} and delete it?`} confirm="Yes, delete it" onConfirm={() => remove.mutate()} disabled={remove.isPending} />
        </>
      ) : undefined}
    >
      {remove.data ? <Note>Registration deleted{remove.data.unregistered ? ' (the registrar confirmed the un-REGISTER).' : '; the registrar did not confirm, so its binding lapses at its expiry.'}</Note> : null}
      <ErrorNote error={remove.error} />
      {r ? <RegistrationStatus r={r} /> : <p className="muted">No registration: callplane does not REGISTER with a PBX or carrier for this organization.</p>}
      {!r || editing ? <RegistrationForm existing={r} onDone={() => setEditing(false)} /> : null}
    </Section>
  );
}

function RegistrationStatus({ r }: { r: Reg }) {
  const s = STATUS[r.status] ?? { words: r.status, tone: 'neutral' as const };
  return (
    <dl className="facts" aria-label="Registration status">
      <div><dt>Status</dt><dd><Badge tone={s.tone}>{s.words}</Badge></dd></div>
      <div><dt>Address of record</dt><dd><code>{r.aor}</code></dd></div>
      <div><dt>Registrar</dt><dd>{r.proxy ?? r.aor.replace(/^sips?:[^@]*@/, '')}{r.port ? ` port ${r.port}` : ''} over {r.transport}</dd></div>
      <div><dt>Last REGISTER answer</dt><dd>{r.lastCode !== null ? `${r.lastCode} ${r.lastReason ?? ''}` : 'None yet'}{r.lastAttemptAt ? <span className="muted"> at {when(r.lastAttemptAt)}</span> : null}</dd></div>
      {r.lastError ? <div><dt>Last error</dt><dd className="bad-text">{r.lastError}</dd></div> : null}
      <div><dt>Expires</dt><dd>{r.registered && r.expiresAt ? when(r.expiresAt) : '—'}</dd></div>
      <div><dt>Next attempt</dt><dd>{when(r.nextAttemptAt)}</dd></div>
      <div><dt>Presence</dt><dd>{!r.subscribe ? 'Not subscribed' : !r.presence || r.presence.subscription === null ? 'Subscribing…'
        : `${r.presence.state === 'open' ? 'Open (available)' : r.presence.state === 'closed' ? 'Closed (unavailable)' : 'Not said yet'}; subscription ${r.presence.subscription}${r.presence.reason ? ` (${r.presence.reason})` : ''}`}</dd></div>
    </dl>
  );
}

function RegistrationForm({ existing, onDone }: { existing: Reg | null; onDone: () => void }) {
  const { orgId, target } = useSession();
  const client = useQueryClient();
  const [f, setF] = useState(() => ({
    aor: existing?.aor ?? '', username: existing?.username ?? '', authUsername: existing?.authUsername ?? '', password: '',
    sipRealm: existing?.sipRealm ?? '', proxy: existing?.proxy ?? '', port: existing?.port ? String(existing.port) : '',
    transport: existing?.transport ?? 'UDP', subscribe: existing?.subscribe ?? false,
  }));
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const save = useMutation({
    mutationFn: () => {
      const opt = (v: string) => (v.trim() === '' ? undefined : v.trim());
      return ok(api.POST('/api/v2/sip/registration', {
        params: { query: { ...target } },
        body: {
          aor: opt(f.aor), username: opt(f.username), authUsername: opt(f.authUsername), password: f.password === '' ? undefined : f.password,
          sipRealm: opt(f.sipRealm), proxy: opt(f.proxy), port: f.port.trim() === '' ? undefined : Number(f.port), transport: f.transport, subscribe: f.subscribe,
        },
      }));
    },
    onSuccess: (data) => {
      void registrationSaved(client, orgId, data.registration);
      setF((v) => ({ ...v, password: '' }));
      onDone();
    },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  return (
    <form onSubmit={submit} aria-label={existing ? 'Change the registration' : 'Create a registration'}>
      <p className="muted">callplane REGISTERs with the registrar and waits for its answer (up to 14 s): a registration the registrar refuses is not kept.</p>
      <div className="grid-2 sip-form">
        <Field label="Address of record (AOR)" hint="sip:1001@pbx.example.com" value={f.aor} onChange={set('aor')} required autoComplete="off" />
        <Field label="Password" type="password" hint={existing ? 'Leave empty to keep the stored one (never shown)' : 'Never shown again'} value={f.password} onChange={set('password')} required={!existing} autoComplete="new-password" />
        <Field label="Username" hint="Our Contact's user; default the AOR's" value={f.username} onChange={set('username')} autoComplete="off" />
        <Field label="Authentication username" hint="For the digest; default the username" value={f.authUsername} onChange={set('authUsername')} autoComplete="off" />
        <Field label="Outbound proxy" hint="host[:port] REGISTERs go to; default the AOR's host" value={f.proxy} onChange={set('proxy')} autoComplete="off" />
        <Field label="Port" type="number" min={1} max={65535} hint="Default 5060, 5061 for TLS" value={f.port} onChange={set('port')} />
        <Select label="Transport" options={['UDP', 'TCP', 'TLS']} value={f.transport} onChange={set('transport')} />
        <Field label="SIP realm" hint="Only to build the AOR from the username" value={f.sipRealm} onChange={set('sipRealm')} autoComplete="off" />
      </div>
      <label className="check"><input type="checkbox" checked={f.subscribe} onChange={(e) => setF({ ...f, subscribe: e.target.checked })} /> Subscribe to the AOR's presence</label>
      <ErrorNote error={save.error} />
      <div className="actions">
        <Button kind="primary" type="submit" disabled={save.isPending}>{save.isPending ? 'Registering…' : existing ? 'Save and register' : 'Register'}</Button>
        {existing ? <Button onClick={onDone}>Cancel</Button> : null}
      </div>
    </form>
  );
}

function Whitelist() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const list = useQuery(sipQueries.whitelist(acting));
  const [ip, setIp] = useState('');
  const [label, setLabel] = useState('');
  const add = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/sip/ipWhitelist', { params: { query: { ...target } }, body: { ip, ...(label.trim() ? { label } : {}) } })),
    onSuccess: (data) => { whitelistAdded(client, orgId, data); setIp(''); setLabel(''); },
  });
  const remove = useMutation({
    mutationFn: (entry: string) => ok(api.DELETE('/api/v2/sip/ipWhitelist', { params: { query: { ...target } }, body: { ip: entry } })),
    onSuccess: () => whitelistRemoved(client, orgId),
  });
  return (
    <Section title="IP whitelist">
      <p className="muted">Inbound INVITEs are answered only from these addresses or ranges (at most /24 or /48).</p>
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table
          caption="Whitelisted addresses" rows={list.data.whitelist} rowKey={(w) => w.ip} empty="No addresses: every inbound INVITE is refused."
          columns={[
            { key: 'ip', label: 'Address', cell: (w) => <code>{w.ip}</code> },
            { key: 'label', label: 'Label', cell: (w) => w.label || <span className="muted">none</span> },
            { key: 'added', label: 'Added', cell: (w) => when(w.timestamp) },
            { key: 'remove', label: 'Remove', cell: (w) => <Button kind="danger" onClick={() => remove.mutate(w.ip)} disabled={remove.isPending}>Remove {w.ip}</Button> },
          ]}
        />
      )}
      <ErrorNote error={remove.error} />
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); add.mutate(); }} aria-label="Add an address">
        <Field label="Address or range" value={ip} onChange={(e) => setIp(e.target.value)} required placeholder="203.0.113.10" />
        <Field label="Label (optional)" value={label} onChange={(e) => setLabel(e.target.value)} placeholder="Office PBX" />
        <Button type="submit" kind="primary" disabled={add.isPending}>Add address</Button>
      </form>
      <ErrorNote error={add.error} />
    </Section>
  );
}

function Routes() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const list = useQuery(sipQueries.routes(acting));
  const [route, setRoute] = useState('');
  const add = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/sip/outboundRoutes', { params: { query: { ...target } }, body: { route } })),
    onSuccess: (data) => { routeAdded(client, orgId, data); setRoute(''); },
  });
  const remove = useMutation({
    mutationFn: (r: string) => ok(api.DELETE('/api/v2/sip/outboundRoutes', { params: { query: { ...target } }, body: { route: r } })),
    onSuccess: () => routeRemoved(client, orgId),
  });
  return (
    <Section title="Outbound routes">
      <p className="muted">Where calls over SIP go, tried in order.</p>
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table
          caption="Outbound routes" rows={list.data.routes} rowKey={(r) => r} empty="No routes: calls do not go out over SIP."
          columns={[
            { key: 'route', label: 'Route', cell: (r) => <code>{r}</code> },
            { key: 'remove', label: 'Remove', cell: (r) => <Button kind="danger" onClick={() => remove.mutate(r)} disabled={remove.isPending}>Remove {r}</Button> },
          ]}
        />
      )}
      <ErrorNote error={remove.error} />
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); add.mutate(); }} aria-label="Add a route">
        <Field label="Route" hint="host[:port][;transport=tcp|udp][;proxyAddress=host[:port]]" value={route} onChange={(e) => setRoute(e.target.value)} required />
        <Button type="submit" kind="primary" disabled={add.isPending}>Add route</Button>
      </form>
      <ErrorNote error={add.error} />
    </Section>
  );
}

function Captures() {
  const acting = useSession();
  const calls = useQuery(sipQueries.captureCalls(acting));
  const [chosen, setChosen] = useState('');
  const list = calls.data?.calls ?? [];
  const callId = chosen && list.some((c) => c.sipCallId === chosen) ? chosen : list[0]?.sipCallId ?? '';
  const chosenCall = list.find((c) => c.sipCallId === callId);
  const messages = useQuery({ ...sipQueries.captures(acting, callId, chosenCall?.count), enabled: callId !== '' });
  // format=json (the default) answers `captures`; the union with format=transaction's shape hides it from the compiler.
  const captured = ((messages.data as { captures?: CapturedMessage[] } | undefined)?.captures) ?? [];
  return (
    <Section title="Captured SIP messages">
      {calls.isPending ? <Loading /> : calls.error ? <ErrorNote error={calls.error} /> : list.length === 0 ? (
        <p className="muted">Nothing captured yet: the messages of the registration, of calls and of refused INVITEs naming this organization appear here.</p>
      ) : (
        <>
          <div className="ladder-pick"><Select
            label="Call-ID" value={callId} onChange={(e) => setChosen(e.target.value)}
            options={list.map((c) => ({ value: c.sipCallId, label: `${c.method ?? c.firstLine} · ${c.count} messages · ${new Date(c.lastAt).toLocaleString()} · ${c.sipCallId}` }))}
          /></div>
          {messages.isPending ? <Loading /> : messages.error ? <ErrorNote error={messages.error} /> : (
            <>
              <PcapLink callId={callId} version={chosenCall?.count ?? 0} />
              <Ladder messages={captured} title={`SIP messages of ${callId}`} />
            </>
          )}
        </>
      )}
    </Section>
  );
}

/** The capture as a pcap file: fetched with the console's header (a plain link would lack it), offered as a download link. */
function PcapLink({ callId, version }: { callId: string; version: number }) {
  const acting = useSession();
  const pcap = useQuery(sipQueries.pcap(acting, callId, version));
  const link = useBlobUrl<HTMLAnchorElement>(pcap.data, 'href');
  const name = `sip-${callId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}.pcap`;
  if (pcap.error) return <ErrorNote error={pcap.error} />;
  return pcap.data ? <p><a ref={link} download={name}>Download these messages as pcap ({pcap.data.size} bytes, opens in Wireshark)</a></p> : <Loading what="Preparing the pcap" />;
}
