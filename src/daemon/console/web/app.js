// The console's shell: sign-in, the hash router and the list pages (sandboxes, keys, audit);
// the other pages have a module each.
// A sandbox's own page is sandbox.js. Pages are rebuilt on each route change; a page's
// timers and sockets are stopped through the `cleanup` list when the route changes.
import { api, key } from './api.js';
import { h, attempt, clearError, showError, when, whenMs, timeLeft, details } from './ui.js';
import { sandboxPage } from './sandbox.js';
import { sandboxActions } from './actions.js';
import { templatesPage } from './templates.js';
import { usagePage } from './usage.js';
import { walletPage } from './wallet.js';
import { nodesPage } from './nodes.js';
import { configsPage, configPage } from './configs.js';
import { volumesPage, volumePage } from './volumes.js';
import { egressPicker } from './network.js';
import { myVarsPage } from './myvars.js';
import { catalogPage } from './catalog.js';

const main = document.getElementById('main');
// Each route renders into a fresh element: a page still loading when the route changes
// renders into its own, detached, one and is never seen.
const ctx = { me: null, cleanup: [], view: null };
// A page's timer or socket, stopped on the next route change (at once if it is gone already).
ctx.keep = (root, stop) => { if (root.isConnected) ctx.cleanup.push(stop); else stop(); };

const can = {
  write: () => ctx.me && ctx.me.role !== 'viewer' && ctx.me.tool_level === 'sandbox',
  admin: () => ctx.me && ctx.me.role === 'admin',
};
ctx.can = can;

function header() {
  const signedIn = !!ctx.me;
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('signout').hidden = !signedIn;
  document.getElementById('who').textContent = signedIn ? `${ctx.me.user} · ${ctx.me.role}` : '';
  for (const a of document.querySelectorAll('#nav [data-role="admin"]')) a.hidden = !can.admin();
}

function signinPage() {
  const root = ctx.view;
  const input = h('input', { id: 'apikey', type: 'password', autocomplete: 'off', required: true,
                             placeholder: 'sbx_…', 'aria-describedby': 'keyhelp' });
  const form = h('form', { class: 'card signin', onsubmit: async (e) => {
    e.preventDefault();
    key.set(input.value.trim());
    const me = await attempt(() => api('GET', '/v1/me'));
    if (!me) { key.clear(); return; }
    ctx.me = me;
    header();
    location.hash = '#/sandboxes';
  } },
  h('h1', {}, 'Sign in'),
  h('label', { for: 'apikey' }, 'API key', input),
  h('div', { id: 'keyhelp', class: 'muted' },
    h('p', {}, 'Where a key comes from:'),
    h('ol', {},
      h('li', {}, 'The first time sbxd starts it writes an admin key to ',
        h('code', {}, '<data-dir>/admin.key'), ' (for ', h('code', {}, 'make run'), ': ',
        h('code', {}, 'sudo cat data/admin.key'), ').'),
      h('li', {}, 'Or ask an admin for a key of your own (Keys page, or ', h('code', {}, 'POST /v1/keys'), ').')),
    h('p', {}, 'The key stays in this tab only (session storage) and is sent as a bearer token to this sbxd.')),
  h('button', { class: 'primary', type: 'submit' }, 'Sign in'));
  root.replaceChildren(form);
  input.focus();
}

async function sandboxesPage() {
  const root = ctx.view;
  const tbody = h('tbody');
  const templates = h('select', { id: 'template', name: 'template' }, h('option', { value: 'base' }, 'base'));
  const ttl = h('input', { id: 'ttl', type: 'number', min: 60, max: 86400, value: 3600, size: 7 });
  const egress = egressPicker('egress', true);
  // A configuration fills in the template (and limits, variables, network policy): the
  // template choice is then left out, as the API refuses another one.
  const config = h('select', { id: 'config' }, h('option', { value: '' }, 'none'));
  config.addEventListener('change', () => { templates.disabled = !!config.value; });
  const create = can.write() && h('form', { class: 'row card', 'aria-label': 'Create a sandbox', onsubmit: async (e) => {
    e.preventDefault();
    const btn = e.target.querySelector('button');
    btn.disabled = true;
    btn.textContent = 'Creating…';
    const sb = await attempt(() => api('POST', '/v1/sandboxes',
      { ...(config.value ? { config_id: config.value } : { template: templates.value }),
        ttl_seconds: Number(ttl.value), ...(egress.policy() ? { egress: egress.policy() } : {}) }));
    btn.disabled = false;
    btn.textContent = 'Create';
    if (sb) location.hash = `#/sandbox/${sb.id}`;
  } },
  h('label', { for: 'template' }, 'Template', templates),
  h('label', { for: 'config' }, 'Configuration', config),
  h('label', { for: 'ttl' }, 'Time to live (s)', ttl),
  ...egress.controls,
  h('button', { class: 'primary', type: 'submit' }, 'Create'));
  // A viewer may not list sandboxes (403 member_required): say so once, with what to do,
  // rather than an error banner over an empty table.
  if (ctx.me.role === 'viewer') {
    root.replaceChildren(h('h1', {}, 'Sandboxes'), h('p', { class: 'card', id: 'viewer-note' },
      'This is a viewer key: it reads configurations, skills, templates, volumes, usage and its wallet, but not sandboxes. ',
      'To create and use sandboxes, sign in with a member key (an admin makes one on the Keys page).'));
    return;
  }
  root.replaceChildren(h('h1', {}, 'Sandboxes'), create || '',
    h('table', { id: 'sandboxes' }, h('thead', {}, h('tr', {},
      ['Sandbox', 'Status', 'Runtime', 'Template', 'Created', 'Time left', ''].map((t) => h('th', { scope: 'col' }, t)))),
    tbody));
  if (can.write()) {
    api('GET', '/v1/templates').then((t) => {
      templates.replaceChildren(...t.data.map((x) => h('option', { value: x.name, selected: x.name === 'base' }, x.name)));
    }).catch(() => { /* a member may not list templates: base stays */ });
    api('GET', '/v1/sandbox-configs').then((c) => {
      config.append(...c.data.map((x) => h('option', { value: x.id }, x.name)));
    }).catch(() => { /* a restricted key lists no configurations: none stays */ });
  }
  let rows = [];
  const tick = () => {
    for (const { sb, left } of rows) left.textContent = timeLeft(sb.expires_at);
  };
  const load = async () => {
    let list;
    try { list = await api('GET', '/v1/sandboxes'); } catch (e) { showError(e); return; }
    rows = [];
    tbody.replaceChildren(...list.data.map((sb) => {
      const left = h('td', { class: 'left' }, timeLeft(sb.expires_at));
      rows.push({ sb, left });
      return h('tr', { 'data-id': sb.id },
        h('td', {}, h('a', { href: `#/sandbox/${sb.id}`, class: 'mono' }, sb.id)),
        h('td', { class: `status-${sb.status}` }, sb.status),
        h('td', {}, `${sb.runtime} (${sb.backend})`),
        h('td', {}, sb.template),
        h('td', { class: 'nowrap' }, when(sb.created_at)),
        left,
        h('td', { class: 'actions' }, sandboxActions(ctx, sb, load)));
    }));
    if (!list.data.length) {
      tbody.append(h('tr', {}, h('td', { colspan: 7, class: 'empty', id: 'sandboxes-empty' }, can.write()
        ? 'No live sandboxes yet. Press Create above (the defaults are fine): the sandbox opens with a command box, a terminal and a Python tab.'
        : 'No live sandboxes.')));
    }
  };
  await load();
  const t1 = setInterval(tick, 1000);
  const t2 = setInterval(load, 5000);
  ctx.keep(root, () => { clearInterval(t1); clearInterval(t2); });
}

async function keysPage() {
  const root = ctx.view;
  const tbody = h('tbody');
  const shown = h('div', { id: 'newkey', 'aria-live': 'polite' });
  const user = h('input', { id: 'kuser', required: true, pattern: '[A-Za-z0-9_.@\\-]{1,64}' });
  const role = h('select', { id: 'krole' }, ['member', 'viewer', 'admin'].map((r) => h('option', { value: r }, r)));
  const level = h('select', { id: 'klevel' }, ['sandbox', 'basic', 'none'].map((r) => h('option', { value: r }, r)));
  const load = async () => {
    const list = await attempt(() => api('GET', '/v1/keys'));
    if (!list) return;
    tbody.replaceChildren(...list.data.map((k) => h('tr', {},
      h('td', { class: 'mono' }, k.id), h('td', {}, k.user), h('td', {}, k.role), h('td', {}, k.tool_level),
      h('td', {}, k.scope || ''), h('td', {}, when(k.created_at)),
      h('td', {}, k.id === ctx.me.key_id ? h('span', { class: 'muted' }, 'this key')
        : h('button', { type: 'button', class: 'danger', 'aria-label': `Delete key ${k.id}`, onclick: async () => {
          if (!confirm(`Delete key ${k.id} of ${k.user}? What it opened ends.`)) return;
          await attempt(() => api('DELETE', `/v1/keys/${k.id}`));
          await load();
        } }, 'Delete')))));
  };
  root.replaceChildren(h('h1', {}, 'API keys'),
    h('form', { class: 'row card', 'aria-label': 'Create a key', onsubmit: async (e) => {
      e.preventDefault();
      const k = await attempt(() => api('POST', '/v1/keys', { user: user.value, role: role.value, tool_level: level.value }));
      if (!k) return;
      shown.replaceChildren(h('div', { class: 'newkey' },
        h('strong', {}, `New key for ${k.user} (${k.role}). It is shown only now: copy it.`), h('br'),
        h('code', { id: 'newkey-secret' }, k.key)));
      user.value = '';
      await load();
    } }, h('label', { for: 'kuser' }, 'User', user), h('label', { for: 'krole' }, 'Role', role),
    h('label', { for: 'klevel' }, 'Tool level', level), h('button', { class: 'primary', type: 'submit' }, 'Create key')),
    shown,
    h('table', { id: 'keys' }, h('thead', {}, h('tr', {},
      ['Key id', 'User', 'Role', 'Tool level', 'Scope', 'Created', ''].map((t) => h('th', { scope: 'col' }, t)))), tbody));
  await load();
}

async function auditPage(query) {
  const root = ctx.view;
  const q = new URLSearchParams(query);
  const field = (name, label) => h('label', { for: `a-${name}` }, label,
    h('input', { id: `a-${name}`, name, value: q.get(name) || '', size: 18 }));
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true }, 'Older entries…');
  const verify = h('span', { id: 'verify', class: 'muted' });
  let after = null;
  const load = async (append) => {
    const p = new URLSearchParams();
    for (const n of ['sandbox_id', 'user', 'action']) if (q.get(n)) p.set(n, q.get(n));
    p.set('limit', '100');
    if (append && after !== null) p.set('after', after);
    const page = await attempt(() => api('GET', `/v1/audit?${p}`));
    if (!page) return;
    const rows = page.data.map((a) => h('tr', {},
      h('td', {}, a.seq), h('td', { class: 'nowrap' }, whenMs(a.ts_ms)), h('td', {}, a.user),
      h('td', { class: 'mono action' }, a.action), h('td', { class: 'mono' }, a.sandbox_id || ''),
      h('td', {}, a.outcome), h('td', { class: 'mono' }, a.request_id || ''),
      h('td', { class: 'mono details' }, details(a.details))));
    if (append) tbody.append(...rows); else tbody.replaceChildren(...rows);
    after = page.next_after ?? null;
    more.hidden = !page.has_more;
  };
  more.addEventListener('click', () => load(true));
  root.replaceChildren(h('h1', {}, 'Audit log'),
    h('form', { class: 'row card', 'aria-label': 'Filter the audit log', onsubmit: (e) => {
      e.preventDefault();
      const p = new URLSearchParams(new FormData(e.target));
      for (const [k, v] of [...p]) if (!v) p.delete(k);
      location.hash = `#/audit?${p}`;
    } }, field('sandbox_id', 'Sandbox'), field('user', 'User'), field('action', 'Action'),
    h('button', { class: 'primary', type: 'submit' }, 'Filter'),
    can.admin() && h('button', { type: 'button', onclick: async () => {
      const v = await attempt(() => api('GET', '/v1/audit/verify'));
      if (v) verify.textContent = v.ok ? `Chain verified: ${v.checked} entries` : `Chain broken at #${v.first_bad_seq}: ${v.reason}`;
    } }, 'Verify the chain'), verify),
    h('table', { id: 'audit' }, h('thead', {}, h('tr', {},
      ['#', 'Time', 'User', 'Action', 'Sandbox', 'Outcome', 'Request id', 'Details'].map((t) => h('th', { scope: 'col' }, t)))), tbody),
    more);
  await load(false);
}

async function route() {
  for (const f of ctx.cleanup.splice(0)) f();
  clearError();
  ctx.view = h('div');
  main.replaceChildren(ctx.view);
  if (!key.get()) { ctx.me = null; header(); signinPage(); return; }
  if (!ctx.me) {
    try { ctx.me = await api('GET', '/v1/me'); } catch (e) { key.clear(); header(); signinPage(); showError(e); return; }
  }
  header();
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean);
  for (const a of document.querySelectorAll('#nav a')) {
    const section = { sandbox: 'sandboxes', config: 'configs', volume: 'volumes' }[parts[0]] || parts[0] || 'sandboxes';
    if (a.getAttribute('href') === `#/${section}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (parts[0] === 'sandbox' && parts[1]) return sandboxPage(ctx.view, ctx, parts[1], parts[2]);
  if (parts[0] === 'keys') return keysPage();
  if (parts[0] === 'configs') return configsPage(ctx.view, ctx);
  if (parts[0] === 'config' && parts[1]) return configPage(ctx.view, ctx, parts[1]);
  if (parts[0] === 'templates') return templatesPage(ctx.view, ctx);
  if (parts[0] === 'volumes') return volumesPage(ctx.view, ctx);
  if (parts[0] === 'volume' && parts[1]) return volumePage(ctx.view, ctx, parts[1]);
  if (parts[0] === 'usage') return usagePage(ctx.view, ctx, query || '');
  if (parts[0] === 'wallet') return walletPage(ctx.view, ctx, query || '');
  if (parts[0] === 'nodes') return nodesPage(ctx.view);
  if (parts[0] === 'variables') return myVarsPage(ctx.view, ctx);
  if (parts[0] === 'skills') return catalogPage(ctx.view, ctx);
  if (parts[0] === 'audit') return auditPage(query || '');
  return sandboxesPage();
}

document.getElementById('signout').addEventListener('click', () => {
  key.clear();
  ctx.me = null;
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', route);
route();
