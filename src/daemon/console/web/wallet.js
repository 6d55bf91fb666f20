// The wallet (docs/billing.md): the balance and what is unpaid, money in and out per UTC day
// over the last 14 days (from the ledger, newest 1000 entries), the ledger itself, and for
// an admin a top-up or adjustment and any user's wallet (`?user=`).
import { api, enc } from './api.js';
import { h, attempt, whenMs, details } from './ui.js';
import { barChart, lastDays } from './chart.js';
import { userPicker } from './usage.js';

const DAYS = 14;
const eur = (micro) => `${(micro / 1e6).toFixed(2)} €`;

export async function walletPage(root, ctx, query) {
  const user = new URLSearchParams(query).get('user') || '';
  const who = user ? `user=${enc(user)}&` : '';
  const w = await attempt(() => api('GET', `/v1/wallet?${who}`));
  const ledger = w && await attempt(() => api('GET', `/v1/wallet/ledger?${who}limit=1000`));
  if (!w || !ledger) { root.replaceChildren(h('h1', {}, 'Wallet'), userPicker(ctx, 'wallet', user)); return; }
  const days = lastDays(DAYS);
  const charged = days.map(() => 0);
  const added = days.map(() => 0);
  for (const e of ledger.data) {
    const i = days.indexOf(new Date(e.ts_ms).toISOString().slice(0, 10));
    if (i < 0) continue;
    if (e.amount_micro_eur < 0) charged[i] -= e.amount_micro_eur / 1e6;
    else added[i] += e.amount_micro_eur / 1e6;
  }
  const amount = h('input', { id: 'topup-amount', type: 'number', step: '0.01', required: true, size: 8 });
  const source = h('select', { id: 'topup-source' }, h('option', { value: 'top_up' }, 'top-up'), h('option', { value: 'adjustment' }, 'adjustment'));
  const note = h('input', { id: 'topup-note', size: 24, maxlength: 200 });
  const topup = ctx.can.admin() && h('form', { class: 'row card', 'aria-label': 'Top up', onsubmit: async (e) => {
    e.preventDefault();
    const r = await attempt(() => api('POST', '/v1/wallet/top-up', { user: w.user, amount_micro_eur: Math.round(Number(amount.value) * 1e6),
      source: source.value, ...(note.value ? { note: note.value } : {}) }));
    if (r) window.dispatchEvent(new HashChangeEvent('hashchange'));
  } }, h('strong', {}, `Add to ${w.user}'s wallet`), h('label', { for: 'topup-amount' }, 'Amount (€)', amount),
  h('label', { for: 'topup-source' }, 'Kind', source), h('label', { for: 'topup-note' }, 'Note', note),
  h('button', { class: 'primary', type: 'submit' }, 'Add'));
  root.replaceChildren(h('h1', {}, 'Wallet'), userPicker(ctx, 'wallet', user),
    h('div', { class: 'row card', id: 'wallet' },
      h('span', {}, h('strong', {}, w.user), ': balance ', h('strong', { id: 'balance' }, eur(w.balance_micro_eur))),
      w.unpaid_micro_eur ? h('span', { class: 'scan-infected' }, `unpaid ${eur(w.unpaid_micro_eur)}: creates and runs are refused`) : '',
      h('span', { class: 'muted' }, `settled until ${whenMs(w.settled_until_ms)}`)),
    topup || '',
    h('h2', {}, 'Money per UTC day'),
    h('div', { class: 'card', id: 'wallet-chart' }, barChart(days,
      [{ label: 'charged', values: charged }, { label: 'added', values: added }], (v) => `${v.toFixed(2)} €`,
      'Euros charged and added per day')),
    h('h2', {}, 'Ledger'),
    h('table', { id: 'ledger' }, h('thead', {}, h('tr', {},
      ['#', 'Time', 'Kind', 'Amount', 'Balance after', 'Interval', 'Details'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, ledger.data.length ? ledger.data.map((e) => h('tr', {},
      h('td', {}, e.id), h('td', { class: 'nowrap' }, whenMs(e.ts_ms)), h('td', {}, e.source),
      h('td', { class: e.amount_micro_eur < 0 ? 'stderr-text' : '' }, eur(e.amount_micro_eur)),
      h('td', {}, eur(e.balance_after_micro_eur)),
      h('td', { class: 'nowrap' }, e.interval ? `${whenMs(e.interval.start_ms)} – ${whenMs(e.interval.end_ms).slice(11)}` : ''),
      h('td', { class: 'mono details' }, details(e.details))))
      : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No ledger entries.')))));
}
