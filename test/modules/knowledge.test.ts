// Knowledge bases end to end on both engines: create and list, upload text, Markdown, HTML and
// a PDF generated here, search finds the right chunk (ranked), the contract's delete (ids in the
// body or the query, all or none), search no longer finds it, user text that is FTS syntax is
// never an error, and another organization's knowledge base, documents and search are 404.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import { splitChunks, CHUNK_CHARS } from '../../src/modules/knowledge/chunks.ts';
import { htmlToText } from '../../src/modules/knowledge/extract.ts';

/** A minimal one-page PDF showing `text` in Helvetica, with a correct xref table. */
function pdf(text: string): Buffer {
  const stream = `BT /F1 12 Tf 72 720 Td (${text.replace(/[\\()]/g, (c) => `\\${c}`)}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((o, i) => { offsets.push(out.length); out += `${i + 1} 0 obj\n${o}\nendobj\n`; });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

function form(filename: string, content: string | Buffer, type: string): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    Buffer.from(content), Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

it('splits text into overlapping chunks of at most CHUNK_CHARS, cut at sentence ends', () => {
  const text = Array.from({ length: 60 }, (_, i) => `Sentence number ${i} says something about item ${i}.`).join(' ');
  const chunks = splitChunks(text);
  assert.ok(chunks.length > 2);
  for (const c of chunks) assert.ok(c.length <= CHUNK_CHARS);
  for (const c of chunks.slice(0, -1)) assert.ok(c.endsWith('.'), c.slice(-20));
  // Overlap: the start of each chunk appears at the end of the previous one.
  for (let i = 1; i < chunks.length; i++) assert.ok(chunks[i - 1]!.includes(chunks[i]!.slice(0, 40)));
  assert.deepEqual(splitChunks(''), []);
});

it('HTML becomes its visible text: scripts and styles dropped, entities decoded once', () => {
  const t = htmlToText('<html><head><style>p{color:red}</style><script>var x = "<p>";</script></head><body><p>Fish &amp; chips</p><p>&lt;b&gt; &#x41;&#66;</p><!-- hidden --></body></html>');
  assert.ok(t.includes('Fish & chips'));
  assert.ok(t.includes('<b> AB'));
  assert.ok(!t.includes('color') && !t.includes('var x') && !t.includes('hidden'));
});

forEachEngine('knowledge bases', (h) => {
  const org = async () => h().organization((await h().reseller()).id);
  const createKb = (token: string, body: unknown) => h().call('POST', '/api/v2/kb/knowledgebase', { token, body });
  const upload = (token: string, kbId: string, filename: string, content: string | Buffer, type = 'text/plain') => {
    const { payload, headers } = form(filename, content, type);
    return h().call('POST', `/api/v2/kb/knowledgebase/${kbId}/documents/upload`, { token, payload: payload as unknown as string, headers });
  };
  const search = (token: string, kbId: string, query: string, limit?: number) =>
    h().call('POST', `/api/v2/kb/knowledgebase/${kbId}/search`, { token, body: { query, ...(limit ? { limit } : {}) } });

  it('creates and lists knowledge bases; uploads text, Markdown, HTML and PDF; search finds the right chunk', async () => {
    const o = await org();
    const created = await createKb(o.token, { name: 'Support FAQ', description: 'What callers ask' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const kb = created.body.knowledgeBase;
    assert.match(kb.id, /^kb_/);
    assert.equal(kb.name, 'Support FAQ');

    const text = await upload(o.token, kb.id, 'hours.txt', 'Our office opens at nine and closes at five on weekdays.');
    assert.equal(text.status, 201, JSON.stringify(text.body));
    assert.equal(text.body.document.format, 'text');
    assert.equal(text.body.document.chunks, 1);
    const md = await upload(o.token, kb.id, 'refunds.md', '# Refunds\n\nRefunds are processed within fourteen days of the request.', 'application/octet-stream');
    assert.equal(md.status, 201, JSON.stringify(md.body));
    assert.equal(md.body.document.format, 'markdown');
    const html = await upload(o.token, kb.id, 'parking.html', '<html><script>var parking = "secret";</script><p>Parking is free in the garage &amp; on the street.</p></html>', 'text/html');
    assert.equal(html.status, 201, JSON.stringify(html.body));
    const p = await upload(o.token, kb.id, 'animals.pdf', pdf('The zebra migration happens every July.'), 'application/pdf');
    assert.equal(p.status, 201, JSON.stringify(p.body));
    assert.equal(p.body.document.format, 'pdf');
    assert.ok(p.body.document.characters > 20);

    // A long document: the chunk that holds the answer is the one returned first.
    const filler = Array.from({ length: 40 }, (_, i) => `Paragraph ${i} is about the general history of the company.`).join('\n\n');
    const long = await upload(o.token, kb.id, 'long.txt', `${filler}\n\nThe warranty covers batteries for three years.\n\n${filler}`);
    assert.ok(long.body.document.chunks >= 3, JSON.stringify(long.body));

    const listed = await h().call('GET', '/api/v2/kb/knowledgebase', { token: o.token });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.knowledgeBases.map((k: { id: string; documents: number }) => [k.id, k.documents]), [[kb.id, 5]]);
    const docs = await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents/list`, { token: o.token });
    assert.equal(docs.body.total, 5);

    const zebra = await search(o.token, kb.id, 'When do zebras migrate?');
    assert.equal(zebra.status, 200, JSON.stringify(zebra.body));
    assert.equal(zebra.body.results[0].documentId, p.body.document.id);
    assert.match(zebra.body.results[0].content, /zebra migration/);
    const warranty = await search(o.token, kb.id, 'battery warranty');
    assert.equal(warranty.body.results[0].documentId, long.body.document.id);
    assert.match(warranty.body.results[0].content, /warranty covers batteries/);
    assert.ok(warranty.body.results[0].score > 0);
    const parking = await search(o.token, kb.id, 'parking garage');
    assert.equal(parking.body.results[0].documentId, html.body.document.id);
    assert.ok(!JSON.stringify(parking.body).includes('secret'));
    assert.equal((await search(o.token, kb.id, 'refund')).body.results[0].documentId, md.body.document.id);
    assert.equal((await search(o.token, kb.id, 'history', 2)).body.results.length, 2);
  });

  it('user text with FTS syntax is searched as words, never an error', async () => {
    const o = await org();
    const kb = (await createKb(o.token, { name: 'kb' })).body.knowledgeBase;
    await upload(o.token, kb.id, 'a.txt', 'Opening hours are listed on the door.');
    for (const q of ['"hours', 'hours*', 'NEAR(hours door)', 'hours AND OR NOT', '(hours) & | ! :*', 'content:hours', '\'hours\'', '^hours -door']) {
      const r = await search(o.token, kb.id, q);
      assert.equal(r.status, 200, `${q}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.results.length, 1, q);
    }
    const none = await search(o.token, kb.id, '?!? *** "');
    assert.equal(none.status, 400);
    assert.match(none.body.message, /query must contain at least one word/);
    assert.deepEqual((await search(o.token, kb.id, 'xylophone')).body.results, []);
  });

  it('the contract\'s GET …/documents deletes by ids in the body or the query, all or none; search no longer finds them', async () => {
    const o = await org();
    const kb = (await createKb(o.token, { name: 'kb' })).body.knowledgeBase;
    const a = (await upload(o.token, kb.id, 'a.txt', 'Alpacas graze in the highlands.')).body.document;
    const b = (await upload(o.token, kb.id, 'b.txt', 'Beavers build dams in rivers.')).body.document;
    const c = (await upload(o.token, kb.id, 'c.txt', 'Camels store fat in their humps.')).body.document;
    assert.equal((await search(o.token, kb.id, 'alpacas')).body.results.length, 1);

    const partial = await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents`, { token: o.token, body: { documentIds: [a.id, 'doc_missing'] } });
    assert.equal(partial.status, 404, JSON.stringify(partial.body));
    assert.deepEqual(partial.body.notFoundDocumentIds, ['doc_missing']);
    assert.equal((await search(o.token, kb.id, 'alpacas')).body.results.length, 1, 'nothing deleted');

    const byBody = await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents`, { token: o.token, body: { documentIds: [a.id] } });
    assert.equal(byBody.status, 204, JSON.stringify(byBody.body));
    assert.deepEqual((await search(o.token, kb.id, 'alpacas')).body.results, []);
    const byQuery = await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents`, { token: o.token, query: { documentIds: `${b.id},${c.id}` } });
    assert.equal(byQuery.status, 204, JSON.stringify(byQuery.body));
    assert.deepEqual((await search(o.token, kb.id, 'beavers camels')).body.results, []);
    assert.equal((await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents/list`, { token: o.token })).body.total, 0);
    const empty = await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents`, { token: o.token });
    assert.equal(empty.status, 400);

    const d = (await upload(o.token, kb.id, 'd.txt', 'Dolphins sleep with one eye open.')).body.document;
    assert.equal((await h().call('DELETE', `/api/v2/kb/knowledgebase/${kb.id}/documents/${d.id}`, { token: o.token })).status, 204);
    assert.deepEqual((await search(o.token, kb.id, 'dolphins')).body.results, []);
    assert.equal((await h().call('DELETE', `/api/v2/kb/knowledgebase/${kb.id}`, { token: o.token })).status, 200);
    assert.equal((await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}`, { token: o.token })).status, 404);
  });

  it('refuses what it cannot index: unknown formats, an unreadable PDF, a non-multipart upload', async () => {
    const o = await org();
    const kb = (await createKb(o.token, { name: 'kb' })).body.knowledgeBase;
    const exe = await upload(o.token, kb.id, 'tool.exe', 'MZ', 'application/octet-stream');
    assert.equal(exe.status, 400);
    assert.match(exe.body.message, /file must be/);
    const badPdf = await upload(o.token, kb.id, 'x.pdf', 'not a pdf at all', 'application/pdf');
    assert.equal(badPdf.status, 400, JSON.stringify(badPdf.body));
    assert.equal((await h().call('POST', `/api/v2/kb/knowledgebase/${kb.id}/documents/upload`, { token: o.token, body: { file: 'x' } })).status, 415);
    assert.equal((await createKb(o.token, { name: '' })).status, 400);
  });

  it('another organization\'s knowledge base, documents and search are 404', async () => {
    const o = await org();
    const other = await org();
    const kb = (await createKb(o.token, { name: 'private' })).body.knowledgeBase;
    const doc = (await upload(o.token, kb.id, 'a.txt', 'The vault code is kept secret.')).body.document;
    const t = other.token;
    assert.equal((await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}`, { token: t })).status, 404);
    assert.equal((await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents/list`, { token: t })).status, 404);
    assert.equal((await upload(t, kb.id, 'b.txt', 'intruder')).status, 404);
    assert.equal((await search(t, kb.id, 'vault')).status, 404);
    assert.equal((await h().call('GET', `/api/v2/kb/knowledgebase/${kb.id}/documents`, { token: t, query: { documentIds: doc.id } })).status, 404);
    assert.equal((await h().call('DELETE', `/api/v2/kb/knowledgebase/${kb.id}/documents/${doc.id}`, { token: t })).status, 404);
    assert.equal((await h().call('DELETE', `/api/v2/kb/knowledgebase/${kb.id}`, { token: t })).status, 404);
    assert.deepEqual((await h().call('GET', '/api/v2/kb/knowledgebase', { token: t })).body.knowledgeBases, []);
    // Its own knowledge base never returns the other's chunks.
    const mine = (await createKb(t, { name: 'mine' })).body.knowledgeBase;
    assert.deepEqual((await search(t, mine.id, 'vault secret')).body.results, []);
    assert.equal((await search(o.token, kb.id, 'vault')).body.results.length, 1);
  });
});
