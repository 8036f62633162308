// The one CSV cell encoder (src/lib/csv-cell.ts): formula-looking text is neutralised at the start
// of the cell and at the start of every part after a separator (`,` `;` tab, CR, LF), so a
// spreadsheet splitting on `;` or tabs runs nothing either; cells holding a separator are quoted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'csv-parse/sync';
import { csvCell, csvRow } from '../../src/lib/csv-cell.ts';

/** The cells as a spreadsheet splitting on `sep` sees them, quotes honoured (RFC 4180). */
const split = (line: string, sep: string): string[] => (parse(line, { delimiter: sep, relax_column_count: true }) as string[][])[0] ?? [];

/** Whether a spreadsheet would take this cell's text as a formula. */
const live = (cell: string) => /^ *[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/.test(cell);

describe('csvCell', () => {
  it("the red team's counterpart name: quoted, and each part after a ';' neutralised", () => {
    const cell = csvCell('x;=1+1;@SUM(1+1)');
    assert.equal(cell, `"x;'=1+1;'@SUM(1+1)"`);
    // Split on ';' while honouring quotes: one cell. Split on ';' even ignoring quotes: no part is live.
    assert.deepEqual(split(cell, ';'), [`x;'=1+1;'@SUM(1+1)`]);
    for (const part of cell.replace(/^"|"$/g, '').split(';')) assert.ok(!live(part), part);
  });

  it('every separator starts a part: comma, semicolon, tab, CR, LF; spaces after one are skipped', () => {
    assert.equal(csvCell('a,=1'), `"a,'=1"`);
    assert.equal(csvCell('a, =1'), `"a, '=1"`);
    assert.equal(csvCell('a;  +1'), `"a;  '+1"`);
    assert.equal(csvCell('a\t-1'), `"a\t'-1"`);
    assert.equal(csvCell('a\r@x'), `"a\r'@x"`);
    assert.equal(csvCell('a\n=cmd|x'), `"a\n'=cmd|x"`);
    assert.equal(csvCell('a\r\n=1'), `"a\r\n'=1"`);
    assert.equal(csvCell('=1;=2,=3\t=4\n=5'), `"'=1;'=2,'=3\t'=4\n'=5"`);
  });

  it('the formula characters: = + - @ tab CR and their full-width forms', () => {
    assert.equal(csvCell('=HYPERLINK("http://x")'), '"\'=HYPERLINK(""http://x"")"');
    assert.equal(csvCell('+14155552671'), '\'+14155552671');
    assert.equal(csvCell('-1+2'), '\'-1+2');
    assert.equal(csvCell('@SUM(A1)'), '\'@SUM(A1)');
    assert.equal(csvCell('\tx'), '"\'\tx"');
    assert.equal(csvCell('\rx'), '"\'\rx"');
    assert.equal(csvCell('\uFF1D1+1'), '\'\uFF1D1+1');
    assert.equal(csvCell('x;\uFF20SUM(1)'), '"x;\'\uFF20SUM(1)"');
    assert.equal(csvCell('a;\uFF0B1;\uFF0D1'), '"a;\'\uFF0B1;\'\uFF0D1"');
  });

  it('a tab or a semicolon alone is quoted', () => {
    assert.equal(csvCell('a;b'), '"a;b"');
    assert.equal(csvCell('a\tb'), '"a\tb"');
    assert.equal(csvCell('say "hi"'), '"say ""hi"""');
  });

  it('formula characters inside a part are left as they are', () => {
    assert.equal(csvCell('a=b+c-d@e'), 'a=b+c-d@e');
    assert.equal(csvCell('inbound: @everyone, hi'), '"inbound: @everyone, hi"');
    assert.equal(csvCell('plain'), 'plain');
  });

  it('numbers are written as numbers; null and undefined are empty', () => {
    assert.equal(csvCell(-5), '-5');
    assert.equal(csvCell(30000), '30000');
    assert.equal(csvCell(null), '');
    assert.equal(csvCell(undefined), '');
    assert.equal(csvCell('-5'), '\'-5', 'text that looks like a number is still text');
  });

  it('csvRow: cells joined by commas, CRLF at the end', () => {
    assert.equal(csvRow(['id', 'x;=1+1', 3, null]), `id,"x;'=1+1",3,\r\n`);
  });
});
