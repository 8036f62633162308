// Typed errors thrown by services; the error handler turns each into one JSON body shape.
export class HttpError extends Error {
  constructor(readonly statusCode: number, message: string, readonly extra: Record<string, unknown> = {}) {
    super(message);
  }
}
export class Invalid extends HttpError {
  constructor(message: string, extra?: Record<string, unknown>) { super(400, message, extra); }
}
export class Unauthorized extends HttpError {
  constructor(message = 'Unauthorized: a valid token is required') { super(401, message); }
}
export class Forbidden extends HttpError {
  constructor(message: string) { super(403, message); }
}
export class NotFound extends HttpError {
  constructor(message: string) { super(404, message); }
}
export class Conflict extends HttpError {
  constructor(message: string) { super(409, message); }
}
export class TooManyRequests extends HttpError {
  /** Sent as the Retry-After header (whole seconds, at least 1) and as `retryAfter` in the body. */
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterMs: number) {
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    super(429, message, { retryAfter: seconds });
    this.retryAfterSeconds = seconds;
  }
}
/** Something we depend on (a language model) failed; the message is ours, never the upstream's. */
export class BadGateway extends HttpError {
  constructor(message: string) { super(502, message); }
}
