// The `openai` package, loaded on first use: about half a megabyte of source and the objects its
// modules build, which a service that never talks to an OpenAI-compatible model or speech server
// (every idle one, and one configured for the simulated or offline engines) does not need in memory.
import type { ClientOptions, default as OpenAI } from 'openai';

export type { OpenAI };
type Sdk = typeof import('openai');

let sdk: Promise<Sdk> | undefined;

/** Whether the package has been asked for yet (a test sees that warming an engine loads it). */
export function sdkRequested(): boolean {
  return sdk !== undefined;
}

/** The package itself (its error classes, `toFile`), loaded once. */
export function openaiSdk(): Promise<Sdk> {
  sdk ??= import('openai');
  return sdk;
}

/** A client made on first use and kept (construction is cheap; loading the package is not). */
export function lazyClient(options: ClientOptions): () => Promise<OpenAI> {
  let client: Promise<OpenAI> | undefined;
  return () => {
    client ??= openaiSdk().then(({ default: Client }) => new Client(options));
    return client;
  };
}
