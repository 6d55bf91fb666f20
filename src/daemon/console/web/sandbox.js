// One sandbox: its state and actions, and tabs for a command box (streamed over SSE) with
// the exec history, a terminal, the file browser and a Python cell runner.
import { api, stream, upload, blob, encPath } from './api.js';
import { h, attempt, showError, when, whenMs, timeLeft, bytes, frameText } from './ui.js';
import { sandboxActions } from './actions.js';
import { openTerminal } from './terminal.js';
import { processesTab } from './processes.js';
import { artifactsTab } from './artifacts.js';

const TABS = [['command', 'Command'], ['terminal', 'Terminal'], ['processes', 'Processes'], ['files', 'Files'],
  ['artifacts', 'Artifacts'], ['python', 'Python']];

export async function sandboxPage(root, ctx, id, tab = 'command') {
  const sb = await attempt(() => api('GET', `/v1/sandboxes/${id}`));
  if (!sb) { root.replaceChildren(h('p', {}, h('a', { href: '#/sandboxes' }, '← Sandboxes'))); return; }
  const left = h('span', { id: 'left' }, timeLeft(sb.expires_at));
  const t = setInterval(() => { left.textContent = timeLeft(sb.expires_at); }, 1000);
  ctx.keep(root, () => clearInterval(t));
  const body = h('section', { id: `tab-${tab}`, role: 'tabpanel' });
  root.replaceChildren(
    h('p', {}, h('a', { href: '#/sandboxes' }, '← Sandboxes')),
    h('h1', {}, 'Sandbox ', h('span', { class: 'mono' }, sb.id)),
    h('div', { class: 'row' },
      h('span', { class: `status-${sb.status}`, id: 'sb-status' }, sb.status),
      h('span', {}, `${sb.template} · ${sb.runtime} (${sb.backend})`),
      h('span', {}, 'created ', when(sb.created_at)), h('span', {}, 'time left ', left),
      ...sandboxActions(ctx, sb, async () => {
        const still = await api('GET', `/v1/sandboxes/${id}`).catch(() => null);
        // Gone: back to the list; else this page again, through the router (its cleanup).
        if (!still) location.hash = '#/sandboxes'; else window.dispatchEvent(new HashChangeEvent('hashchange'));
      })),
    h('div', { class: 'tabs', role: 'tablist' }, TABS.map(([k, label]) => h('button', {
      type: 'button', role: 'tab', 'aria-selected': String(k === tab), id: `tabbtn-${k}`,
      onclick: () => { location.hash = `#/sandbox/${id}/${k}`; } }, label))),
    body);
  if (tab === 'terminal') ctx.keep(root, openTerminal(body, id));
  else if (tab === 'processes') processesTab(body, id, ctx);
  else if (tab === 'files') filesTab(body, id, ctx);
  else if (tab === 'artifacts') artifactsTab(body, id);
  else if (tab === 'python') pythonTab(body, id, ctx);
  else commandTab(body, id, ctx);
}

function commandTab(box, id, ctx) {
  const cmd = h('input', { id: 'command', size: 60, 'aria-label': 'Command', placeholder: 'ls -la /workspace', required: true });
  const out = h('pre', { class: 'out', id: 'command-output', 'aria-live': 'polite' });
  const result = h('p', { id: 'command-result', class: 'muted' });
  const history = h('tbody');
  const stop = h('button', { type: 'button', hidden: true }, 'Stop watching');
  let abort = null;
  stop.addEventListener('click', () => abort?.abort());
  ctx.keep(box, () => abort?.abort());
  const loadHistory = async () => {
    const page = await api('GET', `/v1/audit?sandbox_id=${id}&action=exec&limit=100`).catch((e) => { showError(e); return null; });
    if (!page) return;
    history.replaceChildren(...page.data.reverse().map((a) => h('tr', {},
      h('td', { class: 'nowrap' }, whenMs(a.ts_ms)), h('td', {}, a.user), h('td', {}, a.outcome),
      h('td', { class: 'mono details' }, a.details?.command ?? ''),
      h('td', { class: 'nowrap' }, a.details?.duration_ms !== undefined ? `${a.details.duration_ms} ms` : ''),
      h('td', { class: 'mono' }, a.details?.exec_id ?? ''),
      h('td', { class: 'mono' }, a.request_id || ''))));
  };
  const form = h('form', { class: 'row', 'aria-label': 'Run a command', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    result.textContent = 'running…';
    abort = new AbortController();
    stop.hidden = false;
    const run = e.target.querySelector('button[type=submit]');
    run.disabled = true;
    try {
      await stream(`/v1/sandboxes/${id}/exec`, { shell: cmd.value }, (ev) => {
        if (ev.type === 'start') result.textContent = `running ${ev.exec_id}…`;
        else if (ev.type === 'stdout' || ev.type === 'stderr') {
          out.append(h('span', { class: ev.type }, frameText(ev.data, ev.encoding)));
          out.scrollTop = out.scrollHeight;
        } else if (ev.type === 'truncated') out.append(h('span', { class: 'stderr' }, `\n[${ev.stream} truncated at ${bytes(ev.limit_bytes)}]\n`));
        else if (ev.type === 'exit') {
          const r = ev.receipt ? ` · receipt: exec ${ev.receipt.exec_id}, command sha256 ${(ev.receipt.command_sha256 || '').slice(0, 16)}…` : '';
          result.textContent = `exit ${ev.exit_code}${ev.duration_ms !== undefined ? ` in ${ev.duration_ms} ms` : ''}${r}`;
        } else if (ev.type === 'error') result.textContent = `error ${ev.code}: ${ev.message}`;
      }, abort.signal);
    } catch (err) {
      if (err.name !== 'AbortError') showError(err);
      result.textContent = err.name === 'AbortError' ? 'stopped watching (the command goes on)' : 'failed';
    }
    run.disabled = false;
    stop.hidden = true;
    loadHistory();
  } }, h('label', { for: 'command' }, 'Command', cmd), h('button', { class: 'primary', type: 'submit' }, 'Run'), stop);
  box.replaceChildren(ctx.can.write() ? form : h('p', { class: 'muted' }, 'This key may not run commands.'),
    out, result, h('h2', {}, 'Exec history'),
    h('table', { id: 'history' }, h('thead', {}, h('tr', {},
      ['Time', 'User', 'Outcome', 'Command', 'Took', 'Exec id', 'Request id'].map((x) => h('th', { scope: 'col' }, x)))), history));
  loadHistory();
  cmd.focus();
}

function filesTab(box, id, ctx) {
  let dir = '';
  const where = h('span', { id: 'cwd', class: 'mono' });
  const tbody = h('tbody');
  const shown = h('section', { id: 'preview', 'aria-live': 'polite' });
  const progress = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true });
  const picker = h('input', { id: 'upload', type: 'file', 'aria-label': 'Upload a file', multiple: true });
  const load = async () => {
    where.textContent = `/workspace/${dir}`;
    const q = dir ? `?path=${encodeURIComponent(dir)}` : '';
    const list = await attempt(() => api('GET', `/v1/sandboxes/${id}/files${q}`));
    if (!list) return;
    const rows = [];
    if (dir) rows.push(h('tr', {}, h('td', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); dir = dir.split('/').slice(0, -1).join('/'); load(); } }, '..')), h('td', {}, ''), h('td', {}, ''), h('td', {}, ''), h('td', {}, '')));
    for (const f of list.data) {
      const rel = dir ? `${dir}/${f.path.split('/').pop()}` : f.path.split('/').pop();
      const name = f.path.split('/').pop();
      const nameCell = f.type === 'directory'
        ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); dir = rel; load(); } }, `${name}/`)
        : h('button', { type: 'button', class: 'link mono', 'aria-label': `Preview ${rel}`, onclick: () => preview(id, rel, f.size, shown) }, name);
      rows.push(h('tr', { 'data-path': rel },
        h('td', {}, nameCell), h('td', {}, f.type), h('td', {}, f.type === 'file' ? bytes(f.size) : ''),
        h('td', {}, when(f.mtime)),
        h('td', { class: 'actions' },
          f.type === 'file' && h('button', { type: 'button', 'aria-label': `Download ${rel}`, onclick: () => download(id, rel) }, 'Download'), ' ',
          ctx.can.write() && h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${rel}`, onclick: async () => {
            if (!confirm(`Delete /workspace/${rel}?`)) return;
            await attempt(() => api('DELETE', `/v1/sandboxes/${id}/files/${encPath(rel)}`));
            load();
          } }, 'Delete'))));
    }
    tbody.replaceChildren(...rows);
  };
  picker.addEventListener('change', async () => {
    for (const file of picker.files) {
      const rel = dir ? `${dir}/${file.name}` : file.name;
      progress.hidden = false;
      progress.value = 0;
      await attempt(() => upload(`/v1/sandboxes/${id}/files/${encPath(rel)}`, file, (done, total) => {
        progress.max = total;
        progress.value = done;
      }));
      progress.hidden = true;
    }
    picker.value = '';
    load();
  });
  box.replaceChildren(h('div', { class: 'row' }, h('strong', {}, 'Directory '), where,
    h('button', { type: 'button', onclick: load }, 'Refresh')),
  ctx.can.write() ? h('div', { class: 'row' }, picker, progress) : '',
  h('table', { id: 'files' }, h('thead', {}, h('tr', {},
    ['Name', 'Type', 'Size', 'Modified', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody), shown);
  load();
}

const IMAGES = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp' };
const PREVIEW_TEXT_MAX = 64 * 1024;

// Images are shown whole; anything else as text, its first 64 KiB, when it decodes as
// UTF-8 (else: no preview). PDF previews are not there yet (docs/console.md).
async function preview(id, rel, size, box) {
  const b = await attempt(() => blob(`/v1/sandboxes/${id}/files/${encPath(rel)}`));
  if (!b) return;
  const old = box.querySelector('img')?.src;
  if (old) URL.revokeObjectURL(old);
  const head = h('h2', {}, rel, h('span', { class: 'muted' }, ` · ${bytes(size)}`));
  const type = IMAGES[rel.split('.').pop().toLowerCase()];
  if (type) {
    box.replaceChildren(head, h('img', { src: URL.createObjectURL(new Blob([b], { type })), alt: rel, class: 'preview' }));
    return;
  }
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(await b.slice(0, PREVIEW_TEXT_MAX).arrayBuffer());
  } catch {
    box.replaceChildren(head, h('p', { class: 'muted' }, 'Not text: download it to look inside.'));
    return;
  }
  box.replaceChildren(head, h('pre', { class: 'out' }, text),
    size > PREVIEW_TEXT_MAX ? h('p', { class: 'muted' }, `The first ${bytes(PREVIEW_TEXT_MAX)} only.`) : '');
}

async function download(id, rel) {
  const b = await attempt(() => blob(`/v1/sandboxes/${id}/files/${encPath(rel)}`));
  if (!b) return;
  const url = URL.createObjectURL(b);
  const a = h('a', { href: url, download: rel.split('/').pop(), hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

const SAMPLE = `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import math
xs = [i / 10 for i in range(100)]
plt.plot(xs, [math.sin(x) for x in xs], label="sin")
plt.plot(xs, [math.cos(x) for x in xs], label="cos")
plt.legend(); plt.title("A plot from the sandbox's kernel")
plt.show()`;

function pythonTab(box, id, ctx) {
  const code = h('textarea', { id: 'code', class: 'code', 'aria-label': 'Python code', spellcheck: 'false' });
  code.value = SAMPLE;
  const cells = h('div', { id: 'cells' });
  const form = h('form', { 'aria-label': 'Run a Python cell', onsubmit: async (e) => {
    e.preventDefault();
    const run = e.target.querySelector('button[type=submit]');
    run.disabled = true;
    run.textContent = 'Running…';
    const r = await attempt(() => api('POST', `/v1/sandboxes/${id}/run_code`, { code: code.value }));
    run.disabled = false;
    run.textContent = 'Run cell';
    if (!r) return;
    const out = h('div', { class: 'card cell-out' },
      h('div', { class: 'muted' }, `[${r.execution_count ?? ''}] ${r.duration_ms ?? ''} ms${r.kernel_restarted ? ` · kernel restarted (${r.restart_reason})` : ''}`));
    if (r.stdout) out.append(h('pre', { class: 'out' }, r.stdout));
    if (r.stderr) out.append(h('pre', { class: 'out' }, h('span', { class: 'stderr' }, r.stderr)));
    for (const o of r.outputs || []) {
      if (o.mime === 'image/png' || o.mime === 'image/jpeg') out.append(h('img', { src: `data:${o.mime};base64,${o.data}`, alt: 'cell output image' }));
      else if (o.mime === 'text/plain') out.append(h('pre', { class: 'out' }, o.data));
      else out.append(h('p', { class: 'muted' }, `${o.mime} output (${bytes(o.data?.length)}) not shown`));
    }
    if (r.result !== null && r.result !== undefined) out.append(h('pre', { class: 'out result' }, r.result));
    if (r.error) {
      const tb = Array.isArray(r.error.traceback) ? r.error.traceback.join('\n') : (r.error.traceback || '');
      out.append(h('pre', { class: 'out' }, h('span', { class: 'stderr' }, `${r.error.name}: ${r.error.value}\n${tb}`)));
    }
    cells.prepend(out);
  } }, code, h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Run cell'),
    h('span', { class: 'muted' }, 'Runs in the sandbox\'s persistent Python kernel; variables stay between cells.')));
  box.replaceChildren(ctx.can.write() ? form : h('p', { class: 'muted' }, 'This key may not run code.'), cells);
}
