// A sandbox's artifacts: every file under /workspace/out, hashed and scanned by sbxd when
// the tab opens, with its MIME type, SHA-256, scan verdict and, for a clean one, its
// signed link (which needs no key, so it may be opened or shared as it is).
import { api } from './api.js';
import { h, attempt, bytes, when } from './ui.js';

export async function artifactsTab(box, id) {
  box.replaceChildren(h('p', { class: 'muted' }, 'Collecting and scanning /workspace/out…'));
  const list = await attempt(() => api('GET', `/v1/sandboxes/${id}/artifacts`));
  if (!list) { box.replaceChildren(); return; }
  const rows = list.data.map((a) => h('tr', { 'data-path': a.path },
    h('td', { class: 'mono' }, a.path), h('td', {}, bytes(a.size)), h('td', {}, a.mime || ''),
    h('td', { class: 'mono', title: a.sha256 }, `${a.sha256.slice(0, 16)}…`),
    h('td', { class: `scan-${a.scan}` }, a.scan === 'infected' ? `infected: ${a.virus}` : a.scan === 'error' ? `error: ${a.scan_error}` : a.scan),
    h('td', {}, a.url ? h('a', { href: a.url, target: '_blank', rel: 'noopener noreferrer' }, 'link') : ''),
    h('td', { class: 'nowrap' }, a.expires_at ? `until ${when(a.expires_at)}` : '')));
  box.replaceChildren(
    h('p', { class: 'muted' }, 'Files a command writes under /workspace/out. A link works without a key until it expires.'),
    h('table', { id: 'artifacts' }, h('thead', {}, h('tr', {},
      ['Path', 'Size', 'MIME', 'SHA-256', 'Scan', 'Link', 'Expires'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No artifacts: nothing under /workspace/out.')))));
}
