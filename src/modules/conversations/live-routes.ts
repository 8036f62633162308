// GET /api/v2/conversations/live (extension): the live feed of conversations in progress and their
// lines, as Server-Sent Events (live.ts). docs/conversations.md, "Live feed".
import type { OutgoingHttpHeaders } from 'node:http';
import { Type } from '@sinclair/typebox';
import { readToken } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import { AccountId, errors, Security } from '../../http/schemas.ts';
import { LIVE_SNAPSHOT_BYTES, LIVE_SNAPSHOT_CONVERSATIONS, LIVE_SNAPSHOT_LINES, LIVE_SNAPSHOT_TOTAL_LINES, type LiveFeed } from './live.ts';

export async function liveRoutes(app: App, { live }: { live: LiveFeed }): Promise<void> {
  // Open streams end before the server closes (it waits for every connection), so `serve` stops promptly.
  app.addHook('preClose', (done) => {
    live.closeStreams();
    done();
  });

  app.get('/api/v2/conversations/live', {
    schema: {
      operationId: 'liveConversations', tags: ['Messaging'], security: Security,
      summary: 'Follow conversations in progress and their transcripts as they are spoken (callplane extension)',
      description: 'A text/event-stream (Server-Sent Events). First `snapshot` {calls}: the conversations in progress below the account, '
        + `newest first, at most ${LIVE_SNAPSHOT_CONVERSATIONS}, each with its last ${LIVE_SNAPSHOT_LINES} lines (messages), at most ${LIVE_SNAPSHOT_TOTAL_LINES} lines `
        + `and ${LIVE_SNAPSHOT_BYTES} bytes in all (\`truncated\` {string} says what was cut). Then \`conversation\` `
        + '(one started or changed: who answered, its end; no messages) and `message` {conversationId, roomId, accountId, message} '
        + '(one transcript line as it is stored, shaped as the lines of GET /api/v2/conversation/{roomId}/{uuid}; a uuid seen before replaces that line), '
        + 'a `: ping` comment every 15 s, and `closed` {message} when the server ends the stream (token deleted or expired, session signed out, '
        + 'account suspended, shutdown). Every event has an id: reconnecting with the Last-Event-ID header (an EventSource does it by itself) '
        + 'resumes with `resumed` {lastEventId, replayed} and the events missed, when this server still holds them (5 minutes, 2000 events); '
        + 'otherwise a new `snapshot` comes with `resumeFailed` {string}. Another `snapshot` may come at any time: draw from it afresh. '
        + '429 (naming the cap) past 5 open streams per token (CALLPLANE_LIVE_STREAMS_PER_TOKEN), 20 per account, 50 per organization, '
        + '200 per reseller (…_PER_ACCOUNT, …_PER_ORGANIZATION, …_PER_RESELLER), the server\'s cap (CALLPLANE_LIVE_STREAMS_MAX), '
        + 'or past 30 stream starts a minute per account (CALLPLANE_LIVE_STARTS_PER_MINUTE; Retry-After). docs/conversations.md, "Live feed".',
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('An organization or agent (or reseller) below the token\'s account to follow; default: everything below the token\'s account')),
      }),
      response: {
        200: {
          description: 'Server-Sent Events: snapshot, conversation, message and closed (docs/conversations.md, "Live feed")',
          content: { 'text/event-stream': { schema: Type.String() } },
        },
        ...errors(403, 404, 429, 503),
      },
    },
  }, async (req, reply) => {
    // The route was authenticated with this token: the feed checks it again while the stream lasts.
    const token = readToken(req)!;
    const lastEventId = req.headers['last-event-id'];
    await live.start(req.scope, token, req.query.targetAccountId, (gone) => {
      void reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        // What the hooks set (x-request-id, the rate limits' headers).
        ...reply.getHeaders() as OutgoingHttpHeaders,
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        // nginx would otherwise hold events back in its buffer.
        'x-accel-buffering': 'no',
      });
      // An EventSource that lost the stream connects again after 3 s, with Last-Event-ID (and resumes).
      res.write('retry: 3000\n\n');
      res.on('close', gone);
      res.on('error', gone);
      // Gone already, while the stream was being admitted: no 'close' is coming.
      if (res.destroyed || !res.socket || res.socket.destroyed) queueMicrotask(gone);
      return {
        write: (text) => res.write(text),
        buffered: () => res.writableLength,
        drained: () => new Promise<void>((resolve) => {
          if (res.writableLength === 0 || res.destroyed) return resolve();
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        }),
        end: () => res.end(),
        destroy: () => res.destroy(),
      };
    }, typeof lastEventId === 'string' && lastEventId !== '' ? lastEventId : undefined);
  });
}
