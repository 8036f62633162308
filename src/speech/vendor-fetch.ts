// The fetch the vendors' official clients (Deepgram, ElevenLabs, Cartesia) make their HTTP requests
// with: npm's undici, the same copy the service loads for its own requests. Loading it replaces the
// global dispatcher that Node's built-in fetch (an older undici inside Node) also uses, and the two
// do not agree: a client left on the built-in fetch had every POST refused ("invalid
// content-length header") in a running service. test/speech/deepgram.test.ts loads undici as the
// service does, so it would see that again.
import { fetch as undiciFetch } from 'undici';

export const vendorFetch = undiciFetch as unknown as typeof fetch;
