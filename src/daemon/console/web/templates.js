// Templates (docs/templates.md): what each built template holds, its size and its warm pool;
// a custom template built from a recipe (packages, files, run commands, a start command and
// a ready check), its build followed live (every step and every line
// it prints, then its end), a custom template's last build log, and deleting one.
import { api, stream, enc } from './api.js';
import { h, attempt, showError, when, bytes } from './ui.js';

const lines = (text) => text.split('\n').map((l) => l.trim()).filter(Boolean);
const words = (text) => text.split(/[\s,]+/).filter(Boolean);

export async function templatesPage(root, ctx) {
  const list = await attempt(() => api('GET', '/v1/templates'));
  const templates = list?.data || [];
  const live = h('section', { id: 'build', 'aria-live': 'polite' });
  let follow = null;
  ctx.keep(root, () => follow?.abort());

  // A build's log, from its start, then live, to its end; the list reloaded after it.
  async function watch(name, body) {
    follow?.abort();
    const mine = new AbortController();
    follow = mine;
    await followBuild(live, name, body, mine.signal);
    if (follow === mine) reload();
  }
  const reload = async () => {
    const again = await api('GET', '/v1/templates').catch(() => null);
    if (again) tbody.replaceChildren(...rows(again.data));
  };

  const rows = (data) => data.map((t) => h('tr', { 'data-name': t.name },
    h('td', { class: 'mono' }, t.name), h('td', {}, t.from || ''),
    h('td', {}, t.custom ? `custom (${t.owner}${t.public ? ', public' : ''})` : 'operator'),
    h('td', { class: 'nowrap' }, when(t.created_at)), h('td', {}, bytes(t.size_bytes)),
    h('td', {}, `${t.contains.packages.length} Debian packages` +
      (t.contains.node ? `, node ${t.contains.node}` : '') +
      (t.contains.npm.length ? `, ${t.contains.npm.length} npm` : '')),
    h('td', {}, t.pool_size ? `${t.pool.ready}/${t.pool.size} ready` : 'none'),
    h('td', {}, t.warm_snapshot),
    h('td', { class: 'mono details' }, (t.digest || '').slice(0, 23)),
    h('td', { class: 'actions' }, t.custom && [
      h('button', { type: 'button', 'aria-label': `Build log of ${t.name}`, onclick: () => watch(t.name) }, 'Build log'), ' ',
      ctx.can.write() && h('button', { type: 'button', class: 'danger', 'aria-label': `Delete template ${t.name}`, onclick: async () => {
        if (!confirm(`Delete template ${t.name}?`)) return;
        await attempt(() => api('DELETE', `/v1/templates/${enc(t.name)}`));
        reload();
      } }, 'Delete')])));
  const tbody = h('tbody', {}, rows(templates));

  const name = h('input', { id: 'tpl-name', required: true, pattern: '[a-z0-9][a-z0-9\\-]{0,31}', size: 16 });
  const from = h('select', { id: 'tpl-from' }, templates.map((t) => h('option', { value: t.name, selected: t.name === 'base' }, t.name)));
  const apt = h('input', { id: 'tpl-apt', size: 30, placeholder: 'ffmpeg jq' });
  const npm = h('input', { id: 'tpl-npm', size: 30, placeholder: 'docx@9.5.1' });
  const run = h('textarea', { id: 'tpl-run', class: 'code small', spellcheck: 'false', placeholder: 'one shell command a line, run as root in the build' });
  const start = h('input', { id: 'tpl-start', size: 40, placeholder: 'python3 -m http.server 3000' });
  const ready = h('input', { id: 'tpl-ready', size: 40, placeholder: 'curl -sf localhost:3000' });
  const files = recipeFiles();
  const build = ctx.can.write() && h('form', { class: 'card', 'aria-label': 'Build a template', onsubmit: (e) => {
    e.preventDefault();
    const recipe = { name: name.value, from: from.value };
    if (words(apt.value).length) recipe.apt_packages = words(apt.value);
    if (words(npm.value).length) recipe.npm_packages = words(npm.value);
    if (lines(run.value).length) recipe.run = lines(run.value);
    if (files.value().length) recipe.files = files.value();
    if (start.value.trim()) recipe.start_command = start.value.trim();
    if (ready.value.trim()) recipe.ready_check = ready.value.trim();
    watch(name.value, recipe);
  } }, h('h2', {}, 'Build a template'),
  h('div', { class: 'row' }, h('label', { for: 'tpl-name' }, 'Name', name), h('label', { for: 'tpl-from' }, 'From', from),
    h('label', { for: 'tpl-apt' }, 'Debian packages', apt), h('label', { for: 'tpl-npm' }, 'npm packages (global)', npm)),
  files.box,
  h('label', { for: 'tpl-run' }, 'Run', run),
  h('div', { class: 'row' }, h('label', { for: 'tpl-start' }, 'Start command (at every boot)', start),
    h('label', { for: 'tpl-ready' }, 'Ready check (polled until it passes)', ready)),
  h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Build'),
    h('span', { class: 'muted' }, 'Packages come only from the registries the operator allows; a recipe built before is taken from the cache.')));
  root.replaceChildren(h('h1', {}, 'Templates'),
    h('table', { id: 'templates' }, h('thead', {}, h('tr', {},
      ['Name', 'Built on', 'Kind', 'Built', 'Size', 'Contains', 'Warm pool', 'Warm snapshot', 'Digest', '']
        .map((x) => h('th', { scope: 'col' }, x)))), tbody),
    build || '', live);
}

// A build's events into box as a progress bar, its step, every line it prints (stderr in red)
// and its end: a recipe's build POSTed as it starts (body), else a build's events from its
// start (GET build-events: a custom template's last build, or one the templates query started).
// Resolves when the build's stream ends; failures go to the error banner.
export async function followBuild(box, name, body, signal) {
  const bar = h('progress', { id: 'build-progress', max: 100, value: 0, 'aria-label': `Build of ${name}` });
  const step = h('span', { id: 'build-step', class: 'mono' }, 'starting');
  const log = h('pre', { class: 'out', id: 'build-log' });
  const end = h('p', { id: 'build-end' });
  box.replaceChildren(h('h2', {}, `Build of ${name}`), h('div', { class: 'row' }, bar, step), log, end);
  const onEvent = (ev) => {
    if (ev.percent !== undefined) bar.value = ev.percent;
    if (ev.type === 'step') {
      step.textContent = `${ev.step} (${ev.index}/${ev.total}) · ${ev.percent}%`;
      log.append(h('span', { class: 'muted' }, `── ${ev.step}\n`));
    } else if (ev.type === 'log') log.append(h('span', { class: ev.stream === 'stderr' ? 'stderr' : '' }, `${ev.line}\n`));
    else if (ev.type === 'log_truncated') log.append(h('span', { class: 'stderr' }, '[the log is cut here: 1 MiB]\n'));
    else if (ev.type === 'done') {
      step.textContent = `ready${ev.cached ? ' (cached)' : ''} · 100%`;
      end.replaceChildren(h('strong', { class: 'status-running' }, 'Built'), ` ${bytes(ev.build?.size_bytes)} · digest ${(ev.build?.digest || '').slice(0, 23)}`);
    } else if (ev.type === 'error') {
      step.textContent = `failed at ${ev.error.step}`;
      end.replaceChildren(h('strong', { class: 'status-failed' }, `${ev.error.code}`), `: ${ev.error.message}`,
        ev.error.stderr_tail ? h('pre', { class: 'out' }, h('span', { class: 'stderr' }, ev.error.stderr_tail)) : '');
    }
    log.scrollTop = log.scrollHeight;
  };
  try {
    if (body) await stream('/v1/templates', body, onEvent, signal);
    else await stream(`/v1/templates/${enc(name)}/build-events`, undefined, onEvent, signal);
  } catch (e) {
    if (e.name !== 'AbortError') showError(e);
  }
}

// The recipe's files: a row each (path, mode in octal, content), added and removed by button.
// value() is the recipe's `files` list.
function recipeFiles() {
  const rows = h('div', { id: 'tpl-files' });
  let n = 0;
  const add = () => {
    n++;
    const path = h('input', { id: `tpl-file-path-${n}`, size: 28, placeholder: '/etc/app.conf', class: 'file-path' });
    const mode = h('input', { id: `tpl-file-mode-${n}`, size: 5, value: '0644', pattern: '0?[0-7]{3,4}', class: 'file-mode' });
    const content = h('textarea', { id: `tpl-file-content-${n}`, class: 'code small file-content', spellcheck: 'false' });
    const row = h('div', { class: 'row recipe-file' },
      h('label', { for: path.id }, `File ${n} path`, path), h('label', { for: mode.id }, 'Mode', mode),
      h('label', { for: content.id, class: 'grow' }, 'Content', content),
      h('button', { type: 'button', 'aria-label': `Remove file ${n}`, onclick: () => row.remove() }, 'Remove'));
    rows.append(row);
    path.focus();
  };
  const value = () => [...rows.querySelectorAll('.recipe-file')].map((r) => ({
    path: r.querySelector('.file-path').value.trim(),
    content: r.querySelector('.file-content').value,
    mode: Number.parseInt(r.querySelector('.file-mode').value || '644', 8),
  })).filter((f) => f.path);
  return { box: h('div', {}, rows, h('button', { type: 'button', onclick: add }, 'Add a file')), value };
}
