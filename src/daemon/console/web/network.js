// A sandbox's ways in and out: preview links to its ports (signed, expiring; issued by
// POST /v1/sandboxes/{id}/preview, never stored, so the page lists the links it issued and
// the audit log's record of every one), and its egress log: every connection the proxy
// judged, with its verdict and reason.
import { api } from './api.js';
import { h, attempt, whenMs, when, bytes } from './ui.js';

export function previewTab(box, id, ctx) {
  const port = h('input', { id: 'preview-port', type: 'number', min: 1024, max: 65535, value: 8000, required: true, size: 6 });
  const ttl = h('input', { id: 'preview-ttl', type: 'number', min: 60, max: 3600, value: 900, size: 6 });
  const wait = h('input', { id: 'preview-wait', type: 'number', min: 0, max: 60, value: 10, size: 4 });
  const issued = h('ul', { id: 'preview-links' });
  const past = h('tbody');
  const loadPast = async () => {
    const page = await attempt(() => api('GET', `/v1/audit?sandbox_id=${id}&action=sandbox.preview&limit=100`));
    if (!page) return;
    past.replaceChildren(...page.data.map((a) => h('tr', {},
      h('td', { class: 'nowrap' }, whenMs(a.ts_ms)), h('td', {}, a.user), h('td', {}, a.details?.port ?? ''),
      h('td', { class: 'nowrap' }, a.details?.expires_at ? when(a.details.expires_at) : ''), h('td', {}, a.outcome))));
    if (!page.data.length) past.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No links issued.')));
  };
  const form = h('form', { class: 'row card', 'aria-label': 'Issue a preview link', onsubmit: async (e) => {
    e.preventDefault();
    const btn = e.target.querySelector('button');
    btn.disabled = true;
    const p = await attempt(() => api('POST', `/v1/sandboxes/${id}/preview`,
      { port: Number(port.value), ttl_seconds: Number(ttl.value), wait_seconds: Number(wait.value) }));
    btn.disabled = false;
    if (!p) return;
    issued.prepend(h('li', { 'data-port': p.port }, `port ${p.port}: `,
      h('a', { href: p.url, target: '_blank', rel: 'noopener noreferrer', class: 'mono' }, p.url),
      h('span', { class: 'muted' }, ` until ${when(p.expires_at)}`)));
    loadPast();
  } }, h('label', { for: 'preview-port' }, 'Port', port), h('label', { for: 'preview-ttl' }, 'Valid for (s)', ttl),
  h('label', { for: 'preview-wait' }, 'Wait for a listener (s)', wait), h('button', { class: 'primary', type: 'submit' }, 'Issue link'));
  box.replaceChildren(
    h('p', { class: 'muted' }, 'A link reaches a port of the sandbox without a key until it expires: share it with care. Start a server in the Processes tab first.'),
    ctx.can.write() ? form : h('p', { class: 'muted' }, 'This key may not issue links.'),
    issued, h('h2', {}, 'Links issued (from the audit log; the links themselves are not kept)'),
    h('table', { id: 'previews' }, h('thead', {}, h('tr', {},
      ['Time', 'User', 'Port', 'Expires', 'Outcome'].map((x) => h('th', { scope: 'col' }, x)))), past));
  loadPast();
}

function policyText(p) {
  if (!p) return 'the default';
  if (p.mode === 'allowlist') return `allowlist: ${(p.domains || []).join(', ')}`;
  if (p.mode === 'preset') return `preset ${p.preset}`;
  return p.mode;
}

// An egress policy chosen in a form: a select (the operator's default when `withDefault`, none,
// a preset, an allowlist) and the domains field the allowlist shows. policy() is the API's
// policy object, or null for the default.
export function egressPicker(idp, withDefault) {
  const select = h('select', { id: idp }, withDefault && h('option', { value: '' }, 'the default'),
    h('option', { value: 'none' }, 'none'), h('option', { value: 'pypi' }, 'PyPI only'),
    h('option', { value: 'npm' }, 'npm only'), h('option', { value: 'allowlist' }, 'these domains…'));
  const domains = h('input', { id: `${idp}-domains`, size: 28, placeholder: 'pypi.org github.com' });
  const domainsLabel = h('label', { for: `${idp}-domains`, hidden: true }, 'Allowed domains', domains);
  select.addEventListener('change', () => { domainsLabel.hidden = select.value !== 'allowlist'; });
  const policy = () => {
    const v = select.value;
    if (!v) return null;
    if (v === 'none') return { mode: 'none' };
    if (v === 'allowlist') return { mode: 'allowlist', domains: domains.value.split(/[\s,]+/).filter(Boolean) };
    return { mode: 'preset', preset: v };
  };
  return { controls: [h('label', { for: idp }, 'Network egress', select), domainsLabel], policy };
}

// The sandbox's policy and its connection log; a key that may change the sandbox sets a new
// policy (PUT …/egress: connections it no longer allows are cut at once, docs/egress.md).
export async function egressTab(box, id, canWrite) {
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true }, 'Older connections…');
  const policy = h('p', { id: 'egress-policy' });
  let before = null;
  const load = async (append) => {
    const page = await attempt(() => api('GET', `/v1/sandboxes/${id}/egress?limit=100${append && before ? `&before=${before}` : ''}`));
    if (!page) return;
    policy.replaceChildren(h('strong', {}, 'Policy: '), policyText(page.policy));
    const rows = page.data.map((c) => h('tr', { 'data-id': c.id },
      h('td', { class: 'nowrap' }, whenMs(c.started_at_ms)), h('td', {}, c.method), h('td', { class: 'mono' }, `${c.host}:${c.port}`),
      h('td', { class: 'mono' }, c.address || ''),
      h('td', { class: c.verdict === 'allowed' ? 'status-running' : 'status-failed' }, c.verdict),
      h('td', { class: 'details' }, c.reason || ''),
      h('td', { class: 'nowrap' }, `${bytes(c.bytes_sent)} ↑ ${bytes(c.bytes_received)} ↓`),
      h('td', { class: 'nowrap' }, c.ended_at_ms ? `${c.ended_at_ms - c.started_at_ms} ms` : 'open')));
    if (append) tbody.append(...rows); else tbody.replaceChildren(...rows);
    if (!append && !rows.length) tbody.append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No connections yet.')));
    before = page.data.length ? page.data[page.data.length - 1].id : before;
    more.hidden = !page.has_more;
  };
  more.addEventListener('click', () => load(true));
  const pick = egressPicker('egress-change', false);
  const change = canWrite && h('form', { class: 'row', 'aria-label': 'Change the egress policy', onsubmit: async (e) => {
    e.preventDefault();
    if (await attempt(() => api('PUT', `/v1/sandboxes/${id}/egress`, pick.policy())) !== undefined) load(false);
  } }, ...pick.controls, h('button', { type: 'submit' }, 'Set policy'));
  box.replaceChildren(policy, change || '', h('div', { class: 'row' }, h('button', { type: 'button', onclick: () => load(false) }, 'Refresh')),
    h('table', { id: 'egress' }, h('thead', {}, h('tr', {},
      ['Time', 'Method', 'Host', 'Address', 'Verdict', 'Reason', 'Bytes', 'Took'].map((x) => h('th', { scope: 'col' }, x)))), tbody), more);
  await load(false);
}
