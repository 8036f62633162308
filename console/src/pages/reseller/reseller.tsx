// Plans and billing of a reseller or partner (#/plans; a partner may act for one of its resellers,
// `?account=`): its plan catalog and prices (productCatalog, putProductPlan), the billing system its
// organizations subscribe through (Stripe or Chargebee: billingSystemConfig, getBillingSystemConfig;
// keys sent, never shown back but masked) and its activity-record export (adr.tsx).
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { api, ok, when } from '../../api.ts';
import { accountQueries } from '../../queries/accounts.ts';
import { navigate } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { AdrExport } from '../settings/adr.tsx';

/** What the shell hands a page (pages/index.ts's PageProps; not imported, to keep the page out of an import circle). */
interface PageProps { params: Record<string, string>; query: URLSearchParams }

type PlanBody = paths['/api/v2/product/catalog/plan/{productPlanId}']['put']['requestBody']['content']['application/json'];
type Plan = PlanBody & { productPlanId?: string; id?: string; source?: string };

export default function ResellerPage({ query }: PageProps) {
  const { account } = useSession();
  const partner = account.kind === 'partner';
  const chosen = partner && /^\d+$/.test(query.get('account') ?? '') ? Number(query.get('account')) : undefined;
  const resellers = useQuery({ ...accountQueries.resellers(account.id), enabled: partner });
  const target = chosen !== undefined ? { targetAccountId: chosen } : {};
  const whose = chosen !== undefined ? (resellers.data?.resellers.find((r) => r.id === chosen)?.name ?? `reseller #${chosen}`) : account.name;
  return (
    <Page title="Plans and billing">
      {partner ? (
        <Select label="Whose" value={chosen === undefined ? '' : String(chosen)}
          onChange={(e) => navigate(e.target.value ? `/plans?account=${e.target.value}` : '/plans')}
          options={[{ value: '', label: `${account.name} (the partner's own)` }, ...(resellers.data?.resellers ?? []).map((r) => ({ value: String(r.id), label: r.name }))]} />
      ) : null}
      <Catalog key={`c${chosen}`} target={target} whose={whose} />
      <BillingSystem key={`b${chosen}`} target={target} whose={whose} />
      <AdrExport key={`a${chosen}`} accountId={chosen} title={`Activity-record export of ${whose} (every organization below it)`} />
    </Page>
  );
}

const money = (n: number | null | undefined, currency: string | undefined) => (n === null || n === undefined ? '—' : `${n} ${currency ?? ''}`.trim());
const amount = (n: number | null | undefined) => (n === null || n === undefined ? 'unlimited' : String(n));

function Catalog({ target, whose }: { target: { targetAccountId?: number }; whose: string }) {
  const client = useQueryClient();
  const key = ['catalog', target.targetAccountId ?? 'self'] as const;
  const catalog = useQuery({ queryKey: key, queryFn: () => ok(api.GET('/api/v2/product/productCatalog', { params: { query: target } })) });
  const plans = (catalog.data?.plans ?? []) as unknown as Plan[];
  const [editing, setEditing] = useState<Plan | null>(null);
  const [form, setForm] = useState({ id: '', name: '', currency: 'USD', monthly: '', yearly: '', minutes: '', texts: '', perMinute: '' });
  const edit = (p: Plan) => {
    setEditing(p);
    setForm({
      id: p.productPlanId ?? p.id ?? '', name: p.name, currency: p.currency ?? 'USD', monthly: String(p.monthlyPrice), yearly: String(p.yearlyPrice),
      minutes: p.included.callMinutes === null ? '' : String(p.included.callMinutes), texts: p.included.texts === null ? '' : String(p.included.texts),
      perMinute: p.overage.callMinute === null ? '' : String(p.overage.callMinute),
    });
  };
  const orNull = (v: string) => (v.trim() === '' ? null : Number(v));
  const save = useMutation({
    mutationFn: () => {
      const base = editing;
      const body: PlanBody = {
        name: form.name, currency: form.currency, monthlyPrice: Number(form.monthly), yearlyPrice: Number(form.yearly),
        description: base?.description ?? '', available: base?.available ?? true,
        included: { callMinutes: orNull(form.minutes), texts: orNull(form.texts), tasks: base?.included.tasks ?? null, conversations: base?.included.conversations ?? null, modelTokens: base?.included.modelTokens ?? null },
        overage: { callMinute: orNull(form.perMinute), text: base?.overage.text ?? null, task: base?.overage.task ?? null, conversation: base?.overage.conversation ?? null, modelTokensPer1k: base?.overage.modelTokensPer1k ?? null },
        limits: base?.limits ?? { concurrencyPerRun: 5 },
      };
      return ok(api.PUT('/api/v2/product/catalog/plan/{productPlanId}', { params: { path: { productPlanId: form.id.trim() }, query: target }, body }));
    },
    onSuccess: () => { setEditing(null); void client.invalidateQueries({ queryKey: key }); },
  });
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  return (
    <Section title={`Plan catalog of ${whose}`}>
      {catalog.isPending ? <Loading /> : catalog.error ? <ErrorNote error={catalog.error} /> : (
        <Table<Plan> caption="Plans" rows={plans} rowKey={(p) => p.productPlanId ?? p.id ?? p.name} empty="No plans."
          columns={[
            { key: 'name', label: 'Plan', cell: (p) => <>{p.name} <span className="muted">{p.productPlanId ?? p.id}</span></> },
            { key: 'price', label: 'Price', cell: (p) => `${money(p.monthlyPrice, p.currency)} a month, ${money(p.yearlyPrice, p.currency)} a year` },
            { key: 'included', label: 'Includes', cell: (p) => `${amount(p.included.callMinutes)} call minutes, ${amount(p.included.texts)} texts` },
            { key: 'overage', label: 'Past it', cell: (p) => (p.overage.callMinute === null ? 'calls wait' : `${money(p.overage.callMinute, p.currency)} a minute`) },
            { key: 'from', label: 'From', cell: (p) => <>{p.source ?? '—'} {p.available === false ? <Badge tone="warn">Withdrawn</Badge> : null}</> },
            { key: 'actions', label: 'Actions', cell: (p) => <Button onClick={() => edit(p)} aria-label={`Edit plan ${p.name}`}>Edit</Button> },
          ]} />
      )}
      <form onSubmit={submit} aria-label="A plan of the catalog" className="grid-2">
        <Field label="Plan id" value={form.id} onChange={set('id')} hint="pplan- and lowercase letters, digits and dashes; an inherited plan's id replaces it in this catalog" />
        <Field label="Plan name" value={form.name} onChange={set('name')} />
        <Field label="Currency" value={form.currency} onChange={set('currency')} />
        <Field label="Monthly price" type="number" step="0.01" value={form.monthly} onChange={set('monthly')} />
        <Field label="Yearly price" type="number" step="0.01" value={form.yearly} onChange={set('yearly')} />
        <Field label="Call minutes included" type="number" value={form.minutes} onChange={set('minutes')} hint="Empty: unlimited" />
        <Field label="Texts included" type="number" value={form.texts} onChange={set('texts')} hint="Empty: unlimited" />
        <Field label="Price of a minute past them" type="number" step="0.0001" value={form.perMinute} onChange={set('perMinute')} hint="Empty: calls wait instead" />
        <div className="actions">
          <Button kind="primary" type="submit" disabled={save.isPending}>{editing ? 'Save plan' : 'Add plan'}</Button>
          {editing ? <Button onClick={() => { setEditing(null); setForm({ id: '', name: '', currency: 'USD', monthly: '', yearly: '', minutes: '', texts: '', perMinute: '' }); }}>New plan instead</Button> : null}
        </div>
        {save.isSuccess ? <Note>Plan saved.</Note> : null}
        <ErrorNote error={save.error} />
      </form>
    </Section>
  );
}

function BillingSystem({ target, whose }: { target: { targetAccountId?: number }; whose: string }) {
  const client = useQueryClient();
  const key = ['billing-system', target.targetAccountId ?? 'self'] as const;
  const current = useQuery({ queryKey: key, queryFn: () => ok(api.GET('/api/v2/billing/billingSystemSettings', { params: { query: target } })) });
  const [type, setType] = useState('stripe');
  const [keys, setKeys] = useState({ apiKey: '', publishableKey: '', webhookSigningKey: '', site: '', webhookUsername: '', webhookPassword: '' });
  const save = useMutation({
    mutationFn: () => {
      const pick = type === 'stripe' ? ['apiKey', 'publishableKey', 'webhookSigningKey'] : ['apiKey', 'publishableKey', 'site', 'webhookUsername', 'webhookPassword'];
      const body = Object.fromEntries(pick.filter((k) => keys[k as keyof typeof keys].trim() !== '').map((k) => [k, keys[k as keyof typeof keys].trim()]));
      return ok(api.POST('/api/v2/billing/billingSystemConfig', { params: { query: target }, body: { billingSystemType: type, ...body } }));
    },
    onSuccess: () => { setKeys({ apiKey: '', publishableKey: '', webhookSigningKey: '', site: '', webhookUsername: '', webhookPassword: '' }); void client.invalidateQueries({ queryKey: key }); },
  });
  const set = (k: keyof typeof keys) => (e: { target: { value: string } }) => setKeys({ ...keys, [k]: e.target.value });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  const b = current.data?.billingSystem as { billingSystemType: string; apiKey: string; publishableKey: string | null; site: string | null; webhookUrl: string; verifiedAt: number; webhookSigningKey: string | null } | null | undefined;
  const inEffect = current.data?.inEffect as { accountId: number; billingSystemType: string } | null | undefined;
  return (
    <Section title={`Billing system of ${whose}`}>
      {current.isPending ? <Loading /> : current.error ? <ErrorNote error={current.error} /> : (
        <>
          {b ? (
            <dl className="kv">
              <dt>System</dt><dd>{b.billingSystemType}</dd>
              <dt>API key</dt><dd><code>{b.apiKey}</code></dd>
              <dt>Publishable key</dt><dd><code>{b.publishableKey ?? '—'}</code></dd>
              {b.site ? <><dt>Site</dt><dd>{b.site}</dd></> : null}
              {b.webhookSigningKey ? <><dt>Webhook signing key</dt><dd><code>{b.webhookSigningKey}</code></dd></> : null}
              <dt>Webhook URL (set it at the processor)</dt><dd><code>{b.webhookUrl}</code></dd>
              <dt>Key last accepted</dt><dd>{when(b.verifiedAt)}</dd>
            </dl>
          ) : <Note>{inEffect ? `No billing system of its own: its organizations subscribe through ${inEffect.billingSystemType} of account #${inEffect.accountId}.` : 'No billing system: subscriptions start at once and nobody is charged.'}</Note>}
        </>
      )}
      <form onSubmit={submit} aria-label="Billing system" className="grid-2">
        <Select label="Processor" value={type} onChange={(e) => setType(e.target.value)} options={[{ value: 'stripe', label: 'Stripe' }, { value: 'chargebee', label: 'Chargebee' }]} />
        {type === 'chargebee' ? <Field label="Chargebee site" value={keys.site} onChange={set('site')} hint="Without .chargebee.com" /> : null}
        <Field label="API key" type="password" value={keys.apiKey} onChange={set('apiKey')} autoComplete="off" hint={b ? 'Empty keeps the stored key' : 'Checked with the processor before it is kept'} />
        <Field label="Publishable key" type="password" value={keys.publishableKey} onChange={set('publishableKey')} autoComplete="off" />
        {type === 'stripe' ? <Field label="Webhook signing key" type="password" value={keys.webhookSigningKey} onChange={set('webhookSigningKey')} autoComplete="off" hint="whsec_…" /> : null}
        {type === 'chargebee' ? <Field label="Webhook user name" value={keys.webhookUsername} onChange={set('webhookUsername')} autoComplete="off" /> : null}
        {type === 'chargebee' ? <Field label="Webhook password" type="password" value={keys.webhookPassword} onChange={set('webhookPassword')} autoComplete="new-password" /> : null}
        <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>Save billing system</Button></div>
        {save.isSuccess ? <Note>Saved: the processor accepted the key. Keys are stored and shown masked from now on.</Note> : null}
        <ErrorNote error={save.error} />
      </form>
    </Section>
  );
}
