import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import { SbxError, SbxStreamError } from './errors.js';

/** Accepted by every call. */
export interface CallOptions {
  /** Sent as Idempotency-Key: the same key and request within 24 h replays the saved answer. */
  idempotencyKey?: string;
  /** Abort the call (the whole stream, for streaming calls) after this many milliseconds. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** Default: the env SBX_URL, else http://127.0.0.1:8787. */
  baseUrl?: string;
  /** Default: the env SBX_API_KEY. */
  apiKey?: string;
  /** Default timeout of every call, in milliseconds (none when unset). */
  timeoutMs?: number;
  /** Retries of a 503 `sandbox_capacity` (the only answer the API says to retry). Default 3. */
  maxRetries?: number;
  /** First backoff in milliseconds, doubled on each retry (plus jitter). Default 500. */
  retryBaseMs?: number;
  fetch?: typeof fetch;
}

/** What a request can carry as its raw body (streams go through Transport.upload). */
export type RawBody = string | Uint8Array | ArrayBuffer | Blob;

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface HttpRequest {
  method: string;
  path: string;
  query?: Query;
  json?: unknown;
  /** A raw body held in memory (small uploads). */
  body?: RawBody;
  contentType?: string;
  accept?: string;
}

export interface StreamSpec {
  /** Event types that end the stream normally. */
  last: ReadonlySet<string>;
  /** What a drop should name (sandbox id; the exec id comes from the `start` event). */
  sandboxId?: string;
}

const RETRY_MAX_MS = 8000;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function errorOf(status: number, statusText: string, text: string,
                 requestId: string | null): SbxError {
  let code = `http_${status}`;
  let message = statusText || code;
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (body?.error?.code) code = body.error.code;
    if (body?.error?.message) message = body.error.message;
  } catch {
    /* not JSON: keep the status line */
  }
  return new SbxError(status, code, message, requestId);
}

async function errorFrom(res: Response): Promise<SbxError> {
  return errorOf(res.status, res.statusText, await res.text().catch(() => ''),
                 res.headers.get('x-request-id'));
}

export class Transport {
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  private readonly timeoutMs: number | undefined;
  private readonly maxRetries: number;
  private readonly retryBaseMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions = {}) {
    const env = typeof process !== 'undefined' ? process.env : {};
    this.baseUrl = (opts.baseUrl ?? env.SBX_URL ?? 'http://127.0.0.1:8787').replace(/\/+$/, '');
    this.apiKey = opts.apiKey ?? env.SBX_API_KEY;
    this.timeoutMs = opts.timeoutMs;
    this.maxRetries = opts.maxRetries ?? 3;
    this.retryBaseMs = opts.retryBaseMs ?? 500;
    this.fetchImpl = opts.fetch ?? globalThis.fetch;
  }

  url(path: string, query?: Query): string {
    let u = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query))
        if (v !== undefined && v !== null) q.set(k, String(v));
      const s = q.toString();
      if (s) u += '?' + s;
    }
    return u;
  }

  /** The call's signal: the caller's, and the timeout's. */
  private signalFor(opts: CallOptions): { signal?: AbortSignal; timeout?: AbortSignal } {
    const ms = opts.timeoutMs ?? this.timeoutMs;
    const timeout = ms !== undefined ? AbortSignal.timeout(ms) : undefined;
    const parts = [opts.signal, timeout].filter((s): s is AbortSignal => !!s);
    if (parts.length === 0) return {};
    return { signal: parts.length === 1 ? parts[0] : AbortSignal.any(parts), timeout };
  }

  /** Streams source as the body of one request (uploads) through node:http, whose socket
   * writes wait for the peer: fetch in Node 20 reads a stream body ahead of the socket, so a
   * large file would end up in memory. With size, it goes as Content-Length (sbxd can refuse
   * an oversized file before reading it), else chunked. Never retried. */
  async upload<T>(method: string, path: string, source: AsyncIterable<Uint8Array>,
                  size: number | undefined, opts: CallOptions = {}): Promise<T> {
    const { signal, timeout } = this.signalFor(opts);
    const u = new URL(this.url(path));
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    if (this.apiKey) headers['authorization'] = `Bearer ${this.apiKey}`;
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    if (size !== undefined) headers['content-length'] = String(size);
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<T>((resolve, reject) => {
      const req = send(u, { method, headers, signal });
      req.on('response', (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => reject(this.abortError(e, timeout, opts)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const rid = res.headers['x-request-id'];
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            try {
              resolve(JSON.parse(text) as T);
            } catch (e) {
              reject(e);
            }
          } else {
            reject(errorOf(status, res.statusMessage ?? '', text,
                           typeof rid === 'string' ? rid : null));
          }
        });
      });
      // A failure of the source or the socket destroys req, which reports it here; an early
      // answer (413, 507) arrives as the response even though the body was cut short.
      req.on('error', (e) => reject(this.abortError(e, timeout, opts)));
      pipeline(Readable.from(source), req).catch(() => undefined);
    });
  }

  /** Sends the request; answers the Response of a 2xx, throws SbxError otherwise. Retries
   * only 503 sandbox_capacity, with exponential backoff. */
  async send(req: HttpRequest, opts: CallOptions = {}): Promise<Response> {
    const { signal, timeout } = this.signalFor(opts);
    const headers: Record<string, string> = {};
    if (this.apiKey) headers['authorization'] = `Bearer ${this.apiKey}`;
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    if (req.accept) headers['accept'] = req.accept;
    let body: RawBody | undefined = req.body;
    if (req.json !== undefined) {
      body = JSON.stringify(req.json);
      headers['content-type'] = 'application/json';
    } else if (req.contentType) {
      headers['content-type'] = req.contentType;
    }
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.fetchImpl(this.url(req.path, req.query), {
          method: req.method,
          headers,
          body,
          signal,
        });
      } catch (e) {
        throw this.abortError(e, timeout, opts);
      }
      if (res.ok) return res;
      const err = await errorFrom(res);
      const retry = err.status === 503 && err.code === 'sandbox_capacity' &&
        attempt < this.maxRetries;
      if (!retry) throw err;
      const backoff = Math.min(RETRY_MAX_MS, this.retryBaseMs * 2 ** attempt);
      await sleep(backoff / 2 + Math.random() * (backoff / 2), signal);
    }
  }

  private abortError(e: unknown, timeout: AbortSignal | undefined, opts: CallOptions): unknown {
    if (timeout?.aborted && !opts.signal?.aborted)
      return new SbxError(0, 'timeout', `no answer within ${opts.timeoutMs ?? this.timeoutMs} ms`,
                          null);
    return e;
  }

  async json<T>(req: HttpRequest, opts?: CallOptions): Promise<T> {
    const res = await this.send(req, opts);
    return (await res.json()) as T;
  }

  /** A text/event-stream answer as its JSON events, each yielded as it arrives. An answer
   * that ends before one of spec.last raises SbxStreamError with the exec id. */
  async *events<E extends { type: string }>(req: HttpRequest, spec: StreamSpec,
                                            opts: CallOptions = {}): AsyncGenerator<E> {
    const res = await this.send({ ...req, accept: 'text/event-stream' }, opts);
    const requestId = res.headers.get('x-request-id');
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      // A replayed idempotent answer or a route that chose not to stream: one final object.
      yield (await res.json()) as E;
      return;
    }
    let execId: string | null = null;
    let sandboxId = spec.sandboxId ?? null;
    const dropped = (cause?: unknown) =>
      new SbxStreamError(
        `the event stream ended before its last event${execId ? ` (exec ${execId})` : ''}`,
        execId, sandboxId, requestId, cause);
    const decoder = new TextDecoder();
    let buf = '';
    let data: string[] = [];
    const body = res.body;
    if (!body) throw dropped();
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line.startsWith('data:')) {
            data.push(line.slice(line[5] === ' ' ? 6 : 5));
            continue;
          }
          if (line !== '' || data.length === 0) continue;
          const ev = JSON.parse(data.join('\n')) as E & { exec_id?: string; sandbox_id?: string };
          data = [];
          if (ev.type === 'start') {
            execId = ev.exec_id ?? execId;
            sandboxId = ev.sandbox_id ?? sandboxId;
          }
          yield ev;
          if (spec.last.has(ev.type)) return;
        }
      }
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      if ((e as { name?: string })?.name === 'TimeoutError')
        throw new SbxError(0, 'timeout', `stream not finished within ${opts.timeoutMs ?? this.timeoutMs} ms`,
                           requestId);
      throw dropped(e);
    }
    throw dropped();
  }
}
