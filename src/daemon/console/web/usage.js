// Usage: a user's metered exec and v2 running time over the last 14 UTC days, bars a day,
// with the range's totals per key. GET /v1/usage sums a range, so a day is a range of one.
// An admin may look at another user's (`?user=`, in the page's address).
import { api, enc } from './api.js';
import { h, attempt } from './ui.js';
import { barChart, lastDays } from './chart.js';

const DAYS = 14;

// The "whose" form of the admin pages: a user name kept in the address (#/page?user=…).
export function userPicker(ctx, page, user) {
  if (!ctx.can.admin()) return '';
  const input = h('input', { id: 'for-user', name: 'user', value: user || '', size: 18, placeholder: ctx.me.user });
  return h('form', { class: 'row card', 'aria-label': 'Whose', onsubmit: (e) => {
    e.preventDefault();
    location.hash = input.value ? `#/${page}?user=${enc(input.value)}` : `#/${page}`;
  } }, h('label', { for: 'for-user' }, 'User (admin: any)', input), h('button', { type: 'submit' }, 'Show'));
}

export async function usagePage(root, ctx, query) {
  const user = new URLSearchParams(query).get('user') || '';
  const who = user ? `&user=${enc(user)}` : '';
  const days = lastDays(DAYS);
  root.replaceChildren(h('h1', {}, 'Usage'), h('p', { class: 'muted' }, 'Loading…'));
  const per = await attempt(() => Promise.all(days.map((d) => api('GET', `/v1/usage?from=${d}&to=${d}${who}`))));
  const range = await attempt(() => api('GET', `/v1/usage?from=${days[0]}&to=${days[DAYS - 1]}${who}`));
  if (!per || !range) { root.replaceChildren(h('h1', {}, 'Usage'), userPicker(ctx, 'usage', user)); return; }
  const secs = (k) => per.map((u) => (u.total[k] || 0) / 1000);
  const fmt = (v) => (v >= 3600 ? `${(v / 3600).toFixed(1)} h` : `${v.toFixed(1)} s`);
  root.replaceChildren(h('h1', {}, 'Usage'), userPicker(ctx, 'usage', user),
    h('p', {}, `${range.user}: time per UTC day, ${days[0]} to ${days[DAYS - 1]}. Today `,
      `${range.today.exec_seconds ?? 0} s of exec`, range.today.daily_limit_seconds ? ` of ${range.today.daily_limit_seconds} s a day` : '', '.'),
    h('div', { class: 'card', id: 'usage-chart' }, barChart(days,
      [{ label: 'exec', values: secs('exec_ms') }, { label: 'v2 running', values: secs('v2_running_ms') }],
      fmt, 'Exec and v2 running seconds per day')),
    h('h2', {}, 'By key, over the 14 days'),
    h('table', { id: 'usage' }, h('thead', {}, h('tr', {},
      ['Key', 'Exec', 'v2 running', 'Snapshot byte-hours'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, [...range.keys, { key_id: 'total', ...range.total }].map((k) => h('tr', {},
      h('td', { class: 'mono' }, k.key_id), h('td', {}, `${((k.exec_ms || 0) / 1000).toFixed(1)} s`),
      h('td', {}, `${((k.v2_running_ms || 0) / 1000).toFixed(1)} s`), h('td', {}, k.snapshot_byte_hours ?? 0))))));
}
