// The console's copy of the catalog voices (console/src/pages/agents/catalog-voices.ts: the
// console imports nothing of src/) is the API's list, voice for voice.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { VOICES } from '../../src/modules/agents/catalog.ts';
import { CATALOG_VOICES } from '../../console/src/pages/agents/catalog-voices.ts';

it('the console offers exactly the catalog voices the API takes', () => {
  assert.deepEqual(CATALOG_VOICES, VOICES);
});
