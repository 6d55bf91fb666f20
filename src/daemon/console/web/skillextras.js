// A configuration's skill install, beyond its row (docs/skills.md): the values of the
// variables its SKILL.md declares, set for this configuration (PATCH envs: sealed, never
// returned, so only "set" or "not set" is shown), and guidance to a running install round
// (the messages are appended to the install's $SKILL_GUIDANCE_FILE and to its transcript).
import { api } from './api.js';
import { h, attempt } from './ui.js';

// url: the install's API path. done(): after a change (the list reloaded).
export function installVars(box, url, s, done) {
  const rows = (s.envs || []).map((v) => {
    const value = h('input', { id: `skillvar-${v.name}`, type: 'password', size: 24, autocomplete: 'off' });
    const save = (val) => async () => {
      if (await attempt(() => api('PATCH', url, { envs: { [v.name]: val() } })) === undefined) return;
      value.value = '';
      done();
    };
    return h('tr', { 'data-name': v.name },
      h('td', { class: 'mono' }, v.name, v.required ? h('span', { class: 'muted' }, ' (required)') : ''),
      h('td', {}, v.description || ''), h('td', { class: 'skillvar-state' }, v.is_set ? 'set' : 'not set'),
      h('td', {}, h('label', { for: value.id }, `Value of ${v.name}`, value)),
      h('td', { class: 'actions' },
        h('button', { type: 'button', 'aria-label': `Save ${v.name}`, onclick: save(() => value.value) }, 'Save'), ' ',
        v.is_set && h('button', { type: 'button', class: 'danger', 'aria-label': `Clear ${v.name}`, onclick: save(() => '') }, 'Clear')));
  });
  box.replaceChildren(h('h3', {}, `Variables of ${s.name} in this configuration`),
    h('p', { class: 'muted' }, 'For every user\'s sandboxes of this configuration while the install is enabled; a user\'s own value (My variables) comes first. Values are sealed and never shown.'),
    h('table', { id: 'skill-vars' }, h('thead', {}, h('tr', {}, ['Variable', 'What', 'Value', 'New value', ''].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'The skill declares no variables.')))));
}

// A client's id for a message, so a retried send adds nothing (crypto.randomUUID needs a
// secure context; a console may be served over plain HTTP).
function steerId() {
  return [...crypto.getRandomValues(new Uint8Array(12))].map((b) => b.toString(16).padStart(2, '0')).join('');
}

// Guidance to the running round of an install: its messages with their state, and a box to
// send one while the round accepts them (409 install_moved_on once it has ended).
export async function guidance(box, url) {
  const list = h('ul', { id: 'guidance-messages' });
  const text = h('textarea', { id: 'guidance-text', class: 'code small', maxlength: 10000, spellcheck: 'false' });
  let round = null;
  const load = async () => {
    const g = await api('GET', `${url}/guidance`).catch(() => null);
    if (!g) return;
    round = g.message_id;
    list.replaceChildren(...g.messages.map((m) => h('li', { 'data-status': m.status }, m.content, h('span', { class: 'muted' }, ` · ${m.status}`))));
    form.hidden = !g.accepting;
  };
  const form = h('form', { 'aria-label': 'Send guidance to the install', hidden: true, onsubmit: async (e) => {
    e.preventDefault();
    if (!text.value.trim()) return;
    const r = await attempt(() => api('POST', `${url}/guidance`, { expected_message_id: round, steer_id: steerId(), content: text.value }));
    if (r === undefined) return;
    text.value = '';
    load();
  } }, h('label', { for: 'guidance-text' }, 'Guidance to the install (read by its script from $SKILL_GUIDANCE_FILE)', text),
  h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Send guidance')));
  box.replaceChildren(h('h3', {}, 'Guidance'), list, form);
  await load();
  return load;
}
