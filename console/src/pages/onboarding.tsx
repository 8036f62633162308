// The path on a fresh install, on the overview: a reseller, an organization, an agent, publishing it
// and a number for it, each step with its action right there (the API's own operations, its errors
// beside the form). Loaded only when the overview shows it (lazy, off the first screen).
import { useState, type FormEvent, type ReactNode } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../sdk/schema.d.ts';
import { api, ok } from '../api.ts';
import { accountQueries, agentsChanged, organizationsChanged, resellersChanged } from '../queries/accounts.ts';
import { agentQueries, agentVersionsChanged } from '../queries/agents.ts';
import { numberQueries, numbersChanged } from '../queries/numbers.ts';
import { Link, navigate } from '../router.tsx';
import { useSession } from '../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Section } from '../ui/parts.tsx';
import { BuyNumber } from '../ui/buy-number.tsx';

type StepState = 'done' | 'now' | 'later';

function Step({ n, title, state, children }: { n: number; title: string; state: StepState; children?: ReactNode }) {
  return (
    <li className={`step step-${state}`} aria-current={state === 'now' ? 'step' : undefined}>
      <p><strong>{n}. {title}</strong>{' '}
        {state === 'done' ? <Badge tone="good">Done</Badge> : state === 'now' ? <Badge tone="live">Next</Badge> : <Badge>Later</Badge>}
      </p>
      {state === 'now' ? children : null}
    </li>
  );
}

const stateOf = (done: boolean, before: boolean): StepState => (done ? 'done' : before ? 'now' : 'later');

/** The checklist, or nothing once the organization acted on has a published agent with a number. */
export default function Onboarding() {
  const session = useSession();
  const { account, orgId } = session;
  const client = useQueryClient();
  const partner = account.kind === 'partner';
  const resellers = useQuery({ ...accountQueries.resellers(account.id), enabled: partner });
  const orgAccount = useQuery({ ...accountQueries.account(orgId), enabled: partner && orgId !== undefined });
  const resellerId = account.kind === 'reseller' ? account.id
    : partner ? (orgId !== undefined ? orgAccount.data?.resellerId : resellers.data?.resellers[0]?.id) : undefined;
  const orgs = useQuery({ ...accountQueries.organizations(resellerId), enabled: resellerId !== undefined && orgId === undefined });
  const agents = useQuery({ ...accountQueries.agents(orgId), enabled: orgId !== undefined });
  const agent = agents.data?.accounts[0] as { id: number; name: string } | undefined;
  const settings = useQuery({ ...agentQueries.settings(agent?.id ?? 0), enabled: agent !== undefined });
  const numbers = useQuery({ ...numberQueries.list(session), enabled: orgId !== undefined });

  const hasReseller = account.kind !== 'partner' || (resellers.data?.resellers.length ?? 0) > 0 || orgId !== undefined;
  const firstOrg = orgs.data?.organizations[0] as { id: number; name: string } | undefined;
  const hasOrg = orgId !== undefined || firstOrg !== undefined;
  const hasAgent = agent !== undefined;
  const published = settings.data?.sponsorship.publishedAt != null;
  const hasNumber = (numbers.data?.phoneNumbers.length ?? 0) > 0;

  const pending = (partner && resellers.isPending) || (orgId === undefined && resellerId !== undefined && orgs.isPending)
    || (orgId !== undefined && (agents.isPending || numbers.isPending || (hasAgent && settings.isPending)));
  if (account.kind === 'agent' || pending) return null;
  if (hasReseller && hasOrg && orgId === undefined) {
    // Set up already; nothing to choose for on the partner's or reseller's own overview.
    return null;
  }
  if (hasReseller && hasOrg && hasAgent && published && hasNumber) return null;

  return (
    <Section title="Get started">
      <p className="muted">A phone agent answers on a number: {partner ? 'a reseller, then ' : ''}{account.kind !== 'organization' ? 'an organization (your customer), then ' : ''}its agent, published, with a number.</p>
      <ol className="steps">
        {partner ? (
          <Step n={1} title="Create a reseller" state={stateOf(hasReseller, true)}>
            <CreateReseller partnerId={account.id} onDone={() => void resellersChanged(client, account.id)} />
          </Step>
        ) : null}
        {account.kind !== 'organization' ? (
          <Step n={partner ? 2 : 1} title="Create an organization" state={stateOf(hasOrg, hasReseller)}>
            {resellerId !== undefined ? <CreateOrganization resellerId={resellerId} onDone={(id) => { void organizationsChanged(client, resellerId); navigate(`/o/${id}`, { raw: true }); }} /> : null}
          </Step>
        ) : null}
        <Step n={account.kind === 'organization' ? 1 : partner ? 3 : 2} title="Create an agent" state={stateOf(hasAgent, hasOrg)}>
          {orgId !== undefined ? <CreateAgent orgId={orgId} onDone={() => void agentsChanged(client, orgId)} /> : null}
        </Step>
        <Step n={account.kind === 'organization' ? 2 : partner ? 4 : 3} title="Publish the agent" state={stateOf(published, hasAgent)}>
          {agent ? <Publish agent={agent} /> : null}
        </Step>
        <Step n={account.kind === 'organization' ? 3 : partner ? 5 : 4} title="Give it a number" state={stateOf(hasNumber, published)}>
          {agent ? <GetNumber agent={agent} /> : null}
        </Step>
      </ol>
    </Section>
  );
}

function CreateReseller({ partnerId, onDone }: { partnerId: number; onDone: () => void }) {
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createReseller', { params: { query: { targetPartnerId: partnerId } }, body: { resellerName: name } })),
    onSuccess: onDone,
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <form className="inline-form" onSubmit={submit} aria-label="Create a reseller">
      <Field label="Reseller name" value={name} onChange={(e) => setName(e.target.value)} hint="You, or the company that sells to organizations" />
      <Button kind="primary" type="submit" disabled={create.isPending}>Create reseller</Button>
      <ErrorNote error={create.error} />
    </form>
  );
}

function CreateOrganization({ resellerId, onDone }: { resellerId: number; onDone: (id: number) => void }) {
  const [orgName, setOrgName] = useState('');
  const [agentName, setAgentName] = useState('');
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createOrganization', {
      params: { query: { targetResellerId: resellerId } }, body: { orgName, ...(agentName ? { accountName: agentName } : {}) },
    })),
    onSuccess: (r) => onDone(Number((r.organization as { id: number }).id)),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <form className="inline-form" onSubmit={submit} aria-label="Create an organization">
      <Field label="Organization name" value={orgName} onChange={(e) => setOrgName(e.target.value)} />
      <Field label="First agent's name (optional)" value={agentName} onChange={(e) => setAgentName(e.target.value)} hint="Every organization starts with one agent" />
      <Button kind="primary" type="submit" disabled={create.isPending}>Create organization</Button>
      <ErrorNote error={create.error} />
    </form>
  );
}

function CreateAgent({ orgId, onDone }: { orgId: number; onDone: () => void }) {
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createAccount', { params: { query: { targetOrganizationId: orgId } }, body: name ? { accountName: name } : {} })),
    onSuccess: onDone,
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <form className="inline-form" onSubmit={submit} aria-label="Create an agent">
      <Field label="Agent name" value={name} onChange={(e) => setName(e.target.value)} />
      <Button kind="primary" type="submit" disabled={create.isPending}>Create agent</Button>
      <ErrorNote error={create.error} />
    </form>
  );
}

function Publish({ agent }: { agent: { id: number; name: string } }) {
  const client = useQueryClient();
  const publish = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/agent/publish', { params: { query: { targetAccountId: agent.id } } })),
    onSuccess: () => void agentVersionsChanged(client, agent.id),
  });
  return (
    <div className="stack">
      <p>{agent.name} answers with its live configuration: the defaults until you change its staging settings and publish them
        (<Link to={`/agents/${agent.id}`}>open {agent.name}</Link> to set its greeting, prompt, voice and model first).</p>
      <div className="actions"><Button kind="primary" disabled={publish.isPending} onClick={() => publish.mutate()}>Publish {agent.name}</Button></div>
      <ErrorNote error={publish.error} />
    </div>
  );
}

type Found = paths['/api/v2/phoneNumber/search/local/prefix']['post']['responses'][200]['content']['application/json']['numbers'][number];

function GetNumber({ agent }: { agent: { id: number; name: string } }) {
  const session = useSession();
  const client = useQueryClient();
  const [prefix, setPrefix] = useState('');
  const search = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/phoneNumber/search/local/prefix', { params: { query: { ...session.target } }, body: { country: 'US', prefix: prefix.trim(), strict: false } })),
  });
  const buy = useMutation({
    mutationFn: (n: Found) => ok(api.POST('/api/v2/phoneNumber/assign', { params: { query: { targetAccountId: agent.id } }, body: { number: n.number, country: n.country } })),
    onSuccess: () => void numbersChanged(client, session.orgId),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); search.mutate(); };
  const found: Found[] = search.data?.numbers ?? [];
  return (
    <div className="stack">
      <form className="inline-form" onSubmit={submit} aria-label="Find a number">
        <Field label="Area code (US)" value={prefix} onChange={(e) => setPrefix(e.target.value)} inputMode="numeric" />
        <Button kind="primary" type="submit" disabled={search.isPending}>Find numbers</Button>
      </form>
      <ErrorNote error={search.error} />
      {search.data?.simulated ? <Note>The numbering provider is SIMULATED: these numbers are fictional and no network reaches them. Set the organization&apos;s provider on its Settings page for real numbers.</Note> : null}
      {search.data && found.length === 0 ? <Note>No numbers found there. Try another area code, or the Numbers page&apos;s search by city or phrase.</Note> : null}
      {found.length > 0 ? (
        <ul className="plain-list" aria-label="Numbers found">
          {found.slice(0, 5).map((n) => (
            <li key={n.number}>
              <strong>{n.number}</strong> <span className="muted">{[n.locality, n.region].filter(Boolean).join(', ')}</span>{' '}
              <BuyNumber n={n} agentName={agent.name} disabled={buy.isPending} onBuy={() => buy.mutate(n)}
                simulatedLabel="Buy (simulated, free)" simulatedName={`Buy ${n.number} for ${agent.name}`} />
            </li>
          ))}
        </ul>
      ) : null}
      {buy.isPending ? <Loading what="Buying" /> : null}
      <ErrorNote error={buy.error} />
    </div>
  );
}
