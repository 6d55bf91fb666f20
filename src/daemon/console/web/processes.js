// A sandbox's background processes: start one, list them, follow one's output live (its
// logs over SSE: what the ring holds, then live output, then its exit), signal or kill it.
import { api, stream } from './api.js';
import { h, attempt, showError, when, frameText } from './ui.js';

export function processesTab(box, id, ctx) {
  const cmd = h('input', { id: 'proc-command', size: 60, 'aria-label': 'Background command',
                           placeholder: 'python3 -m http.server 8000', required: true });
  const tbody = h('tbody');
  const title = h('h2', { id: 'proc-title' });
  const out = h('pre', { class: 'out', id: 'proc-output', 'aria-live': 'polite', hidden: true });
  let follow = null;
  ctx.keep(box, () => follow?.abort());
  const load = async () => {
    const list = await attempt(() => api('GET', `/v1/sandboxes/${id}/processes`));
    if (!list) return;
    tbody.replaceChildren(...list.data.map((p) => h('tr', { 'data-id': p.id },
      h('td', { class: 'mono' }, p.id), h('td', { class: 'mono details' }, p.command),
      h('td', { class: `status-${p.status}` }, p.status),
      h('td', {}, p.exit_code ?? ''), h('td', { class: 'nowrap' }, when(p.started_at)),
      h('td', { class: 'actions' },
        h('button', { type: 'button', 'aria-label': `Follow ${p.id}`, onclick: () => watch(p) }, 'Logs'), ' ',
        ctx.can.write() && p.status === 'running' && h('button', { type: 'button', 'aria-label': `Stop ${p.id}`, onclick: async () => {
          await attempt(() => api('POST', `/v1/sandboxes/${id}/processes/${p.id}/signal`, { signal: 'TERM' }));
          load();
        } }, 'Stop'), ' ',
        ctx.can.write() && p.status === 'running' && h('button', { type: 'button', class: 'danger', 'aria-label': `Kill ${p.id}`, onclick: async () => {
          await attempt(() => api('DELETE', `/v1/sandboxes/${id}/processes/${p.id}`));
          load();
        } }, 'Kill')))));
    if (!list.data.length) tbody.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No background processes.')));
  };
  async function watch(p) {
    follow?.abort();
    const mine = new AbortController();
    follow = mine;
    out.replaceChildren();
    out.hidden = false;
    title.textContent = `${p.id}: ${p.command}`;
    try {
      await stream(`/v1/sandboxes/${id}/processes/${p.id}/logs`, undefined, (ev) => {
        if (ev.type === 'stdout' || ev.type === 'stderr') {
          out.append(h('span', { class: ev.type }, frameText(ev.data, ev.encoding)));
          out.scrollTop = out.scrollHeight;
        } else if (ev.type === 'exit') {
          out.append(h('span', { class: 'muted' }, `\n[${ev.status}, exit ${ev.exit_code}]\n`));
          load();
        }
      }, mine.signal);
    } catch (e) {
      if (e.name !== 'AbortError') showError(e);
    }
  }
  const form = h('form', { class: 'row', 'aria-label': 'Start a background process', onsubmit: async (e) => {
    e.preventDefault();
    const p = await attempt(() => api('POST', `/v1/sandboxes/${id}/processes`, { command: cmd.value }));
    if (!p) return;
    await load();
    watch(p);
  } }, h('label', { for: 'proc-command' }, 'Background command', cmd), h('button', { class: 'primary', type: 'submit' }, 'Start'));
  box.replaceChildren(ctx.can.write() ? form : '',
    h('table', { id: 'processes' }, h('thead', {}, h('tr', {},
      ['Process', 'Command', 'Status', 'Exit', 'Started', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody),
    title, out);
  load();
}
