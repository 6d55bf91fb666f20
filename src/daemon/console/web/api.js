// Every call of the console goes through sbx's public API with the key the user signed in
// with. The key lives in this tab's sessionStorage only: never in a URL, a cookie or
// localStorage, so closing the tab forgets it.
const KEY = 'sbx.console.key';

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

// An API error as the API gave it: its code, message, HTTP status and request id.
export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${key.get()}`, ...extra };
}

async function failure(r) {
  let code = `http_${r.status}`;
  let message = r.statusText;
  try {
    const body = await r.json();
    if (body?.error) ({ code, message } = body.error);
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(r.status, code, message, r.headers.get('x-request-id'));
}

// JSON in, JSON out; throws ApiError on any status but 2xx.
export async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  return r.status === 204 ? null : r.json();
}

// A streamed route (exec, a process's logs, an install's or a build's events): each `data:`
// frame's JSON is handed to onEvent as it arrives. A POST with body, a GET without. Resolves
// with the HTTP status when the stream ends (204: nothing to stream yet).
export async function stream(path, body, onEvent, signal) {
  const post = body !== undefined;
  const r = await fetch(path, {
    method: post ? 'POST' : 'GET',
    headers: headers(post ? { 'Content-Type': 'application/json', Accept: 'text/event-stream' }
                          : { Accept: 'text/event-stream' }),
    body: post ? JSON.stringify(body) : undefined,
    signal,
  });
  if (!r.ok) throw await failure(r);
  if (r.status === 204 || !r.body) return r.status;
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = frame.split('\n').filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart()).join('\n');
      if (data) onEvent(JSON.parse(data));
    }
  }
  return r.status;
}

// A raw upload with progress (fetch cannot report an upload's progress; XHR can): a file's
// bytes PUT (the default), or a skill bundle POSTed as application/zip.
export function upload(path, file, onProgress, { method = 'PUT', type = 'application/octet-stream' } = {}) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, path);
    x.setRequestHeader('Authorization', `Bearer ${key.get()}`);
    x.setRequestHeader('Content-Type', type);
    x.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded, e.total);
    x.onerror = () => reject(new ApiError(0, 'network_error', 'the upload did not reach sbxd', null));
    x.onload = () => {
      const id = x.getResponseHeader('x-request-id');
      let body = null;
      try { body = JSON.parse(x.responseText); } catch { /* keep null */ }
      if (x.status >= 200 && x.status < 300) resolve(body);
      else reject(new ApiError(x.status, body?.error?.code || `http_${x.status}`,
                               body?.error?.message || x.statusText, id));
    };
    x.send(file);
  });
}

// Bytes of a GET as a Blob (downloads carry the key in a header, so no plain link).
export async function blob(path) {
  const r = await fetch(path, { headers: headers() });
  if (!r.ok) throw await failure(r);
  return r.blob();
}

export const enc = encodeURIComponent;
// A workspace path as the files route takes it: each segment escaped, slashes kept.
export const encPath = (p) => p.split('/').filter(Boolean).map(enc).join('/');
