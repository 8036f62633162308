// CSV import: the file goes to POST /api/v2/tasks/csv (multipart, field `csv`) through
// XMLHttpRequest, whose upload progress events feed a real progress bar (fetch cannot report
// them); the answer's per-row report follows: rows accepted, and each refused row's line and reason.
import { useId, useRef, useState, type FormEvent } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { CallplaneError } from '../../api.ts';
import { tasksChanged } from '../../queries/tasks.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Page, Section, Table } from '../../ui/parts.tsx';
import { Checkbox } from './common.tsx';
import { TaskNav } from './list.tsx';

type Report = paths['/api/v2/tasks/csv']['post']['responses'][200]['content']['application/json'];
type Line = Report['errors'][number];

/** Sends the form with the console's header and cookie, reporting the bytes sent as they go. */
function upload(url: string, form: FormData, onProgress: (sent: number, total: number) => void): Promise<Report> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.withCredentials = true;
    xhr.setRequestHeader('x-callplane-console', '1');
    xhr.responseType = 'json';
    xhr.upload.addEventListener('progress', (e) => { if (e.lengthComputable) onProgress(e.loaded, e.total); });
    xhr.upload.addEventListener('load', (e) => onProgress(e.total || e.loaded, e.total || e.loaded));
    xhr.addEventListener('load', () => {
      const body = xhr.response as unknown;
      if (xhr.status >= 200 && xhr.status < 300 && body) { resolve(body as Report); return; }
      const message = body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string'
        ? (body as { message: string }).message : `${xhr.status} ${xhr.statusText}`;
      reject(new CallplaneError(xhr.status, { ...(body && typeof body === 'object' ? body : {}), success: false, message }));
    });
    xhr.addEventListener('error', () => reject(new Error('The upload failed: the connection was lost.')));
    xhr.addEventListener('abort', () => reject(new Error('The upload was stopped.')));
    xhr.send(form);
  });
}

export default function ImportTasks() {
  const { orgId, target } = useSession();
  const client = useQueryClient();
  const fileId = useId();
  const progressId = useId();
  const input = useRef<HTMLInputElement>(null);
  const [dryRun, setDryRun] = useState(false);
  const [progress, setProgress] = useState<{ sent: number; total: number } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [report, setReport] = useState<Report | null>(null);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const file = input.current?.files?.[0];
    setError(null);
    setReport(null);
    if (!file) { setError(new Error('csv is required: choose a CSV file to upload.')); return; }
    const form = new FormData();
    // dryRun goes before the file: the service reads the form as it arrives.
    if (dryRun) form.append('dryRun', 'true');
    form.append('csv', file, file.name);
    const qs = target.targetAccountId !== undefined ? `?targetAccountId=${target.targetAccountId}` : '';
    setBusy(true);
    setProgress({ sent: 0, total: file.size });
    try {
      const answer = await upload(`/api/v2/tasks/csv${qs}`, form, (sent, total) => setProgress({ sent, total }));
      setReport(answer);
      if (answer.inserted > 0) void tasksChanged(client, orgId);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const percent = progress && progress.total > 0 ? Math.round((progress.sent / progress.total) * 100) : 0;
  return (
    <Page title="Import tasks from CSV" actions={<TaskNav />}>
      <Section title="Upload">
        <p className="muted">
          One task per row, with a header row naming the columns: <code>type</code>, <code>target</code>, <code>context</code>,{' '}
          <code>taskContext</code>, <code>greeting</code>, <code>waitToGreet</code>, <code>accountId</code>, <code>scheduledFor</code>,{' '}
          <code>message</code>, <code>externalTaskId</code>, <code>meta</code>. A row without a type is a call. Bad rows are reported; the good ones are queued.
        </p>
        <form onSubmit={(e) => void submit(e)} aria-label="Upload a CSV file">
          <div className="field">
            <label htmlFor={fileId}>CSV file</label>
            <input id={fileId} ref={input} type="file" accept=".csv,text/csv" />
          </div>
          <Checkbox label="Dry run (check every row, queue nothing)" checked={dryRun} onChange={setDryRun} />
          <div className="actions"><Button kind="primary" type="submit" disabled={busy}>Upload</Button></div>
          {progress ? (
            <div className="field">
              <label htmlFor={progressId}>Upload progress</label>
              <progress id={progressId} className="progress" max={100} value={percent} aria-valuetext={`${percent} %`}>{percent} %</progress>
              <small className="muted" role="status">{percent} % ({progress.sent.toLocaleString()} of {progress.total.toLocaleString()} bytes sent){busy && percent === 100 ? '; checking rows…' : ''}</small>
            </div>
          ) : null}
          <ErrorNote error={error} />
        </form>
      </Section>
      {report ? <ImportReport report={report} /> : null}
    </Page>
  );
}

function ImportReport({ report: r }: { report: Report }) {
  return (
    <Section title="Report">
      <p role="status">{r.message}</p>
      <dl className="stats">
        <div><dt>Rows</dt><dd>{r.rows}</dd></div>
        <div><dt>Accepted</dt><dd>{r.valid}</dd></div>
        <div><dt>Refused</dt><dd>{r.invalid}</dd></div>
        <div><dt>Queued</dt><dd>{r.inserted}</dd></div>
      </dl>
      {r.dryRun ? <p>A dry run: nothing was queued.</p> : null}
      {!r.complete ? <p role="alert" className="error">Reading stopped early (see the last refused line): upload the lines from there again.</p> : null}
      <h3>Refused rows</h3>
      <Table<Line> caption="Refused rows" rows={r.errors} rowKey={(l) => `${l.line}:${l.message}`} empty="No row was refused."
        columns={[{ key: 'line', label: 'Line', cell: (l) => l.line }, { key: 'reason', label: 'Reason', cell: (l) => l.message }]} />
      {r.errorsTruncated ? <p className="muted">Only the first 1000 refused rows are listed.</p> : null}
      {r.warnings.length ? (
        <>
          <h3>Warnings</h3>
          <Table<Line> caption="Warnings" rows={r.warnings} rowKey={(l) => `${l.line}:${l.message}`}
            columns={[{ key: 'line', label: 'Line', cell: (l) => (l.line === 0 ? 'the form' : l.line) }, { key: 'warning', label: 'Warning', cell: (l) => l.message }]} />
        </>
      ) : null}
    </Section>
  );
}
