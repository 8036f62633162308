// The errors Fastify and Node answer themselves, before a route's error handler can see them,
// in our one envelope `{success: false, message, requestId}`: a URL the router cannot decode or
// whose path parameter is too long (Fastify's frameworkErrors), and a request Node's HTTP parser
// refuses (malformed request line or headers, headers too large, a request that never finished
// arriving: the server's clientError).
import crypto from 'node:crypto';
import http from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** Fastify's default `maxParamLength`: a path parameter longer than this is a 414. */
export const MAX_PARAM_LENGTH = 100;

/** Fastify's `frameworkErrors`: errors raised while routing, before any hook runs. */
export function frameworkErrorReply(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  let status: number;
  let message: string;
  switch (err.code) {
    case 'FST_ERR_MAX_PARAM_LENGTH':
      status = 414;
      message = `A path parameter is longer than ${MAX_PARAM_LENGTH} characters`;
      break;
    case 'FST_ERR_BAD_URL':
      status = 400;
      message = 'The URL path is not valid percent-encoding';
      break;
    default:
      // FST_ERR_ASYNC_CONSTRAINT (no route of ours has an asynchronous constraint).
      req.log.error({ err }, 'routing error');
      status = 500;
      message = 'Internal server error';
  }
  // The onRequest hook that sets it does not run for these.
  void reply.header('x-request-id', req.id).status(status).send({ success: false, message, requestId: req.id });
}

/** What Node's HTTP parser refused, by its error code. */
function clientErrorAnswer(code: string | undefined): { status: number; message: string } {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: 'The request did not arrive in time' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, message: 'The request headers are too large' };
    case 'HPE_INVALID_METHOD':
      return { status: 400, message: 'The request method is not a valid HTTP method' };
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return { status: 400, message: 'The Content-Length header is invalid' };
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return { status: 400, message: 'The chunked request body is malformed' };
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_LF_EXPECTED':
    case 'HPE_CR_EXPECTED':
      return { status: 400, message: 'A request header is malformed' };
    case 'HPE_INVALID_URL':
      return { status: 400, message: 'The request URL is malformed' };
    default:
      return { status: 400, message: 'The request is not valid HTTP' };
  }
}

/**
 * The server's `clientError`: Node could not read the request, so there is no request object;
 * the answer is written to the socket, which is then closed (what follows on it cannot be read).
 */
export function clientErrorReply(err: Error & { code?: string }, socket: Socket): void {
  // A reset connection has no one to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const { status, message } = clientErrorAnswer(err.code);
    const requestId = crypto.randomUUID();
    const body = JSON.stringify({ success: false, message, requestId });
    socket.write(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n`
      + `Content-Length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}
