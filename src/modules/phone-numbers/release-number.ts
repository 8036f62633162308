// The job of a queued number release (releases.ts): release a deleted holder's number at the
// provider it was bought at, through the provider's own adapter (Twilio: DELETE
// IncomingPhoneNumbers/{sid}). A number the provider no longer holds counts as released, so a
// retry after a release whose answer was lost does nothing more; a number whose reference was
// never learnt (its purchase did not settle) is looked up first and the reference recorded before
// releasing, so a retry releases that one and never looks again. A provider that keeps failing is
// retried on the queue's backoff; after the last attempt (or at once when retrying cannot help:
// the provider's settings are gone or refused) the row stays `failed` with last_error, and an
// error is logged: an operator's attention list (docs/numbers.md).
import type { Config } from '../../config.ts';
import type { Db, NumberReleaseRow } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { CarrierError, PermanentCarrierError, TransientCarrierError, type CarrierOptions, type NumberProvider } from '../../providers/index.ts';
import { exponentialBackoff } from '../../queue/engine.ts';
import type { HandlerContext, Outcome } from '../../queue/runner.ts';
import { numberProviderOf, openProviderSettings } from '../numbering-providers/carriers.ts';
import { numberingRepo } from '../numbering-providers/repository.ts';
import { phoneNumberRepo, releaseRepo } from './repository.ts';

export interface ReleaseHandlerDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'allowPrivateTargets'>;
  carrierOptions?: CarrierOptions;
  /** Delay before attempt `attempt + 1` (default exponentialBackoff: 1 s, 2 s, 4 s …). */
  backoff?: (attempt: number) => number;
  now(): number;
  log?: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

type ReleaseOutcome = Outcome<NumberReleaseRow>;

export function createReleaseHandler(deps: ReleaseHandlerDeps) {
  const { db } = deps;
  const backoff = deps.backoff ?? ((attempt: number) => exponentialBackoff(attempt));

  /**
   * The provider to release at: the organization's own settings of it while it has them (an
   * agent's deletion: they may have been updated since), else the copy taken at the deletion.
   */
  async function providerFor(row: NumberReleaseRow): Promise<NumberProvider> {
    const current = await numberingRepo.find(db, row.org_id, row.provider);
    if (current) return numberProviderOf(deps, openProviderSettings(current, deps.box));
    if (row.provider_config === null) {
      throw new PermanentCarrierError(`numbering provider '${row.provider}' was no longer configured for organization ${row.org_id} when it was deleted: nothing to release it with`, row.provider);
    }
    return numberProviderOf(deps, {
      providerId: row.provider,
      config: JSON.parse(row.provider_config) as Record<string, string>,
      secrets: row.provider_secrets ? deps.box.openJson<Record<string, string>>(row.provider_secrets) : {},
    });
  }

  function failed(row: NumberReleaseRow, err: CarrierError): ReleaseOutcome {
    const message = `${row.provider}: ${err.message}`.slice(0, 1000);
    if (err instanceof TransientCarrierError && row.attempt < row.max_attempts) {
      return { kind: 'retry', runAt: deps.now() + (err.retryAfterMs ?? backoff(row.attempt)), set: { last_error: message } };
    }
    deps.log?.error({ number: row.number, orgId: row.org_id, provider: row.provider, providerRef: row.provider_ref, err: err.message },
      'number release failed for good: the number may still be rented; release it at the provider (docs/numbers.md)');
    return { kind: 'complete', state: 'failed', set: { last_error: message } };
  }

  return async (row: NumberReleaseRow, ctx: HandlerContext): Promise<ReleaseOutcome> => {
    try {
      const provider = await providerFor(row);
      let ref = row.provider_ref;
      if (!ref) {
        // Only looked up while nobody here holds it: one bought again since is not ours to release.
        const holder = await phoneNumberRepo.findByNumber(db, row.number);
        if (holder) {
          deps.log?.warn({ number: row.number, orgId: row.org_id, holder: holder.org_id }, 'number release skipped: the number is held again');
          return { kind: 'complete', state: 'finished', set: { last_error: `not released: held again by organization ${holder.org_id}` } };
        }
        const found = await provider.find(row.number, ctx.signal);
        if (!found) return { kind: 'complete', state: 'finished', set: { released_at: deps.now(), last_error: null } };
        ref = found.providerRef;
        await releaseRepo.setRef(db, row.id, ref, deps.now());
      }
      await provider.release(ref, ctx.signal);
      return { kind: 'complete', state: 'finished', set: { released_at: deps.now(), provider_ref: ref, last_error: null } };
    } catch (err) {
      if (ctx.signal.aborted || !(err instanceof CarrierError)) throw err;
      return failed(row, err);
    }
  };
}
