/** The sbx client: `new Sbx({ baseUrl, apiKey })` (or the env SBX_URL / SBX_API_KEY). */
import { type CallOptions, type ClientOptions, Transport } from './http.js';
import { Sandboxes } from './sandboxes.js';
import { Volumes } from './volumes.js';
import type { AuditPage, AuditQuery, Deleted, Key, KeyCreated, List } from './types.js';

export { SbxError, SbxStreamError } from './errors.js';
export type { CallOptions, ClientOptions } from './http.js';
export type { FileContent } from './sandboxes.js';
export { Terminal, type TerminalMessage } from './terminal.js';
export { VolumeFiles, Volumes } from './volumes.js';
export type * from './types.js';

export class Audit {
  constructor(private readonly t: Transport) {}

  /** One page of the audit log (admins see everyone, members their own). */
  list(query: AuditQuery = {}, opts?: CallOptions): Promise<AuditPage> {
    return this.t.json({ method: 'GET', path: '/v1/audit', query: { ...query } }, opts);
  }

  /** Walks the hash chain (admin). */
  verify(opts?: CallOptions): Promise<{ ok: boolean; checked?: number; first_bad_seq?: number;
                                       reason?: string }> {
    return this.t.json({ method: 'GET', path: '/v1/audit/verify' }, opts);
  }
}

export class Keys {
  constructor(private readonly t: Transport) {}

  create(body: { user: string; role?: 'admin' | 'member';
                 tool_level?: 'none' | 'basic' | 'sandbox' },
         opts?: CallOptions): Promise<KeyCreated> {
    return this.t.json({ method: 'POST', path: '/v1/keys', json: body }, opts);
  }

  list(opts?: CallOptions): Promise<List<Key>> {
    return this.t.json({ method: 'GET', path: '/v1/keys' }, opts);
  }

  delete(id: string, opts?: CallOptions): Promise<Deleted> {
    return this.t.json({ method: 'DELETE', path: `/v1/keys/${encodeURIComponent(id)}` }, opts);
  }
}

export class Sbx {
  readonly sandboxes: Sandboxes;
  readonly audit: Audit;
  readonly keys: Keys;
  readonly volumes: Volumes;
  private readonly transport: Transport;

  constructor(opts: ClientOptions = {}) {
    this.transport = new Transport(opts);
    this.sandboxes = new Sandboxes(this.transport);
    this.audit = new Audit(this.transport);
    this.keys = new Keys(this.transport);
    this.volumes = new Volumes(this.transport);
  }

  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  health(opts?: CallOptions): Promise<{ status: 'ok' }> {
    return this.transport.json({ method: 'GET', path: '/healthz' }, opts);
  }

  /** The OpenAPI 3.1 description sbxd serves. */
  openapi(opts?: CallOptions): Promise<Record<string, unknown>> {
    return this.transport.json({ method: 'GET', path: '/openapi.json' }, opts);
  }
}

export default Sbx;
