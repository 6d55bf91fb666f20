// Templates (read-only): what each built template holds, its size and its warm pool.
// Building one, and its build's live log, are not in the console yet (docs/console.md).
import { api } from './api.js';
import { h, attempt, when, bytes } from './ui.js';

export async function templatesPage(root) {
  const list = await attempt(() => api('GET', '/v1/templates'));
  const rows = (list?.data || []).map((t) => h('tr', { 'data-name': t.name },
    h('td', { class: 'mono' }, t.name), h('td', {}, t.from || ''),
    h('td', {}, t.custom ? `custom (${t.owner}${t.public ? ', public' : ''})` : 'operator'),
    h('td', { class: 'nowrap' }, when(t.created_at)), h('td', {}, bytes(t.size_bytes)),
    h('td', {}, `${t.contains.packages.length} Debian packages` +
      (t.contains.node ? `, node ${t.contains.node}` : '') +
      (t.contains.npm.length ? `, ${t.contains.npm.length} npm` : '')),
    h('td', {}, t.pool_size ? `${t.pool.ready}/${t.pool.size} ready` : 'none'),
    h('td', {}, t.warm_snapshot),
    h('td', { class: 'mono details' }, (t.digest || '').slice(0, 23))));
  root.replaceChildren(h('h1', {}, 'Templates'),
    h('table', { id: 'templates' }, h('thead', {}, h('tr', {},
      ['Name', 'Built on', 'Kind', 'Built', 'Size', 'Contains', 'Warm pool', 'Warm snapshot', 'Digest']
        .map((x) => h('th', { scope: 'col' }, x)))), h('tbody', {}, rows)));
}
