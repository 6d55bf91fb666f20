// The sbxd nodes sharing this store (admin; docs/scale-out.md): live or unreachable, how
// full, what they run. One node with SQLite is a cluster of one.
import { api } from './api.js';
import { h, attempt, whenMs } from './ui.js';

export async function nodesPage(root) {
  const list = await attempt(() => api('GET', '/v1/nodes'));
  if (!list) { root.replaceChildren(h('h1', {}, 'Nodes')); return; }
  root.replaceChildren(h('h1', {}, 'Nodes'),
    h('table', { id: 'nodes' }, h('thead', {}, h('tr', {},
      ['Node', 'URL', 'State', 'Sandboxes', 'Capacity', 'Heartbeat', 'Backends', 'Templates', 'Started']
        .map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, list.data.map((n) => h('tr', { 'data-id': n.id },
      h('td', { class: 'mono' }, n.id, n.self ? h('span', { class: 'muted' }, ' (this one)') : ''),
      h('td', { class: 'mono' }, n.url), h('td', { class: n.state === 'live' ? 'status-running' : 'status-failed' }, n.state),
      h('td', {}, `${n.running}`), h('td', {}, `${n.capacity} (${n.free ?? ''} free)`),
      h('td', { class: 'nowrap' }, n.heartbeat_age_ms !== undefined ? `${(n.heartbeat_age_ms / 1000).toFixed(1)} s ago` : ''),
      h('td', {}, (n.backends || []).join(', ')), h('td', { class: 'details' }, (n.templates || []).join(', ')),
      h('td', { class: 'nowrap' }, n.started_at_ms ? whenMs(n.started_at_ms) : ''))))));
}
