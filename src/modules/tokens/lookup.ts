// What authentication reads (TokenLookup, src/http/auth.ts) on the tokens and accounts tables:
// built once in src/platform.ts and handed by buildApp to the auth hook, so the HTTP layer
// imports no module.
import type { Db } from '../../db/types.ts';
import type { TokenLookup } from '../../http/auth.ts';
import { accountRepo } from '../accounts/repository.ts';
import { tokenRepo } from './repository.ts';

/** A console session's last use is written at most this often (its listing shows it to the minute). */
const TOUCH_EVERY_MS = 60_000;

export function tokenLookup(db: Db): TokenLookup {
  // When this process last wrote each session's use: most requests then write nothing.
  const touched = new Map<number, number>();
  return {
    async touchSession(tokenId, now) {
      const last = touched.get(tokenId);
      if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
      if (touched.size >= 10_000) touched.clear();
      touched.set(tokenId, now);
      await tokenRepo.touchSession(db, tokenId, now, TOUCH_EVERY_MS);
    },
    token: (hash) => tokenRepo.findWithAccountByHash(db, hash),
    consume: (tokenId, now) => tokenRepo.consume(db, tokenId, now),
    account: (id) => accountRepo.findWithSuspension(db, id),
  };
}
