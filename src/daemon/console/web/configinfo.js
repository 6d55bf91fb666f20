// On a configuration's page (docs/configs.md): the sandboxes made from it, of every user
// (GET /v1/sandbox-configs/{id}/sandboxes, admins), and the templates query
// (POST /v1/sandbox-configs/templates/query, an admin's full-access key): which templates its
// backend can start here, its own, and whether the standard and desktop ones are built; asked
// with ensure_* it builds one that is not (202: the build followed live as any template
// build's), with replace_* it makes one the configuration's template (once it is built).
import { api, enc } from './api.js';
import { h, attempt, when } from './ui.js';
import { followBuild } from './templates.js';

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

// show(c): the page's view of the configuration, after a replace changed its template.
export function templatesSection(box, c, admin, ctx, show) {
  const out = h('div', { id: 'cfg-templates', 'aria-live': 'polite' });
  const building = h('section', { id: 'cfg-template-build' });
  const ensureStd = h('input', { id: 'tq-ensure-standard', type: 'checkbox' });
  const ensureDesk = h('input', { id: 'tq-ensure-desktop', type: 'checkbox' });
  const replace = h('select', { id: 'tq-replace' }, h('option', { value: '' }, 'no change'),
    h('option', { value: 'standard' }, 'the standard one (base)'), h('option', { value: 'desktop' }, 'the desktop one'));
  let follow = null;
  ctx.keep(box, () => follow?.abort());
  const query = async (flags) => {
    const r = await attempt(() => api('POST', '/v1/sandbox-configs/templates/query', { config_id: c.id, ...flags }));
    if (!r) return;
    const built = (t) => `${t.name}: ${t.built ? 'built' : t.build ? 'building' : 'not built'}`;
    const changed = r.replaced ? `its template is now ${r.sandbox_config?.config?.template || r.replaced}`
      : r.replacing ? `it becomes its template once built (${r.replacing})` : '';
    out.replaceChildren(h('p', {}, `Backend ${r.backend} · its template `, h('strong', { class: 'mono' }, r.template),
      ` · ${built(r.standard)} · ${built(r.desktop)}`),
    changed ? h('p', { id: 'cfg-template-replaced', class: 'status-running' }, changed) : '',
    h('ul', { id: 'cfg-template-list', class: 'mono' }, r.templates.map((t) => {
      const name = typeof t === 'string' ? t : t.name;
      return h('li', { 'data-name': name }, name, name === r.template ? h('span', { class: 'muted' }, ' (this configuration\'s)') : '');
    })));
    if (r.sandbox_config) show(r.sandbox_config);
    // 202: a template asked for is being built; its log followed to the end, then asked again.
    const b = r.standard.build || r.desktop.build;
    if (!b) return;
    follow?.abort();
    const mine = new AbortController();
    follow = mine;
    await followBuild(building, b.name, undefined, mine.signal);
    if (follow === mine) query({});
  };
  const form = admin && h('form', { class: 'row', 'aria-label': 'Query the templates', onsubmit: (e) => {
    e.preventDefault();
    const flags = {};
    if (ensureStd.checked) flags.ensure_standard = true;
    if (ensureDesk.checked) flags.ensure_desktop = true;
    if (replace.value) flags[`replace_${replace.value}`] = true;
    query(flags);
  } },
  h('label', { class: 'inline', for: 'tq-ensure-standard' }, ensureStd, 'Build base if it is not'),
  h('label', { class: 'inline', for: 'tq-ensure-desktop' }, ensureDesk, 'Build desktop if it is not'),
  h('label', { for: 'tq-replace' }, 'Make its template', replace),
  h('button', { type: 'submit' }, 'Query templates'));
  box.replaceChildren(h('h2', {}, 'Templates'),
    ...(admin ? [form, h('p', { class: 'muted' }, 'What its backend can start here. Unticked and with no change, nothing is built or changed; a template is set only once it is built, and not while sandboxes made from the configuration live.')]
      : [h('p', { class: 'muted' }, 'The templates query needs an admin\'s full-access key.')]),
    out, building);
}
