// The service as Twilio's calls reach it in tests: a harness listening on its public URL (so the
// fake Twilio can fetch its TwiML and post its callbacks there), answering with the fake model
// server as its language model, and a fake Twilio to hand numbers and record requests.
import { startFakeLlm, type FakeLlm } from './fake-llm.ts';
import { startFakeTwilio, type FakeTwilio } from './fake-twilio.ts';
import { startHarness, type Engine, type Harness, type HarnessOptions } from './harness.ts';
import { freePort } from './wait.ts';

export interface TwilioApp {
  h: Harness;
  llm: FakeLlm;
  fake: FakeTwilio;
  publicUrl: string;
  /** Closes the harness, then the doubles. */
  close(): Promise<void>;
}

/** `env` adds to (or overrides) the settings that point the service at the doubles. */
export async function startTwilioApp(engine: Engine, opts: HarnessOptions, env: Record<string, string> = {}): Promise<TwilioApp> {
  const llm = await startFakeLlm({ models: ['fake-model'] });
  const fake = await startFakeTwilio();
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const h = await startHarness(engine, {
    CALLPLANE_PUBLIC_URL: publicUrl, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
    CALLPLANE_LLM_BASE_URL: llm.baseUrl, CALLPLANE_LLM_API_KEY: 'sk-fake', CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_LLM_MAX_RETRIES: '0',
    ...env,
  }, opts);
  await h.app.listen({ port, host: '127.0.0.1' });
  return {
    h, llm, fake, publicUrl,
    async close() {
      await h.close();
      await fake.close();
      await llm.close();
    },
  };
}
