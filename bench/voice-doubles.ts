// The vendors' doubles of bench/voice's `streaming` part, in a process of their own (as the real
// services are elsewhere), so their work is not counted against the agent's process. Started by
// bench/voice.ts with fork(). Each double speaks its vendor's documented protocol and is given the
// vendor's documented typical timing:
//   Deepgram live (test/helpers/fake-deepgram.ts): its final (speech_final) comes `endpointing` ms
//     of quiet audio after the last loud 10 ms block; the agent asks for the endpointing (300 ms by
//     default; the bench sets it per stream);
//   the model (test/helpers/fake-llm.ts): every reply's first token `BENCH_MODEL_FIRST_TOKEN_MS`
//     (300) after the request, the rest streamed at once;
//   ElevenLabs (test/helpers/fake-elevenlabs.ts): the first audio of every socket
//     `BENCH_VOICE_FIRST_BYTE_MS` (100) after the text asking for it.
// Messages: hear {words} (what Deepgram's next utterances say; '' for a sound without words),
// reply {text} (what the model answers from now on), exit. It sends {type: 'ready', llmBaseUrl, deepgramUrl, deepgramKey, elevenlabsUrl} once up.
import { startFakeDeepgram } from '../test/helpers/fake-deepgram.ts';
import { startFakeElevenLabs } from '../test/helpers/fake-elevenlabs.ts';
import { startFakeLlm } from '../test/helpers/fake-llm.ts';

const MODEL_FIRST_TOKEN_MS = Number(process.env.BENCH_MODEL_FIRST_TOKEN_MS ?? 300);
const VOICE_FIRST_BYTE_MS = Number(process.env.BENCH_VOICE_FIRST_BYTE_MS ?? 100);
let reply = 'We open at nine. Anything else?';

const llm = await startFakeLlm();
const deepgram = await startFakeDeepgram();
const elevenlabs = await startFakeElevenLabs();
elevenlabs.failures.firstAudioDelayMs = VOICE_FIRST_BYTE_MS;
// Every request gets the reply after the first-token delay: the script is kept full.
const topUp = () => { while (llm.script.length < 200) llm.script.push({ text: reply, delayMs: MODEL_FIRST_TOKEN_MS }); };
topUp();
const timer = setInterval(topUp, 50);

process.on('message', (m: { type: string; words?: string[]; text?: string }) => {
  void (async () => {
    if (m.type === 'hear') {
      deepgram.hear.splice(0, deepgram.hear.length, ...(m.words ?? []));
      process.send!({ type: 'heard' });
    } else if (m.type === 'reply') {
      reply = m.text!;
      llm.script.length = 0;
      topUp();
      process.send!({ type: 'replying' });
    } else if (m.type === 'exit') {
      clearInterval(timer);
      await Promise.all([llm.close(), deepgram.close(), elevenlabs.close()]);
      process.disconnect();
    }
  })();
});
process.send!({ type: 'ready', llmBaseUrl: llm.baseUrl, deepgramUrl: deepgram.url, deepgramKey: deepgram.apiKey, elevenlabsUrl: elevenlabs.baseUrl });
