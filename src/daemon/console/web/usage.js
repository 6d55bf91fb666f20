// Usage: the key's user's metered exec time over the last 14 UTC days, a bar a day, with
// the range's totals per key. GET /v1/usage sums a range, so a day is a range of one.
import { api } from './api.js';
import { h, attempt } from './ui.js';

const DAYS = 14;
const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// A bar chart of values (seconds) by day, labelled; plain SVG, no library.
function chart(days, values) {
  const W = 900, H = 240, pad = 40, bw = (W - pad * 2) / days.length;
  const max = Math.max(1, ...values);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img',
                            'aria-label': 'Exec seconds per day', class: 'chart' });
  root.append(svg('line', { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: '#8a93a6' }));
  root.append(svg('text', { x: pad - 6, y: pad - 8, 'text-anchor': 'end', 'font-size': 11 }, `${max.toFixed(1)} s`));
  days.forEach((d, i) => {
    const bh = (values[i] / max) * (H - pad * 2);
    const x = pad + i * bw + bw * 0.15;
    root.append(svg('rect', { x, y: H - pad - bh, width: bw * 0.7, height: Math.max(bh, 0), fill: '#2456c7' },
                    undefined));
    root.lastChild.append(svg('title', {}, `${d}: ${values[i].toFixed(1)} s`));
    root.append(svg('text', { x: x + bw * 0.35, y: H - pad + 14, 'text-anchor': 'middle', 'font-size': 10 }, d.slice(5)));
    if (values[i]) root.append(svg('text', { x: x + bw * 0.35, y: H - pad - bh - 4, 'text-anchor': 'middle', 'font-size': 10 }, values[i].toFixed(1)));
  });
  return root;
}

export async function usagePage(root) {
  const today = new Date();
  const days = [...Array(DAYS).keys()].reverse().map((n) =>
    new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - n)).toISOString().slice(0, 10));
  root.replaceChildren(h('h1', {}, 'Usage'), h('p', { class: 'muted' }, 'Loading…'));
  const per = await attempt(() => Promise.all(days.map((d) => api('GET', `/v1/usage?from=${d}&to=${d}`))));
  const range = await attempt(() => api('GET', `/v1/usage?from=${days[0]}&to=${days[DAYS - 1]}`));
  if (!per || !range) return;
  const secs = per.map((u) => (u.total.exec_ms || 0) / 1000);
  root.replaceChildren(h('h1', {}, 'Usage'),
    h('p', {}, `${range.user}: exec time per UTC day, ${days[0]} to ${days[DAYS - 1]}. Today `,
      `${range.today.exec_seconds ?? 0} s`, range.today.daily_limit_seconds ? ` of ${range.today.daily_limit_seconds} s a day` : '', '.'),
    h('div', { class: 'card', id: 'usage-chart' }, chart(days, secs)),
    h('h2', {}, 'By key, over the 14 days'),
    h('table', { id: 'usage' }, h('thead', {}, h('tr', {},
      ['Key', 'Exec', 'v2 running', 'Snapshot byte-hours'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, [...range.keys, { key_id: 'total', ...range.total }].map((k) => h('tr', {},
      h('td', { class: 'mono' }, k.key_id), h('td', {}, `${((k.exec_ms || 0) / 1000).toFixed(1)} s`),
      h('td', {}, `${((k.v2_running_ms || 0) / 1000).toFixed(1)} s`), h('td', {}, k.snapshot_byte_hours ?? 0))))));
}
