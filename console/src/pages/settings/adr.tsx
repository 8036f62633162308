// The activity-record export of an account (an organization's own records, or a reseller's or
// partner's for every organization below it): GET/POST/DELETE /api/v2/billing/adrExport…, and its
// windows and shipments (GET /api/v2/billing/adrExports). The password is sent, never shown back.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, CallplaneError, ok, when } from '../../api.ts';
import { Badge, Button, ErrorNote, Field, Loading, Note, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';

interface Config { deliveryProtocol: string; host: string; port: number; username: string; password?: string; path?: string | null; rotationMinutes?: string | number; hostKeyFingerprint?: string | null; enabled?: boolean; nextWindowStart?: number | null }

/** `accountId`: an account below the signed-in one; undefined: the signed-in account's own. */
export function AdrExport({ accountId, title }: { accountId: number | undefined; title: string }) {
  const client = useQueryClient();
  const query = accountId === undefined ? {} : { targetAccountId: accountId };
  const key = ['adr-export', accountId ?? 'self'] as const;
  const config = useQuery({
    queryKey: [...key, 'config'],
    queryFn: async () => {
      try { return (await ok(api.GET('/api/v2/billing/adrExportSettings', { params: { query } }))).config as unknown as Config; } catch (err) {
        if (err instanceof CallplaneError && err.status === 404) return null;
        throw err;
      }
    },
  });
  const exports = useQuery({ queryKey: [...key, 'log'], queryFn: () => ok(api.GET('/api/v2/billing/adrExports', { params: { query: { ...query, limit: 10 } } })), enabled: !!config.data });
  const changed = () => void client.invalidateQueries({ queryKey: key });
  const off = useMutation({ mutationFn: () => ok(api.DELETE('/api/v2/billing/adrExportSettings', { params: { query } })), onSuccess: changed });
  return (
    <Section title={title}>
      <p className="muted">Every call and text as a record, shipped as a file per window to your server over SFTP, FTPS or FTP.</p>
      {config.isPending ? <Loading /> : config.error ? <ErrorNote error={config.error} /> : (
        <>
          {config.data ? (
            <p className="wrap-any">
              {config.data.enabled ? <Badge tone="good">On</Badge> : <Badge tone="warn">Off</Badge>}{' '}
              {config.data.deliveryProtocol}://{config.data.username}@{config.data.host}:{config.data.port}{config.data.path ? `/${String(config.data.path).replace(/^\//, '')}` : ''}
              {', every '}{config.data.rotationMinutes} minutes; password {config.data.password ?? 'stored'}{config.data.hostKeyFingerprint ? `; host key ${config.data.hostKeyFingerprint}` : ''}.
              {config.data.enabled ? <> <Confirm label="Turn off" name="Turn the export off" question="Turn the export off? Settings and log are kept." confirm="Yes, turn it off" busy={off.isPending} onConfirm={() => off.mutate()} /></> : null}
            </p>
          ) : <Note>No export is configured.</Note>}
          <ErrorNote error={off.error} />
          <AdrForm query={query} current={config.data ?? null} onSaved={changed} />
          {exports.data ? (
            <Table caption="Export windows, newest first" rows={exports.data.windows} rowKey={(w) => w.windowId} empty="No windows yet."
              columns={[
                { key: 'file', label: 'File', cell: (w) => w.fileName },
                { key: 'window', label: 'Window', cell: (w) => `${when(w.windowStart)} – ${when(w.windowEnd)}` },
                { key: 'state', label: 'State', cell: (w) => <>{w.state}{w.lastError ? <small className="bad-text"> {w.lastError}</small> : null}</> },
                { key: 'records', label: 'Records', cell: (w) => w.records ?? '—' },
              ]} />
          ) : <ErrorNote error={exports.error} />}
        </>
      )}
    </Section>
  );
}

function AdrForm({ query, current, onSaved }: { query: { targetAccountId?: number }; current: Config | null; onSaved: () => void }) {
  const [f, setF] = useState({
    deliveryProtocol: current?.deliveryProtocol ?? 'sftp', host: current?.host ?? '', port: String(current?.port ?? 22), username: current?.username ?? '',
    password: '', path: current?.path ?? '', rotationMinutes: String(current?.rotationMinutes ?? '60'), hostKeyFingerprint: current?.hostKeyFingerprint ?? '',
  });
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const save = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/billing/adrExportConfig', {
      params: { query },
      body: {
        deliveryProtocol: f.deliveryProtocol, host: f.host.trim(), port: Number(f.port), username: f.username,
        ...(f.password ? { password: f.password } : {}), ...(f.path ? { path: f.path } : {}), rotationMinutes: f.rotationMinutes,
        ...(f.deliveryProtocol === 'sftp' && f.hostKeyFingerprint ? { hostKeyFingerprint: f.hostKeyFingerprint.trim() } : {}),
      },
    })),
    onSuccess: () => { setF((x) => ({ ...x, password: '' })); onSaved(); },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  return (
    <form onSubmit={submit} aria-label="Activity-record export settings" className="grid-2">
      <Select label="Protocol" value={f.deliveryProtocol} onChange={set('deliveryProtocol')} options={['sftp', 'ftps', 'ftp']} />
      <Field label="Server (host)" value={f.host} onChange={set('host')} />
      <Field label="Port" type="number" value={f.port} onChange={set('port')} min={1} max={65535} />
      <Field label="User name" value={f.username} onChange={set('username')} autoComplete="off" />
      <Field label="Password" type="password" value={f.password} onChange={set('password')} autoComplete="new-password" hint={current ? 'Stored, never shown. Empty keeps it (unless the server or user changes).' : 'Sent once; never shown back'} />
      <Field label="Folder (optional)" value={f.path ?? ''} onChange={set('path')} />
      <Field label="A file every (minutes)" value={f.rotationMinutes} onChange={set('rotationMinutes')} hint="A divisor of 1440: 15, 60, 1440…" />
      {f.deliveryProtocol === 'sftp' ? <Field label="Host key fingerprint" value={f.hostKeyFingerprint ?? ''} onChange={set('hostKeyFingerprint')} hint="SHA256:… as ssh-keygen -lf prints it, or trust-on-first-use" /> : null}
      <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>Save export</Button></div>
      {save.isSuccess ? <Note>{save.data.message ?? 'Export saved.'}</Note> : null}
      <ErrorNote error={save.error} />
    </form>
  );
}
