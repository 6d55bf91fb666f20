// The key's user's own variables (GET /v1/me/env-vars, docs/configs.md): for each
// configuration, its variables and those its skills declare, where each one's value comes
// from (the configuration's "workspace" value, the user's own, or unset), never a value.
// A personal value overrides the configuration's and reaches only this user's sandboxes;
// set one (for a configuration, or for a skill: then in every configuration) or delete one.
import { api, enc } from './api.js';
import { h, attempt, when } from './ui.js';

export async function myVarsPage(root, ctx) {
  // A viewer key changes nothing, as everywhere in the console.
  const canChange = ctx.me.role !== 'viewer';
  const list = h('div', { id: 'my-vars' });
  const target = h('select', { id: 'myvar-target' });
  const name = h('input', { id: 'myvar-name', required: true, size: 22, autocomplete: 'off', placeholder: 'NAME' });
  const value = h('input', { id: 'myvar-value', type: 'password', size: 26, autocomplete: 'off' });
  const note = h('span', { id: 'myvar-saved', class: 'muted', 'aria-live': 'polite' });
  let skillNames = {};

  const change = (method, scope, id, varName, val) => api(method, `/v1/me/env-vars/${scope}`,
    { [scope === 'skill' ? 'skill_id' : 'sandbox_config_id']: id, name: varName, ...(val !== undefined ? { value: val } : {}) });

  const load = async () => {
    const r = await attempt(() => api('GET', '/v1/me/env-vars'));
    if (!r) return;
    const skills = new Map();
    const options = [];
    list.replaceChildren(...(r.data.length ? r.data.map((c) => {
      options.push(h('option', { value: `sandbox:${c.sandbox_config_id}` }, `configuration ${c.sandbox_config_name}`));
      const rows = [];
      const row = (scope, id, of, v) => rows.push(h('tr', { 'data-name': v.name, 'data-scope': scope },
        h('td', { class: 'mono' }, v.name), h('td', {}, of),
        h('td', { class: `source-${v.source}` }, v.source === 'user' ? 'yours' : v.source === 'workspace' ? 'the configuration\'s' : 'not set',
          v.required && v.source === 'unset' ? h('span', { class: 'stderr-text' }, ' (required)') : ''),
        h('td', { class: 'nowrap' }, v.updated_at ? when(v.updated_at) : ''),
        h('td', { class: 'actions' }, canChange && v.source === 'user' && h('button', { type: 'button', class: 'danger',
          'aria-label': `Delete my ${v.name} for ${of}`, onclick: async () => {
            if (await attempt(() => change('DELETE', scope, id, v.name)) !== undefined) load();
          } }, 'Delete'))));
      for (const v of c.vars) row('sandbox', c.sandbox_config_id, `configuration ${c.sandbox_config_name}`, v);
      for (const s of c.skills) {
        skills.set(s.skill_id, s.vars.map((v) => v.name));
        for (const v of s.vars) row('skill', s.skill_id, `skill ${skillNames[s.skill_id] || s.skill_id}`, v);
      }
      return h('section', { class: 'card', 'data-config': c.sandbox_config_name },
        h('h2', {}, c.sandbox_config_name, c.description ? h('span', { class: 'muted' }, ` · ${c.description}`) : ''),
        h('table', {}, h('thead', {}, h('tr', {}, ['Variable', 'Of', 'Value from', 'Updated', ''].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No variables.')))));
    }) : [h('p', { class: 'muted' }, 'No configuration yet.')]));
    for (const [id, names] of skills)
      options.push(h('option', { value: `skill:${id}` }, `skill ${skillNames[id] || id} (${names.join(', ')}; every configuration)`));
    const was = target.value;
    target.replaceChildren(...options);
    if (was) target.value = was;
  };

  const form = canChange && h('form', { class: 'row card', 'aria-label': 'Set one of my variables', onsubmit: async (e) => {
    e.preventDefault();
    const [scope, id] = target.value.split(/:(.*)/s);
    const r = await attempt(() => change('PUT', scope, id, name.value, value.value));
    if (r === undefined) return;
    note.textContent = `${name.value} set at ${when(r.updated_at)}.`;
    value.value = '';
    load();
  } },
  h('label', { for: 'myvar-target' }, 'For', target), h('label', { for: 'myvar-name' }, 'Variable', name),
  h('label', { for: 'myvar-value' }, 'Value (never shown again)', value),
  h('button', { class: 'primary', type: 'submit' }, 'Set variable'), note);
  root.replaceChildren(h('h1', {}, 'My variables'),
    h('p', { class: 'muted' }, 'Your own values override a configuration\'s and reach only your sandboxes; a skill\'s count in every configuration that installs it. Values are sealed: no answer carries one, so none is shown.'),
    form || '', list);
  // Skill names from the catalog, for rows that only carry a skill's id.
  const cat = await api('GET', '/v1/skills/catalog').catch(() => null);
  skillNames = Object.fromEntries((cat?.data || []).map((s) => [s.id, s.name]));
  await load();
}
