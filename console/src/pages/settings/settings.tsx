// The organization's settings (#/o/<orgId>/settings): its name, time zone and default reply
// webhook (updateOrganization, by its reseller or partner), its numbering provider (Twilio
// credentials; numberingProvider), its members (listMembers, inviteMember, deleteMember), its own
// API tokens and its activity-record export. Each form shows the API's own message beside it; a
// secret is shown once, from the answer that issued it, and masked after.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok } from '../../api.ts';
import { accountKeys, accountQueries } from '../../queries/accounts.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { CopyButton, TokensPanel } from '../accounts/parts.tsx';
import { AdrExport } from './adr.tsx';

interface Provider { providerId: string; default: boolean; enabled: boolean; config: Record<string, string> }
interface OrgDetails { id: number; name: string; timezone?: string | null; outboundMessageWebhookUrl?: string | null; outboundMessageSigningSecretIssued?: boolean; numberingProviders?: Provider[] }

const orgQuery = (orgId: number, self: boolean) => ({
  queryKey: accountKeys.account(orgId),
  queryFn: async () => (await ok(api.GET('/api/v2/account', { params: { query: self ? {} : { targetAccountId: orgId } } }))).details as unknown as OrgDetails,
});

export default function Settings() {
  const { account, orgId } = useSession();
  const id = orgId!;
  const above = account.kind === 'partner' || account.kind === 'reseller';
  const org = useQuery(orgQuery(id, !above));
  return (
    <Page title="Organization settings">
      {org.isPending ? <Loading /> : org.error ? <ErrorNote error={org.error} /> : (
        <>
          <General org={org.data} above={above} />
          <Numbering org={org.data} above={above} />
        </>
      )}
      <Members orgId={id} above={above} />
      <Section title="API tokens of the organization">
        <p className="muted">Tokens that act as the organization (its agents, tasks, numbers…), for its own scripts and integrations.</p>
        <TokensPanel accountId={id} self={!above} />
      </Section>
      <AdrExport accountId={above ? id : undefined} title="Activity-record export" />
    </Page>
  );
}

const zones = (): string[] => {
  try { return (Intl as unknown as { supportedValuesOf(k: string): string[] }).supportedValuesOf('timeZone'); } catch { return []; }
};

function General({ org, above }: { org: OrgDetails; above: boolean }) {
  const client = useQueryClient();
  const [name, setName] = useState(org.name);
  const [timezone, setTimezone] = useState(org.timezone ?? '');
  const [webhook, setWebhook] = useState(org.outboundMessageWebhookUrl ?? '');
  const [secret, setSecret] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (rotate: boolean) => {
      const body: Record<string, unknown> = {};
      if (rotate) body.rotateOutboundMessageSigningSecret = true;
      else {
        if (name !== org.name) body.orgName = name;
        if (timezone !== (org.timezone ?? '')) body.timezone = timezone;
        if (webhook !== (org.outboundMessageWebhookUrl ?? '')) body.outboundMessageWebhookUrl = webhook.trim() === '' ? null : webhook.trim();
      }
      return ok(api.POST('/api/v2/updateOrganization', { params: { query: { targetOrganizationId: org.id } }, body }));
    },
    onSuccess: (r) => {
      const issued = (r as { outboundMessageSigningSecret?: string }).outboundMessageSigningSecret;
      if (issued) setSecret(issued);
      void client.invalidateQueries({ queryKey: accountKeys.account(org.id) });
    },
  });
  const failed = (save.data as { failedSettings?: { field?: string; setting?: string; message?: string; error?: string }[] } | undefined)?.failedSettings ?? [];
  const submit = (e: FormEvent) => { e.preventDefault(); setSecret(null); save.mutate(false); };
  return (
    <Section title="Organization">
      {!above ? <Note>Only your reseller can change these settings; they are shown as they are.</Note> : null}
      <form onSubmit={submit} aria-label="Organization settings">
        <Field label="Name" value={name} onChange={(e) => setName(e.target.value)} disabled={!above} />
        <Field label="Time zone" value={timezone} onChange={(e) => setTimezone(e.target.value)} list="cp-zones" disabled={!above}
          hint="An IANA name such as Europe/Paris: the day of daily counts and caps, and business hours" />
        <datalist id="cp-zones">{zones().map((z) => <option key={z} value={z} />)}</datalist>
        <Field label="Default reply webhook" type="url" value={webhook} onChange={(e) => setWebhook(e.target.value)} disabled={!above}
          hint="Where agents' replies to receiveMessage go when the message names no webhook; empty removes it" />
        <p className="muted">Signing secret of those replies: {org.outboundMessageSigningSecretIssued ? 'issued (not shown again)' : 'none yet'}.</p>
        {above ? (
          <div className="actions">
            <Button kind="primary" type="submit" disabled={save.isPending}>Save settings</Button>
            <Button disabled={save.isPending} onClick={() => { setSecret(null); save.mutate(true); }}>Issue a new signing secret</Button>
          </div>
        ) : null}
        {save.isSuccess && failed.length === 0 ? <Note>Settings saved.</Note> : null}
        {failed.map((f, i) => <p key={i} role="alert" className="error">{f.message ?? f.error ?? JSON.stringify(f)}</p>)}
        <ErrorNote error={save.error} />
      </form>
      {secret ? (
        <div className="note" role="status">
          <p>The new signing secret. Copy it now: it is not shown again.</p>
          <p><code className="secret" data-testid="new-signing-secret">{secret}</code></p>
          <CopyButton text={secret} label="Copy secret" />
        </div>
      ) : null}
    </Section>
  );
}

function Numbering({ org, above }: { org: OrgDetails; above: boolean }) {
  const client = useQueryClient();
  const providers = org.numberingProviders ?? [];
  const twilio = providers.find((p) => p.providerId === 'twilio');
  const [sid, setSid] = useState('');
  const [authToken, setAuthToken] = useState('');
  const [phone, setPhone] = useState('');
  const [voice, setVoice] = useState('');
  const save = useMutation({
    mutationFn: () => {
      const config: Record<string, string> = {};
      if (sid.trim()) config.accountSid = sid.trim();
      if (authToken) config.authToken = authToken;
      if (phone.trim()) config.phoneNumber = phone.trim();
      if (voice) config.voice = voice;
      const params = { query: { targetOrganizationId: org.id } };
      return twilio
        ? ok(api.PUT('/api/v2/numberingProvider', { params, body: { providerId: 'twilio', config, default: true, enabled: true } }))
        : ok(api.POST('/api/v2/numberingProvider', { params, body: { providerId: 'twilio', config, default: true } }));
    },
    onSuccess: () => { setAuthToken(''); setSid(''); void client.invalidateQueries({ queryKey: accountKeys.account(org.id) }); },
  });
  const toggle = useMutation({
    mutationFn: (p: Provider) => ok(api.PUT('/api/v2/numberingProvider', { params: { query: { targetOrganizationId: org.id } }, body: { providerId: p.providerId, enabled: !p.enabled } })),
    onSuccess: () => void client.invalidateQueries({ queryKey: accountKeys.account(org.id) }),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  return (
    <Section title="Numbering provider">
      {providers.length === 0 || !providers.some((p) => p.enabled && p.providerId !== 'simulated')
        ? <Note>No carrier is configured: numbers come from the SIMULATED inventory, which no network reaches. Add Twilio credentials to buy real numbers and place real calls.</Note> : null}
      <Table<Provider> caption="Numbering providers" rows={providers} rowKey={(p) => p.providerId} empty="No numbering provider."
        columns={[
          { key: 'id', label: 'Provider', cell: (p) => (p.providerId === 'simulated' ? <Badge tone="warn">SIMULATED</Badge> : p.providerId) },
          { key: 'config', label: 'Settings (secrets masked)', cell: (p) => <span className="wrap-any">{Object.entries(p.config).map(([k, v]) => `${k}: ${v}`).join(', ') || '—'}</span> },
          { key: 'state', label: 'State', cell: (p) => <>{p.enabled ? <Badge tone="good">Enabled</Badge> : <Badge tone="warn">Disabled</Badge>}{p.default ? ' default' : ''}</> },
          ...(above ? [{ key: 'actions', label: 'Actions', cell: (p: Provider) => (
            <Button disabled={toggle.isPending} onClick={() => toggle.mutate(p)} aria-label={`${p.enabled ? 'Disable' : 'Enable'} ${p.providerId}`}>{p.enabled ? 'Disable' : 'Enable'}</Button>
          ) }] : []),
        ]} />
      <ErrorNote error={toggle.error} />
      {above ? (
        <form onSubmit={submit} aria-label="Twilio credentials">
          <Field label="Twilio Account SID" value={sid} onChange={(e) => setSid(e.target.value)} autoComplete="off"
            hint={twilio ? `Stored: ${twilio.config.accountSid ?? '—'}. Empty keeps it.` : 'AC followed by 32 hexadecimal characters'} />
          <Field label="Twilio auth token" type="password" value={authToken} onChange={(e) => setAuthToken(e.target.value)} autoComplete="new-password"
            hint={twilio ? 'Stored, never shown. Empty keeps it.' : 'Sent once; never shown back'} />
          <Field label="Caller number (optional)" value={phone} onChange={(e) => setPhone(e.target.value)} hint="E.164, a number of that account to call from" />
          <Select label="How answered calls talk" value={voice} onChange={(e) => setVoice(e.target.value)}
            options={[{ value: '', label: twilio ? 'Keep as it is' : 'Default (media stream)' }, { value: 'stream', label: 'Media stream (stream)' }, { value: 'gather', label: 'Twilio speech (gather)' }]} />
          <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>{twilio ? 'Save Twilio settings' : 'Add Twilio'}</Button></div>
          {save.isSuccess ? <Note>Twilio settings saved; the auth token is stored and not shown again.</Note> : null}
          <ErrorNote error={save.error} />
        </form>
      ) : <p className="muted">Your reseller sets the carrier.</p>}
    </Section>
  );
}

interface Member { id: number; email: string; role: string; permittedAccountIds: number[] }

function Members({ orgId, above }: { orgId: number; above: boolean }) {
  const client = useQueryClient();
  const target = above ? { targetAccountId: orgId } : {};
  const key = ['members', orgId] as const;
  const list = useQuery({ queryKey: key, queryFn: () => ok(api.GET('/api/v2/members', { params: { query: target } })) });
  const agents = useQuery(accountQueries.agents(orgId));
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('admin');
  const changed = () => void client.invalidateQueries({ queryKey: key });
  const invite = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/member', { params: { query: target }, body: { email, role } })),
    onSuccess: () => { setEmail(''); changed(); },
  });
  const remove = useMutation({
    mutationFn: (id: number) => ok(api.DELETE('/api/v2/member', { params: { query: target }, body: { targetMemberId: id } })),
    onSuccess: changed,
  });
  const nameOf = (id: number) => (agents.data?.accounts as { id: number; name: string }[] | undefined)?.find((a) => a.id === id)?.name ?? `#${id}`;
  const submit = (e: FormEvent) => { e.preventDefault(); invite.mutate(); };
  return (
    <Section title="Members">
      <p className="muted">The people of the organization. A member can be sent a one-time sign-in link (Accounts, <em>Sign-in link</em>); callplane sends no e-mail itself.</p>
      <form className="inline-form" onSubmit={submit} aria-label="Invite a member">
        <Field label="Member's email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} required />
        <Field label="Role" value={role} onChange={(e) => setRole(e.target.value)} />
        <Button kind="primary" type="submit" disabled={invite.isPending}>Invite member</Button>
      </form>
      <ErrorNote error={invite.error} />
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table<Member> caption="Members" rows={list.data.members as Member[]} rowKey={(m) => m.id} empty="No members yet."
          columns={[
            { key: 'email', label: 'Email', cell: (m) => m.email },
            { key: 'role', label: 'Role', cell: (m) => m.role },
            { key: 'agents', label: 'Agents', cell: (m) => (m.permittedAccountIds.length ? m.permittedAccountIds.map(nameOf).join(', ') : 'All') },
            { key: 'actions', label: 'Actions', cell: (m) => <Confirm label="Remove" name={`Remove member ${m.email}`} question={`Remove ${m.email} from the organization?`} confirm={`Yes, remove ${m.email}`} busy={remove.isPending} onConfirm={() => remove.mutate(m.id)} /> },
          ]} />
      )}
      <ErrorNote error={remove.error} />
    </Section>
  );
}
