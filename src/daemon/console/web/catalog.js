// The skill catalog (docs/skills.md, spec 002's "Каталог навыков"): every entry with its
// version, source, declared variables and where it is installed; an admin with a full-access
// key adds a bundle (zip or tar with a SKILL.md, with an upload bar), installs an entry into
// a configuration (its progress is on the configuration's page) or deletes one (refused with
// skill_in_use while it is installed). Any key reads it.
import { api, upload, enc } from './api.js';
import { h, attempt, showError, when } from './ui.js';

export async function catalogPage(root, ctx) {
  const admin = ctx.can.admin() && ctx.me.scope === 'full_access';
  const tbody = h('tbody');
  const configs = new Map();
  const target = h('select', { id: 'catalog-config' });
  const load = async () => {
    const list = await attempt(() => api('GET', '/v1/skills/catalog'));
    if (!list) return;
    tbody.replaceChildren(...list.data.map((s) => h('tr', { 'data-name': s.name },
      h('td', { class: 'mono' }, s.name), h('td', {}, s.version),
      h('td', {}, s.builtin ? 'shipped' : s.source), h('td', { class: 'details' }, s.description || ''),
      h('td', { class: 'mono nowrap' }, (s.envs || []).map((v) => `${v.name}${v.required ? '*' : ''}`).join(' ')),
      h('td', { class: 'details installs' }, (s.installations || []).map((i) =>
        h('div', {}, h('a', { href: `#/config/${i.sandbox_config_id}` }, configs.get(i.sandbox_config_id) || i.sandbox_config_id),
          ` · ${i.status}${i.enabled ? '' : ' (disabled)'}`))),
      h('td', { class: 'nowrap' }, when(s.created_at)),
      h('td', { class: 'actions' },
        admin && target.options.length > 0 && h('button', { type: 'button', 'aria-label': `Install ${s.name} into the chosen configuration`, onclick: async () => {
          const r = await attempt(() => api('POST', `/v1/skills/catalog/${enc(s.id)}/install`, { sandbox_config_ids: [target.value] }));
          if (r?.errors?.length) showError(new Error(`${r.errors[0].error.code}: ${r.errors[0].error.message}`));
          else if (r) location.hash = `#/config/${target.value}`;
        } }, 'Install'), ' ',
        admin && !s.builtin && h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${s.name} from the catalog`, onclick: async () => {
          if (!confirm(`Delete ${s.name} ${s.version} from the catalog?`)) return;
          if (await attempt(() => api('DELETE', `/v1/skills/catalog/${enc(s.id)}`)) !== undefined) load();
        } }, 'Delete')))));
    if (!list.data.length) tbody.append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'The catalog is empty.')));
  };
  const picker = h('input', { id: 'catalog-bundle', type: 'file', accept: '.zip,.tar,.tgz,.tar.gz,application/zip' });
  const progress = h('progress', { id: 'catalog-progress', max: 1, value: 0, hidden: true });
  picker.addEventListener('change', async () => {
    const f = picker.files[0];
    if (!f) return;
    progress.hidden = false;
    await attempt(() => upload('/v1/skills/catalog', f, (done, total) => { progress.max = total; progress.value = done; },
      { method: 'POST', type: /\.zip$/i.test(f.name) ? 'application/zip' : /gz$/i.test(f.name) ? 'application/gzip' : 'application/x-tar' }));
    progress.hidden = true;
    picker.value = '';
    load();
  });
  const add = admin && h('div', { class: 'card row' },
    h('label', { for: 'catalog-bundle' }, 'Add a bundle (zip or tar with a SKILL.md)', picker), progress,
    h('label', { for: 'catalog-config' }, 'Install into', target));
  root.replaceChildren(h('h1', {}, 'Skill catalog'),
    h('p', { class: 'muted' }, 'Skills a configuration can install; every sandbox made from it then has them. A configuration\'s installs, their progress and variables are on its page.'),
    add || '',
    h('table', { id: 'catalog' }, h('thead', {}, h('tr', {},
      ['Skill', 'Version', 'Source', 'Description', 'Variables', 'Installed in', 'Added', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody));
  const cfgs = await api('GET', '/v1/sandbox-configs').catch(() => null);
  for (const c of cfgs?.data || []) configs.set(c.id, c.name);
  target.replaceChildren(...[...configs].map(([id, name]) => h('option', { value: id }, name)));
  await load();
}
