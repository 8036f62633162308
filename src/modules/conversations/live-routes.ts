// GET /api/v2/conversations/live (extension): the live feed of conversations in progress and their
// lines, as Server-Sent Events (live.ts). docs/conversations.md, "Live feed".
import type { OutgoingHttpHeaders } from 'node:http';
import { Type } from '@sinclair/typebox';
import { readToken } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import { AccountId, errors, Security } from '../../http/schemas.ts';
import { LIVE_SNAPSHOT_CONVERSATIONS, LIVE_SNAPSHOT_LINES, type LiveFeed } from './live.ts';

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
        + `newest first, at most ${LIVE_SNAPSHOT_CONVERSATIONS}, each with its last ${LIVE_SNAPSHOT_LINES} lines (messages). Then \`conversation\` `
        + '(one started or changed: who answered, its end; no messages) and `message` {conversationId, roomId, accountId, message} '
        + '(one transcript line as it is stored, shaped as the lines of GET /api/v2/conversation/{roomId}/{uuid}; a uuid seen before replaces that line), '
        + 'a `: ping` comment every 15 s, and `closed` {message} when the server ends the stream (token deleted or expired, account suspended, shutdown). '
        + 'Another `snapshot` may come at any time: draw from it afresh. 429 past 5 open streams per token (CALLPLANE_LIVE_STREAMS_PER_TOKEN) '
        + 'or the server\'s cap (CALLPLANE_LIVE_STREAMS_MAX). docs/conversations.md, "Live feed".',
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
      // An EventSource that lost the stream connects again after 3 s (and gets a fresh snapshot).
      res.write('retry: 3000\n\n');
      res.on('close', gone);
      res.on('error', gone);
      // Gone already, while the stream was being admitted: no 'close' is coming.
      if (res.destroyed || !res.socket || res.socket.destroyed) queueMicrotask(gone);
      return {
        write: (text) => void res.write(text),
        buffered: () => res.writableLength,
        end: () => res.end(),
        destroy: () => res.destroy(),
      };
    });
  });
}
