// On a configuration's page (docs/configs.md): the sandboxes made from it, of every user
// (GET /v1/sandbox-configs/{id}/sandboxes, admins), and the templates query
// (POST /v1/sandbox-configs/templates/query, an admin's full-access key): which templates its
// backend can start here, its own, and whether the standard and desktop ones are built. The
// query is asked without ensure_*/replace_*, so it builds and changes nothing.
import { api, enc } from './api.js';
import { h, attempt, when } from './ui.js';

export function inventorySection(box, c) {
  const body = h('tbody');
  const note = h('span', { class: 'muted' });
  const load = async () => {
    const r = await attempt(() => api('GET', `/v1/sandbox-configs/${enc(c.id)}/sandboxes`));
    if (!r) return;
    note.textContent = r.verified ? '' : ' · not verified: the store holds sandboxes this daemon does not';
    body.replaceChildren(...(r.data.length ? r.data.map((s) => h('tr', { 'data-id': s.id },
      h('td', { class: 'mono' }, h('a', { href: `#/sandbox/${s.id}` }, s.id)), h('td', {}, s.user),
      h('td', { class: `status-${s.status}` }, s.status),
      h('td', {}, s.busy ? `busy: ${(s.busy_with || []).join(', ')}` : 'idle'),
      h('td', { class: 'nowrap' }, when(s.created_at))))
      : [h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No live or paused sandbox made from it.'))]));
  };
  box.replaceChildren(h('h2', {}, 'Sandboxes made from it'),
    h('div', { class: 'row' }, h('button', { type: 'button', onclick: load }, 'Refresh sandboxes'), note),
    h('table', { id: 'config-sandboxes' }, h('thead', {}, h('tr', {},
      ['Sandbox', 'User', 'Status', 'Busy', 'Created'].map((x) => h('th', { scope: 'col' }, x)))), body));
  load();
}

export function templatesSection(box, c, admin) {
  const out = h('div', { id: 'cfg-templates', 'aria-live': 'polite' });
  const query = async () => {
    const r = await attempt(() => api('POST', '/v1/sandbox-configs/templates/query', { config_id: c.id }));
    if (!r) return;
    const built = (t) => `${t.name}: ${t.built ? 'built' : 'not built'}`;
    out.replaceChildren(h('p', {}, `Backend ${r.backend} · its template `, h('strong', { class: 'mono' }, r.template),
      ` · ${built(r.standard)} · ${built(r.desktop)}`),
    h('ul', { id: 'cfg-template-list', class: 'mono' }, r.templates.map((t) => {
      const name = typeof t === 'string' ? t : t.name;
      return h('li', { 'data-name': name }, name, name === r.template ? h('span', { class: 'muted' }, ' (this configuration\'s)') : '');
    })));
  };
  box.replaceChildren(h('h2', {}, 'Templates'),
    admin ? h('div', { class: 'row' }, h('button', { type: 'button', onclick: query }, 'Query templates'),
      h('span', { class: 'muted' }, 'What its backend can start here; nothing is built or changed.'))
      : h('p', { class: 'muted' }, 'The templates query needs an admin\'s full-access key.'),
    out);
}
