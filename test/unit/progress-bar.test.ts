// The progress bar of `callplane tasks import` (src/cli/progress.ts): redrawn in place on a
// terminal, a line per quarter elsewhere.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProgressBar } from '../../src/cli/progress.ts';

function stream(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, isTTY, columns: 80, write: (t: string) => { writes.push(t); return true; } };
}

describe('progress bar', () => {
  it('on a terminal: redraws one line in place, at most ten times a second, and ends it', () => {
    const s = stream(true);
    const bar = new ProgressBar(2 * 1024 * 1024, 'uploading a.csv', s);
    bar.update(0);
    for (let i = 1; i < 100; i++) bar.update(i * 1024); // within the same 100 ms: not drawn again
    assert.equal(s.writes.length, 1);
    bar.update(2 * 1024 * 1024); // the end is always drawn
    bar.finish('read to the end');
    assert.equal(s.writes.length, 3);
    const ERASE = '\u001b[K'; // erases the rest of the line
    for (const w of s.writes) assert.ok(w.startsWith('\r') && w.includes(ERASE), JSON.stringify(w));
    const shown = s.writes.map((w) => w.replace(ERASE, ''));
    assert.match(shown[0], /^\ruploading a\.csv \[-+\] {3}0% 0 B\/2\.0 MB$/);
    assert.match(shown[2], /^\ruploading a\.csv \[#+\] 100% 2\.0 MB\/2\.0 MB read to the end\n$/);
    assert.ok(shown.every((w) => w.trim().length <= 80), 'fits the terminal');
  });

  it('elsewhere: one line at 0, 25, 50, 75 and 100 %, whatever the number of updates', () => {
    const s = stream(false);
    const bar = new ProgressBar(1000, 'uploading b.csv', s);
    for (let done = 0; done <= 1000; done += 10) bar.update(done);
    bar.finish('read to the end');
    assert.deepEqual(s.writes, [
      'uploading b.csv:   0% 0 B/1000 B\n',
      'uploading b.csv:  25% 250 B/1000 B\n',
      'uploading b.csv:  50% 500 B/1000 B\n',
      'uploading b.csv:  75% 750 B/1000 B\n',
      'uploading b.csv: 100% 1000 B/1000 B\n',
      'uploading b.csv: read to the end\n',
    ]);
  });
});
