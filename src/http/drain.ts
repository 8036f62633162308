// Refused uploads: what is left of the request body must be read before answering, or the next
// request on the same keep-alive connection is never read (the CSV and knowledge uploads).
import type { IncomingMessage } from 'node:http';

/**
 * Reads and drops what is left of a request body, so that the next request on its keep-alive
 * connection can be read. False when the body is (or turns out) larger than `maxBytes` or is
 * still arriving after `ms`: that connection must then be closed.
 */
export function drainRequest(raw: IncomingMessage, maxBytes: number, ms: number): Promise<boolean> {
  if (raw.readableEnded) return Promise.resolve(true);
  if (raw.destroyed) return Promise.resolve(false);
  const length = Number(raw.headers['content-length']);
  if (Number.isFinite(length) && length > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (drained: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData).off('end', onEnd).off('close', onClose);
      if (!drained) raw.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer) => { seen += chunk.length; if (seen > maxBytes) finish(false); };
    const onEnd = () => finish(true);
    const onClose = () => finish(raw.readableEnded);
    const timer = setTimeout(() => finish(false), ms);
    // A form parser may still be piped (a refusal between parts): it would stop reading.
    raw.unpipe();
    raw.on('data', onData).once('end', onEnd).once('close', onClose);
    raw.resume();
  });
}
