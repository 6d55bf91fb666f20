/** Volumes (docs/volumes.md): named storage that outlives sandboxes and is shared between
 * them. Mount at create: `sandboxes.create({ volumes: [{ volume: 'data', path: '/data' }] })`. */
import type { CallOptions, Transport } from './http.js';
import { Files, seg, wpath } from './sandboxes.js';
import type { List, Volume, VolumeEntry } from './types.js';

/** A volume's files without a sandbox: the workspace's file calls, plus stat and mkdir. A
 * full volume is 507 `volume_full`. */
export class VolumeFiles extends Files {
  constructor(t: Transport) {
    super(t, (id) => `/v1/volumes/${seg(id)}`);
  }

  stat(id: string, path = '', opts?: CallOptions): Promise<VolumeEntry> {
    if (path) wpath(path); // the same refusal of . and .. as every other call
    return this.t.json({ method: 'GET', path: `${this.base(id)}/stat`, query: { path } }, opts);
  }

  mkdir(id: string, path: string,
        opts?: CallOptions): Promise<{ object: 'file'; path: string; type: 'directory';
                                       created: boolean }> {
    return this.t.json({ method: 'POST', path: `${this.base(id)}/directories`,
                         json: { path } }, opts);
  }
}

export class Volumes {
  readonly files: VolumeFiles;

  constructor(private readonly t: Transport) {
    this.files = new VolumeFiles(t);
  }

  create(body: { name: string; size_mb?: number }, opts?: CallOptions): Promise<Volume> {
    return this.t.json({ method: 'POST', path: '/v1/volumes', json: body }, opts);
  }

  list(opts?: CallOptions): Promise<List<Volume>> {
    return this.t.json({ method: 'GET', path: '/v1/volumes' }, opts);
  }

  /** By id or by name. */
  get(id: string, opts?: CallOptions): Promise<Volume> {
    return this.t.json({ method: 'GET', path: `/v1/volumes/${seg(id)}` }, opts);
  }

  /** 409 `volume_in_use` while a live sandbox mounts it. */
  delete(id: string, opts?: CallOptions): Promise<{ id: string; object: 'volume'; deleted: true }> {
    return this.t.json({ method: 'DELETE', path: `/v1/volumes/${seg(id)}` }, opts);
  }
}
