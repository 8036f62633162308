// The worker thread that decodes one audio file (audio-file.ts's readAudioFile starts it through
// src/lib/worker-task.ts): decodeAudioFile, and the samples moved back rather than copied when
// they fill their own buffer.
import { serveWorkerTask } from '../lib/worker-task.ts';
import { decodeAudioFile } from './audio-file.ts';

serveWorkerTask((bytes: Uint8Array) => decodeAudioFile(bytes), (pcm) =>
  pcm.buffer instanceof ArrayBuffer && pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength ? [pcm.buffer] : []);
