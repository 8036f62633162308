// Numbers: the organization's phone numbers and the agent holding each, a search of its numbering
// provider's inventory (by area code, place or phrase) with a buy button for the agent chosen,
// bring-your-own for resellers and partners, and returning a number (docs/console.md, "Numbers").
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { accountQueries } from '../../queries/accounts.ts';
import { numberQueries, numbersChanged } from '../../queries/numbers.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { BuyNumber } from '../../ui/buy-number.tsx';
import './numbers.css';

type SearchKind = 'prefix' | 'locality' | 'phrase';

function useAgents() {
  const { orgId } = useSession();
  return useQuery({ ...accountQueries.agents(orgId), enabled: orgId !== undefined });
}

export default function Numbers() {
  const agents = useAgents();
  const [agentId, setAgentId] = useState<number>();
  const list = agents.data?.accounts ?? [];
  const chosen = agentId ?? list[0]?.id;
  const nameOf = (id: number | null) => {
    if (id === null) return 'Nobody';
    const a = list.find((x) => x.id === id);
    return a ? a.name : `Agent #${id}`;
  };
  return (
    <Page title="Numbers">
      <div className="numbers-page">
        <Held nameOf={nameOf} />
        <Section title="Find a number">
          {agents.error ? <ErrorNote error={agents.error} /> : null}
          {list.length === 0 && !agents.isPending ? <Note>This organization has no agents: a number is bought for an agent.</Note> : (
            <Select
              label="Buy for agent" value={chosen === undefined ? '' : String(chosen)} onChange={(e) => setAgentId(Number(e.target.value))}
              options={list.map((a) => ({ value: String(a.id), label: a.name }))}
            />
          )}
          <Search agentId={chosen} agentName={chosen === undefined ? '' : nameOf(chosen)} />
        </Section>
        <Byo agentId={chosen} agentName={chosen === undefined ? '' : nameOf(chosen)} />
      </div>
    </Page>
  );
}

function Held({ nameOf }: { nameOf: (id: number | null) => string }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const numbers = useQuery(numberQueries.list(acting));
  const giveBack = useMutation({
    mutationFn: (number: string) => ok(api.POST('/api/v2/phoneNumber/return', { params: { query: { ...target } }, body: { number } })),
    onSuccess: () => numbersChanged(client, orgId),
  });
  const rows = numbers.data?.phoneNumbers ?? [];
  return (
    <Section title="The organization's numbers">
      {giveBack.data ? <Note>{giveBack.data.number} returned{giveBack.data.released ? ' and released at its provider' : ' (unbound; a number you brought stays yours at your provider)'}.</Note> : null}
      <ErrorNote error={giveBack.error} />
      {rows.some((n) => n.simulated) ? <Note>Some numbers are SIMULATED: fictional numbers from the simulated inventory, which no network reaches.</Note> : null}
      {numbers.isPending ? <Loading /> : numbers.error ? <ErrorNote error={numbers.error} /> : (
        <Table
          caption="The organization's numbers" rows={rows} rowKey={(n) => n.number} empty="No numbers yet: search below and buy one for an agent."
          columns={[
            { key: 'number', label: 'Number', cell: (n) => <strong>{n.number}</strong> },
            { key: 'agent', label: 'Held by', cell: (n) => nameOf(n.agentId) },
            { key: 'kind', label: 'Kind', cell: (n) => (n.kind === 'byo' ? 'Brought (BYO)' : 'Bought') },
            { key: 'provider', label: 'Provider', cell: (n) => (n.simulated ? <Badge tone="warn">SIMULATED</Badge> : n.provider ?? '—') },
            { key: 'state', label: 'State', cell: (n) => <><Badge tone={n.state === 'active' ? 'good' : n.state === 'reserved' ? 'warn' : 'bad'}>{n.state === 'reserved' ? 'being bought' : n.state === 'attention' ? 'needs attention' : n.state}</Badge>{n.lastError ? <small className="bad-text"> {n.lastError}</small> : null}</> },
            { key: 'place', label: 'Place', cell: (n) => [n.locality, n.region, n.country].filter(Boolean).join(', ') || '—' },
            { key: 'since', label: 'Since', cell: (n) => when(n.createdAt) },
            { key: 'return', label: 'Return', cell: (n) => (
              <Confirm
                label={`Return ${n.number}`} confirm="Yes, return it" disabled={giveBack.isPending} onConfirm={() => giveBack.mutate(n.number)}
                question={n.kind === 'byo' ? `Unbind ${n.number} from its agent?` : `Release ${n.number} at its provider? It may not be bought back.`}
              />
            ) },
          ]}
        />
      )}
    </Section>
  );
}

function Search({ agentId, agentName }: { agentId: number | undefined; agentName: string }) {
  const { orgId, target } = useSession();
  const client = useQueryClient();
  const [kind, setKind] = useState<SearchKind>('prefix');
  const [country, setCountry] = useState('US');
  const [prefix, setPrefix] = useState('');
  const [city, setCity] = useState('');
  const [region, setRegion] = useState('');
  const [phrase, setPhrase] = useState('');
  const search = useMutation({
    mutationFn: () => {
      const query = { ...target };
      const opt = (v: string) => (v.trim() === '' ? undefined : v.trim());
      if (kind === 'prefix') return ok(api.POST('/api/v2/phoneNumber/search/local/prefix', { params: { query }, body: { country, prefix: prefix.trim(), strict: false } }));
      if (kind === 'locality') return ok(api.POST('/api/v2/phoneNumber/search/local/locality', { params: { query }, body: { country, city: opt(city), region: opt(region) } }));
      return ok(api.POST('/api/v2/phoneNumber/search/local/phrase', { params: { query }, body: { country, phrase: phrase.trim(), city: opt(city), region: opt(region) } }));
    },
  });
  const buy = useMutation({
    mutationFn: (n: { number: string; country: string }) =>
      ok(api.POST('/api/v2/phoneNumber/assign', { params: { query: { targetAccountId: agentId } }, body: n })),
    onSuccess: (data) => {
      void numbersChanged(client, orgId);
      search.reset();
      return data;
    },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); buy.reset(); search.mutate(); };
  const found = search.data;
  return (
    <>
      <form onSubmit={submit} aria-label="Search numbers">
        <fieldset className="search-kind">
          <legend>Search by</legend>
          {([['prefix', 'Area code or prefix'], ['locality', 'City or region'], ['phrase', 'Phrase (letters become keypad digits)']] as const).map(([k, l]) => (
            <label key={k}><input type="radio" name="search-kind" value={k} checked={kind === k} onChange={() => setKind(k)} /> {l}</label>
          ))}
        </fieldset>
        <div className="inline-form">
          <Field label="Country" value={country} onChange={(e) => setCountry(e.target.value)} required maxLength={2} size={4} hint="ISO code: US, GB" />
          {kind === 'prefix' ? <Field label="Prefix" value={prefix} onChange={(e) => setPrefix(e.target.value)} required inputMode="numeric" placeholder="212" /> : null}
          {kind === 'phrase' ? <Field label="Phrase" value={phrase} onChange={(e) => setPhrase(e.target.value)} required placeholder="*cafe*" /> : null}
          {kind !== 'prefix' ? <Field label="City" value={city} onChange={(e) => setCity(e.target.value)} /> : null}
          {kind !== 'prefix' ? <Field label="Region" value={region} onChange={(e) => setRegion(e.target.value)} placeholder="TX" /> : null}
          <Button kind="primary" type="submit" disabled={search.isPending}>{search.isPending ? 'Searching…' : 'Search'}</Button>
        </div>
      </form>
      <ErrorNote error={search.error} />
      {buy.data ? <Note>{buy.data.phoneNumber.number} is now held by {agentName}{buy.data.simulated ? ' (a SIMULATED number: no network reaches it)' : ''}.</Note> : null}
      <ErrorNote error={buy.error} />
      {found ? (
        <>
          {found.simulated
            ? <Note>The numbering provider is SIMULATED: these are fictional numbers that reach no one, and buying one costs nothing.</Note>
            : <p className="muted">From {found.provider}.</p>}
          {found.widenedTo ? <p className="muted">Nothing matched exactly: numbers of the area {found.widenedTo} instead.</p> : null}
          {found.phraseDigits ? <p className="muted">The phrase on a keypad: {found.phraseDigits}</p> : null}
          <Table
            caption="Numbers found" rows={found.numbers} rowKey={(n) => n.number} empty="No numbers found."
            columns={[
              { key: 'number', label: 'Number', cell: (n) => <strong>{n.number}</strong> },
              { key: 'place', label: 'Place', cell: (n) => [n.locality, n.region, n.country].filter(Boolean).join(', ') },
              { key: 'can', label: 'Can', cell: (n) => [n.capabilities.voice && 'voice', n.capabilities.sms && 'SMS', n.capabilities.mms && 'MMS'].filter(Boolean).join(', ') },
              { key: 'price', label: 'Monthly price', cell: (n) => (n.monthlyPrice ? `${n.monthlyPrice.amount} ${n.monthlyPrice.currency}` : n.simulated ? 'Free (simulated)' : 'Not said') },
              { key: 'buy', label: 'Buy', cell: (n) => (
                <BuyNumber n={n} agentName={agentName} disabled={agentId === undefined || buy.isPending} onBuy={() => buy.mutate({ number: n.number, country: n.country })} />
              ) },
            ]}
          />
        </>
      ) : null}
    </>
  );
}

function Byo({ agentId, agentName }: { agentId: number | undefined; agentName: string }) {
  const { account, orgId } = useSession();
  const client = useQueryClient();
  const [number, setNumber] = useState('');
  const assign = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/phoneNumber/byo/assign', { params: { query: { targetAccountId: agentId } }, body: { number: number.trim() } })),
    onSuccess: () => { setNumber(''); void numbersChanged(client, orgId); },
  });
  const above = account.kind === 'reseller' || account.kind === 'partner';
  return (
    <Section title="Bring your own number">
      {!above ? <p className="muted">A number you own at another provider is bound to an agent by your reseller (its token or console).</p> : (
        <>
          <form className="inline-form" onSubmit={(e) => { e.preventDefault(); assign.mutate(); }} aria-label="Bring your own number">
            <Field label="Number you own" value={number} onChange={(e) => setNumber(e.target.value)} required placeholder="+12145551234" hint={agentName ? `Bound to ${agentName}` : undefined} />
            <Button kind="primary" type="submit" disabled={assign.isPending || agentId === undefined}>Bind number</Button>
          </form>
          <ErrorNote error={assign.error} />
          {assign.data ? (
            <div className="note" role="status">
              <p>{assign.data.phoneNumber.number} is bound to {agentName}. Point it at your provider to:</p>
              <dl className="byo-hooks">
                <dt>Voice</dt><dd><code>{assign.data.webhooks.voiceUrl}</code></dd>
                <dt>Call status</dt><dd><code>{assign.data.webhooks.voiceStatusUrl}</code></dd>
                <dt>SMS</dt><dd><code>{assign.data.webhooks.smsUrl}</code></dd>
              </dl>
            </div>
          ) : null}
        </>
      )}
    </Section>
  );
}
