// One sandbox: its state and actions, and tabs for a command box (streamed over SSE) with
// the exec history and each exec's receipt, a terminal, background processes, the file
// browser, artifacts, a Python cell runner (HTML outputs through richhtml.js), preview links and the egress log.
import { api, stream } from './api.js';
import { h, attempt, showError, when, whenMs, timeLeft, bytes, frameText } from './ui.js';
import { sandboxActions } from './actions.js';
import { openTerminal } from './terminal.js';
import { processesTab } from './processes.js';
import { artifactsTab } from './artifacts.js';
import { fileBrowser } from './files.js';
import { previewTab, egressTab } from './network.js';
import { sanitizeHtml } from './richhtml.js';

const TABS = [['command', 'Command'], ['terminal', 'Terminal'], ['processes', 'Processes'], ['files', 'Files'],
  ['artifacts', 'Artifacts'], ['python', 'Python'], ['preview', 'Preview links'], ['network', 'Egress log']];

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
      onclick: () => { ctx.tabChosen = true; location.hash = `#/sandbox/${id}/${k}`; } }, label))),
    body);
  // The page is rebuilt on a tab change: keep the keyboard where it was, on the chosen tab
  // (a tab may then move it to its own field, as the command box and the terminal do).
  if (ctx.tabChosen) document.getElementById(`tabbtn-${tab}`)?.focus();
  ctx.tabChosen = false;
  if (tab === 'terminal') ctx.keep(root, openTerminal(body, id));
  else if (tab === 'processes') processesTab(body, id, ctx);
  else if (tab === 'files') fileBrowser(body, `/v1/sandboxes/${id}`, ctx.can.write(), { root: '/workspace' });
  else if (tab === 'artifacts') artifactsTab(body, id);
  else if (tab === 'python') pythonTab(body, id, ctx);
  else if (tab === 'preview') previewTab(body, id, ctx);
  else if (tab === 'network') egressTab(body, id, ctx.can.write());
  else commandTab(body, id, ctx);
}

function commandTab(box, id, ctx) {
  const cmd = h('input', { id: 'command', size: 60, 'aria-label': 'Command', placeholder: 'ls -la /workspace', required: true });
  // Shown once a command runs: an empty black box before that reads as a broken page.
  const out = h('pre', { class: 'out', id: 'command-output', 'aria-live': 'polite', hidden: true });
  const result = h('p', { id: 'command-result', class: 'muted' },
    'Type a shell command and press Enter: its output streams in here as it runs (stderr in red).');
  const history = h('tbody');
  const stop = h('button', { type: 'button', hidden: true }, 'Stop watching');
  let abort = null;
  stop.addEventListener('click', () => abort?.abort());
  ctx.keep(box, () => abort?.abort());
  const loadHistory = async () => {
    const page = await api('GET', `/v1/audit?sandbox_id=${id}&action=exec&limit=100`).catch((e) => { showError(e); return null; });
    if (!page) return;
    if (!page.data.length) {
      history.replaceChildren(h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'No commands run in this sandbox yet.')));
      return;
    }
    history.replaceChildren(...page.data.reverse().map((a) => h('tr', {},
      h('td', { class: 'nowrap' }, whenMs(a.ts_ms)), h('td', {}, a.user), h('td', {}, a.outcome),
      h('td', { class: 'mono details' }, a.details?.command ?? ''),
      h('td', { class: 'nowrap' }, a.details?.duration_ms !== undefined ? `${a.details.duration_ms} ms` : ''),
      h('td', { class: 'mono' }, a.details?.exec_id ? h('button', { type: 'button', class: 'link mono',
        'aria-label': `Receipt of ${a.details.exec_id}`, onclick: () => showReceipt(a.details.exec_id) }, a.details.exec_id) : ''),
      h('td', { class: 'mono' }, a.request_id || ''))));
  };
  // An exec's record, kept by sbxd: its receipt says what ran on what (the template's
  // digest, the command's SHA-256), what it wrote under out/ and the workspace's generations.
  const receipt = h('section', { id: 'receipt', 'aria-live': 'polite' });
  const showReceipt = async (execId) => {
    const r = await attempt(() => api('GET', `/v1/sandboxes/${id}/execs/${execId}`));
    if (!r) return;
    const rc = r.receipt || {};
    const row = (k, v) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', { class: 'mono details' }, v ?? ''));
    receipt.replaceChildren(h('h2', {}, `Receipt of ${execId}`), h('table', { class: 'kv' }, h('tbody', {},
      row('status', `${r.status}${r.exit_code !== undefined && r.exit_code !== null ? `, exit ${r.exit_code}` : ''}${r.duration_ms !== undefined ? ` in ${r.duration_ms} ms` : ''}`),
      row('template', `${rc.template || ''} ${rc.image_digest || ''}`), row('language', rc.language),
      row('command_sha256', rc.command_sha256),
      row('workspace generation', rc.workspace_generation_before !== undefined ? `${rc.workspace_generation_before} → ${rc.workspace_generation_after}` : ''),
      row('inputs', (rc.inputs || []).map((f) => `${f.path} ${f.sha256 || ''}`).join('\n')),
      row('outputs', (rc.outputs || []).map((f) => `${f.path} ${bytes(f.size)} ${f.sha256}`).join('\n')),
      rc.oom_killed ? row('killed', 'out of memory') : '', rc.process_limit_killed ? row('killed', 'process limit') : '')));
    receipt.scrollIntoView({ block: 'nearest' });
  };
  const form = h('form', { class: 'row', 'aria-label': 'Run a command', onsubmit: async (e) => {
    e.preventDefault();
    out.replaceChildren();
    out.hidden = false;
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
      ['Time', 'User', 'Outcome', 'Command', 'Took', 'Exec id (its receipt)', 'Request id'].map((x) => h('th', { scope: 'col' }, x)))), history),
    receipt);
  loadHistory();
  cmd.focus();
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
  const code = h('textarea', { id: 'code', class: 'code', 'aria-label': 'Python code', spellcheck: 'false',
                               'aria-describedby': 'cell-help' });
  // Enter writes a new line in the cell; Ctrl+Enter runs it, as in a notebook.
  code.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); code.form.requestSubmit(); }
  });
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
      // An SVG only as an image: in an <img> its scripts never run and it loads nothing.
      else if (o.mime === 'image/svg+xml') out.append(h('img', { class: 'svg', src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(o.data)}`, alt: 'cell output SVG image' }));
      else if (o.mime === 'text/plain') out.append(h('pre', { class: 'out' }, o.data));
      else if (o.mime === 'text/html') out.append(h('div', { class: 'rich' }, sanitizeHtml(o.data)));
      else out.append(h('p', { class: 'muted' }, `${o.mime} output (${bytes(o.data?.length)}) not shown`));
    }
    if (r.result !== null && r.result !== undefined) out.append(h('pre', { class: 'out result' }, r.result));
    if (r.error) {
      const tb = Array.isArray(r.error.traceback) ? r.error.traceback.join('\n') : (r.error.traceback || '');
      out.append(h('pre', { class: 'out' }, h('span', { class: 'stderr' }, `${r.error.name}: ${r.error.value}\n${tb}`)));
    }
    cells.prepend(out);
  } }, code, h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Run cell'),
    h('span', { class: 'muted', id: 'cell-help' }, 'Ctrl+Enter runs the cell in the sandbox\'s persistent Python kernel; variables stay between cells. The sample draws a plot.')));
  box.replaceChildren(ctx.can.write() ? form : h('p', { class: 'muted' }, 'This key may not run code.'), cells);
}
