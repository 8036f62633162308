// Accounts: the ladder below the signed-in account. A partner sees its resellers, a reseller its
// organizations (a partner: those of the reseller chosen), and an organization its agents; each
// level can be created, suspended and reactivated (organizations and agents), deleted (after a
// confirmation), and given tokens; an organization's member can be sent a one-time sign-in link.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { accountQueries, agentsChanged, organizationsChanged, resellersChanged } from '../../queries/accounts.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { useAccountName } from '../../ui/names.tsx';
import { ActiveBadge, CopyButton, TokensPanel } from './parts.tsx';

/** What the shell hands a page (pages/index.ts's PageProps; not imported, to keep the page out of an import circle). */
interface PageProps { params: Record<string, string>; query: URLSearchParams }

interface Row { id: number; accountType: string; name: string; active?: unknown; email?: unknown; createdAt?: unknown }

const num = (v: string | null) => (v && /^\d+$/.test(v) ? Number(v) : undefined);

export default function Accounts({ query }: PageProps) {
  const { account } = useSession();
  const resellerId = account.kind === 'reseller' ? account.id : num(query.get('reseller'));
  const orgId = account.kind === 'organization' ? account.id : num(query.get('org'));
  const tokensOf = num(query.get('tokens'));
  const linkFor = num(query.get('link'));
  const tokensName = useAccountName(tokensOf);
  const linkName = useAccountName(linkFor);
  /** The page's address with some parameters changed (undefined drops one). */
  const here = (patch: Record<string, number | undefined>) => {
    const q = new URLSearchParams(query);
    for (const [k, v] of Object.entries(patch)) { if (v === undefined) q.delete(k); else q.set(k, String(v)); }
    const s = q.toString();
    return `/accounts${s ? `?${s}` : ''}`;
  };
  return (
    <Page title="Accounts">
      {account.kind !== 'organization' ? <Search here={here} /> : null}
      {account.kind === 'partner' ? <Resellers partnerId={account.id} here={here} chosen={resellerId} /> : null}
      {resellerId !== undefined && account.kind !== 'organization' ? <Organizations resellerId={resellerId} here={here} chosen={orgId} /> : null}
      {orgId !== undefined ? <Agents orgId={orgId} here={here} canSuspend={account.kind !== 'organization'} /> : null}
      {tokensOf !== undefined ? (
        <Section title={`Tokens of ${tokensName}`} actions={<Link to={here({ tokens: undefined })}>Close tokens</Link>}>
          <TokensPanel accountId={tokensOf} self={tokensOf === account.id} />
        </Section>
      ) : null}
      {linkFor !== undefined && resellerId !== undefined ? (
        <Section title={`Sign-in link for ${linkName}`} actions={<Link to={here({ link: undefined })}>Close sign-in link</Link>}>
          <SignInLink orgId={linkFor} />
        </Section>
      ) : null}
    </Page>
  );
}

type Here = (patch: Record<string, number | undefined>) => string;

function Resellers({ partnerId, here, chosen }: { partnerId: number; here: Here; chosen?: number }) {
  const client = useQueryClient();
  const list = useQuery(accountQueries.resellers(partnerId));
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createReseller', { params: { query: { targetPartnerId: partnerId } }, body: { resellerName: name, ...(email ? { email } : {}) } })),
    onSuccess: () => { setName(''); setEmail(''); void resellersChanged(client, partnerId); },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <Section title="Resellers">
      <form className="inline-form" onSubmit={submit} aria-label="Create a reseller">
        <Field label="Reseller name" value={name} onChange={(e) => setName(e.target.value)} />
        <Field label="Reseller email (optional)" type="email" value={email} onChange={(e) => setEmail(e.target.value)} />
        <Button kind="primary" type="submit" disabled={create.isPending}>Create reseller</Button>
      </form>
      <ErrorNote error={create.error} />
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table<Row> caption="Resellers" rows={list.data.resellers as Row[]} rowKey={(r) => r.id} empty="No resellers yet."
          columns={[
            { key: 'name', label: 'Name', cell: (r) => <>{r.name}{chosen === r.id ? <span className="muted"> (shown below)</span> : null}</> },
            { key: 'id', label: 'Id', cell: (r) => r.id },
            { key: 'state', label: 'State', cell: (r) => <ActiveBadge active={r.active} /> },
            { key: 'actions', label: 'Actions', cell: (r) => (
              <div className="actions">
                <Link to={here({ reseller: r.id, org: undefined, link: undefined })} aria-label={`Organizations of ${r.name}`}>Organizations</Link>
                <Link to={here({ tokens: r.id })} aria-label={`Tokens of ${r.name}`}>Tokens</Link>
              </div>
            ) },
          ]} />
      )}
    </Section>
  );
}

function Organizations({ resellerId, here, chosen }: { resellerId: number; here: Here; chosen?: number }) {
  const client = useQueryClient();
  const list = useQuery(accountQueries.organizations(resellerId));
  const resellerName = useAccountName(resellerId);
  const [orgName, setOrgName] = useState('');
  const [email, setEmail] = useState('');
  const [agentName, setAgentName] = useState('');
  const changed = () => void organizationsChanged(client, resellerId);
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createOrganization', {
      params: { query: { targetResellerId: resellerId } },
      body: { orgName, ...(email ? { email } : {}), ...(agentName ? { accountName: agentName } : {}) },
    })),
    onSuccess: () => { setOrgName(''); setEmail(''); setAgentName(''); changed(); },
  });
  const setActive = useMutation({
    mutationFn: (v: { id: number; active: boolean }) => ok(api.POST('/api/v2/updateOrganization', { params: { query: { targetOrganizationId: v.id } }, body: { active: v.active } })),
    onSuccess: changed,
  });
  const remove = useMutation({
    mutationFn: (id: number) => ok(api.DELETE('/api/v2/deleteOrganization', { params: { query: { targetResellerId: resellerId } }, body: { targetOrganizationId: id } })),
    onSuccess: changed,
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <Section title={`Organizations of ${resellerName}`}>
      <form className="inline-form" onSubmit={submit} aria-label="Create an organization">
        <Field label="Organization name" value={orgName} onChange={(e) => setOrgName(e.target.value)} />
        <Field label="Owner's email (optional)" type="email" value={email} onChange={(e) => setEmail(e.target.value)} hint="Invited as the organization's admin member" />
        <Field label="First agent's name (optional)" value={agentName} onChange={(e) => setAgentName(e.target.value)} />
        <Button kind="primary" type="submit" disabled={create.isPending}>Create organization</Button>
      </form>
      <ErrorNote error={create.error} />
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table<Row> caption={`Organizations of reseller ${resellerId}`} rows={list.data.organizations as Row[]} rowKey={(r) => r.id} empty="No organizations yet."
          columns={[
            { key: 'name', label: 'Name', cell: (r) => <>{r.name}{chosen === r.id ? <span className="muted"> (shown below)</span> : null}</> },
            { key: 'id', label: 'Id', cell: (r) => r.id },
            { key: 'created', label: 'Created', cell: (r) => when(r.createdAt as number) },
            { key: 'state', label: 'State', cell: (r) => <ActiveBadge active={r.active} /> },
            { key: 'actions', label: 'Actions', cell: (r) => (
              <div className="actions">
                <Link to={`/o/${r.id}`} aria-label={`Open organization ${r.name}`}>Open</Link>
                <Link to={here({ org: r.id })} aria-label={`Agents of ${r.name}`}>Agents</Link>
                <Link to={here({ tokens: r.id })} aria-label={`Tokens of ${r.name}`}>Tokens</Link>
                <Link to={here({ link: r.id })} aria-label={`Sign-in link for ${r.name}`}>Sign-in link</Link>
                <Button disabled={setActive.isPending} onClick={() => setActive.mutate({ id: r.id, active: r.active === false })}
                  aria-label={`${r.active === false ? 'Reactivate' : 'Suspend'} ${r.name}`}>
                  {r.active === false ? 'Reactivate' : 'Suspend'}
                </Button>
                <Confirm label="Delete" name={`Delete organization ${r.name}`} question={`Delete organization ${r.name}? This cannot be undone.`} confirm={`Yes, delete organization ${r.name}`} busy={remove.isPending} onConfirm={() => remove.mutate(r.id)} />
              </div>
            ) },
          ]} />
      )}
      <ErrorNote error={setActive.error ?? remove.error} />
    </Section>
  );
}

function Agents({ orgId, here, canSuspend }: { orgId: number; here: Here; canSuspend: boolean }) {
  const client = useQueryClient();
  const list = useQuery(accountQueries.agents(orgId));
  const orgName = useAccountName(orgId);
  const [name, setName] = useState('');
  const changed = () => void agentsChanged(client, orgId);
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createAccount', { params: { query: { targetOrganizationId: orgId } }, body: name ? { accountName: name } : {} })),
    onSuccess: () => { setName(''); changed(); },
  });
  const setActive = useMutation({
    mutationFn: (v: { id: number; active: boolean }) => ok(api.POST('/api/v2/updateAccount', { params: { query: { targetAccountId: v.id } }, body: { active: v.active } })),
    onSuccess: changed,
  });
  const remove = useMutation({
    mutationFn: (id: number) => ok(api.DELETE('/api/v2/deleteAccount', { params: { query: { targetOrganizationId: orgId } }, body: { targetAccountId: id } })),
    onSuccess: changed,
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <Section title={`Agents of ${orgName}`}>
      <form className="inline-form" onSubmit={submit} aria-label="Create an agent">
        <Field label="Agent name" value={name} onChange={(e) => setName(e.target.value)} />
        <Button kind="primary" type="submit" disabled={create.isPending}>Create agent</Button>
      </form>
      <ErrorNote error={create.error} />
      {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
        <Table<Row> caption={`Agents of organization ${orgId}`} rows={list.data.accounts as Row[]} rowKey={(r) => r.id} empty="No agents."
          columns={[
            { key: 'name', label: 'Name', cell: (r) => r.name },
            { key: 'id', label: 'Id', cell: (r) => r.id },
            { key: 'state', label: 'State', cell: (r) => <ActiveBadge active={r.active} /> },
            { key: 'actions', label: 'Actions', cell: (r) => (
              <div className="actions">
                <Link to={`/o/${orgId}/agents/${r.id}`} aria-label={`Open agent ${r.name}`}>Open</Link>
                <Link to={here({ tokens: r.id })} aria-label={`Tokens of ${r.name}`}>Tokens</Link>
                {canSuspend ? (
                  <Button disabled={setActive.isPending} onClick={() => setActive.mutate({ id: r.id, active: r.active === false })}
                    aria-label={`${r.active === false ? 'Reactivate' : 'Suspend'} ${r.name}`}>
                    {r.active === false ? 'Reactivate' : 'Suspend'}
                  </Button>
                ) : null}
                <Confirm label="Delete" name={`Delete agent ${r.name}`} question={`Delete agent ${r.name}? This cannot be undone.`} confirm={`Yes, delete agent ${r.name}`} busy={remove.isPending} onConfirm={() => remove.mutate(r.id)} />
              </div>
            ) },
          ]} />
      )}
      <ErrorNote error={setActive.error ?? remove.error} />
    </Section>
  );
}

/** A one-time sign-in link for an organization's member: GET /api/v2/auth/account/oneTimeAuthToken. */
function SignInLink({ orgId }: { orgId: number }) {
  const [email, setEmail] = useState('');
  const make = useMutation({
    mutationFn: () => ok(api.GET('/api/v2/auth/account/oneTimeAuthToken', { params: { query: { email, customerId: String(orgId) } } })),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); make.mutate(); };
  const link = make.data ? `${window.location.origin}/console/#/sign-in?ott=${encodeURIComponent(make.data.authToken)}` : null;
  return (
    <div className="stack">
      <form className="inline-form" onSubmit={submit}>
        <Field label="Member's email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} required
          hint="A member of the organization: its owner, or one invited in its Settings, Members" />
        <Link to={`/o/${orgId}/settings`}>Members of the organization</Link>
        <Button kind="primary" type="submit" disabled={make.isPending}>Make sign-in link</Button>
      </form>
      <ErrorNote error={make.error} />
      {link ? (
        <div className="note" role="status">
          <p>Send this link to {email}. It signs in once, until {when(make.data?.expiresAt as number | undefined)}.</p>
          <p><code className="secret" data-testid="sign-in-link">{link}</code></p>
          <CopyButton text={link} label="Copy link" />
        </div>
      ) : <Note>The link works once and expires within minutes; its token travels in the address's fragment, which never reaches a server.</Note>}
    </div>
  );
}

const SEARCH_TYPES = [
  { value: 'organization', label: 'Organizations' },
  { value: 'reseller', label: 'Resellers' },
  { value: 'account', label: 'Agents' },
];

/** searchAccounts over the signed-in account's subtree: by name, email or external id. */
function Search({ here }: { here: Here }) {
  const [type, setType] = useState('organization');
  const [text, setText] = useState('');
  const search = useMutation({
    mutationFn: () => ok(api.GET('/api/v2/searchAccounts', { params: { query: { accountType: type, ...(text.trim() ? { queryText: text.trim() } : {}) } } })),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); search.mutate(); };
  const open = (r: Row & { resellerId?: unknown; organizationId?: unknown }) => {
    if (r.accountType === 'reseller') return here({ reseller: r.id, org: undefined });
    if (r.accountType === 'organization') return here({ reseller: Number(r.resellerId), org: r.id });
    return here({ reseller: Number(r.resellerId), org: Number(r.organizationId) });
  };
  return (
    <Section title="Find an account">
      <form className="inline-form" onSubmit={submit} aria-label="Find an account">
        <Select label="Kind" value={type} onChange={(e) => setType(e.target.value)} options={SEARCH_TYPES} />
        <Field label="Name, email or external id" type="search" value={text} onChange={(e) => setText(e.target.value)} />
        <Button type="submit" disabled={search.isPending}>Find</Button>
      </form>
      <ErrorNote error={search.error} />
      {search.data ? (
        <Table<Row> caption="Accounts found" rows={search.data.accounts as Row[]} rowKey={(r) => r.id} empty="No account matches."
          columns={[
            { key: 'name', label: 'Name', cell: (r) => <Link to={open(r)}>{r.name}</Link> },
            { key: 'id', label: 'Id', cell: (r) => r.id },
            { key: 'email', label: 'Email', cell: (r) => (typeof r.email === 'string' ? r.email : '—') },
            { key: 'state', label: 'State', cell: (r) => <ActiveBadge active={r.active} /> },
          ]} />
      ) : null}
    </Section>
  );
}
