// What authentication reads (TokenLookup, src/http/auth.ts) on the tokens and accounts tables:
// built once in src/platform.ts and handed by buildApp to the auth hook, so the HTTP layer
// imports no module.
import type { Db } from '../../db/types.ts';
import type { TokenLookup } from '../../http/auth.ts';
import { accountRepo } from '../accounts/repository.ts';
import { tokenRepo } from './repository.ts';

export function tokenLookup(db: Db): TokenLookup {
  return {
    token: (hash) => tokenRepo.findWithAccountByHash(db, hash),
    consume: (tokenId, now) => tokenRepo.consume(db, tokenId, now),
    account: (id) => accountRepo.findWithSuspension(db, id),
  };
}
