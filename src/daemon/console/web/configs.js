// Sandbox configurations (docs/configs.md): the list, create one, and a configuration's
// page: its document (edited as JSON; secrets come back masked and a masked value sent back
// keeps the stored one), its environment variables (masked), the probe's checks, the
// sandboxes made from it and the templates query (configinfo.js), and its skills (docs/skills.md): add one from the catalog or as a bundle, follow an install's
// progress and transcript live, reinstall, stop, enable or disable, remove.
// Reading works with any key; changes need an admin's full-access key, and a configuration's
// skills are shown to admins only (spec 002's table): the API refuses the rest anyway.
import { api, stream, upload, enc } from './api.js';
import { h, attempt, showError, when, whenMs } from './ui.js';
import { inventorySection, templatesSection } from './configinfo.js';
import { installVars, guidance } from './skillextras.js';

const EXAMPLE = { template: 'base', env_vars: { GREETING: 'hello' }, network: { deny_egress_by_default: true, allow_out: ['pypi.org'] } };
const MASK = '********';

const configure = (ctx) => ctx.can.admin() && ctx.me.scope === 'full_access';

export async function configsPage(root, ctx) {
  const list = await attempt(() => api('GET', '/v1/sandbox-configs'));
  const name = h('input', { id: 'cfg-name', required: true, maxlength: 128, size: 24 });
  const desc = h('input', { id: 'cfg-desc', maxlength: 1024, size: 40 });
  const doc = h('textarea', { id: 'cfg-doc', class: 'code small', spellcheck: 'false' });
  doc.value = JSON.stringify(EXAMPLE, null, 2);
  const create = configure(ctx) && h('form', { class: 'card', 'aria-label': 'Create a configuration', onsubmit: async (e) => {
    e.preventDefault();
    const config = parseDoc(doc.value);
    if (!config) return;
    const c = await attempt(() => api('POST', '/v1/sandbox-configs', { name: name.value, description: desc.value, config }));
    if (c) location.hash = `#/config/${c.id}`;
  } }, h('div', { class: 'row' }, h('label', { for: 'cfg-name' }, 'Name', name), h('label', { for: 'cfg-desc' }, 'Description', desc)),
  h('label', { for: 'cfg-doc' }, 'Configuration (JSON: template, limits, env_vars, network, …)', doc),
  h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Create configuration')));
  const rows = (list?.data || []).map((c) => h('tr', { 'data-name': c.name },
    h('td', {}, h('a', { href: `#/config/${c.id}` }, c.name)), h('td', {}, c.description || ''),
    h('td', {}, c.sandbox_type), h('td', {}, c.config.template || 'base'),
    h('td', {}, Object.keys(c.config.env_vars || {}).length), h('td', { class: 'nowrap' }, when(c.updated_at))));
  root.replaceChildren(h('h1', {}, 'Configurations'),
    h('p', { class: 'muted' }, 'Named sandbox set-ups: template, limits, variables, network policy and skills.'),
    list ? workspacePolicy(list.workspace_scripts_disabled, configure(ctx)) : '',
    create || '',
    h('table', { id: 'configs' }, h('thead', {}, h('tr', {},
      ['Name', 'Description', 'Backend', 'Template', 'Variables', 'Updated'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No configurations.')))));
}

// The workspace's policy (PUT /v1/sandbox-configs/workspace-policy): when scripts are
// disabled, a skill install whose SKILL.md names an install script fails without running it
// (docs/configs.md). A switch for an admin's full-access key, a line of text for others.
function workspacePolicy(disabled, canChange) {
  const state = h('span', { id: 'workspace-scripts', 'aria-live': 'polite' });
  const show = (off) => { state.textContent = off ? 'disabled: skill install scripts are not run' : 'allowed'; };
  show(disabled);
  if (!canChange) return h('p', {}, 'Workspace scripts: ', state);
  const box = h('input', { id: 'workspace-scripts-disabled', type: 'checkbox', checked: !!disabled });
  box.checked = !!disabled;
  box.addEventListener('change', async () => {
    const r = await attempt(() => api('PUT', '/v1/sandbox-configs/workspace-policy', { scripts_disabled: box.checked }));
    if (r) show(r.workspace_scripts_disabled);
    box.checked = r ? r.workspace_scripts_disabled : !box.checked;
  });
  return h('div', { class: 'row' }, h('label', { class: 'inline', for: 'workspace-scripts-disabled' }, box,
    'Disable workspace scripts (skill install scripts)'), h('span', {}, 'Workspace scripts: ', state));
}

// The JSON typed into a configuration's editor, or null (the error shown).
function parseDoc(text) {
  try {
    const v = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch { /* below */ }
  showError(new Error('The configuration must be a JSON object.'));
  return null;
}

export async function configPage(root, ctx, id) {
  const c = await attempt(() => api('GET', `/v1/sandbox-configs/${enc(id)}`));
  const back = h('p', {}, h('a', { href: '#/configs' }, '← Configurations'));
  if (!c) { root.replaceChildren(back); return; }
  const admin = configure(ctx);
  const vars = Object.keys(c.config.env_vars || {});
  const skills = h('section', { id: 'skills' });
  const probe = h('section', { id: 'probe' });
  const inventory = h('section', { id: 'inventory' });
  const templates = h('section', { id: 'templates-query' });
  const title = h('span', { class: 'mono' });
  const meta = h('p', { class: 'muted' });
  const about = h('p', { id: 'cfg-about' });
  const show = (x) => {
    title.textContent = x.name;
    meta.textContent = `${x.id} · ${x.sandbox_type} · template ${x.config.template || 'base'} · updated ${when(x.updated_at)}`;
    about.textContent = x.description || '';
  };
  show(c);
  root.replaceChildren(back, h('h1', {}, 'Configuration ', title), meta, about,
    h('h2', {}, 'Environment variables'),
    h('table', { id: 'env-vars' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Value'))),
      h('tbody', {}, vars.length ? vars.map((n) => h('tr', {}, h('td', { class: 'mono' }, n),
        h('td', { class: 'mono muted', title: 'Sealed in the store; no answer ever carries the value' }, c.config.env_vars[n] === MASK ? '•••••••• (masked)' : c.config.env_vars[n])))
        : h('tr', {}, h('td', { colspan: 2, class: 'muted' }, 'None.')))),
    editor(c, admin, show), probe, inventory, templates, skills);
  probeSection(probe, c, admin);
  if (ctx.can.admin()) inventorySection(inventory, c);
  templatesSection(templates, c, admin, ctx, show);
  if (ctx.can.admin()) skillsSection(skills, c, admin, ctx);
  else skills.replaceChildren(h('h2', {}, 'Skills'), h('p', { class: 'muted' }, 'A configuration\'s skills are shown to admins only.'));
}

// saved(c): what the page shows of the configuration, after a save.
function editor(c, admin, saved) {
  const name = h('input', { id: 'cfg-name', required: true, maxlength: 128, size: 24, value: c.name });
  const desc = h('input', { id: 'cfg-desc', maxlength: 1024, size: 40, value: c.description || '' });
  const doc = h('textarea', { id: 'cfg-doc', class: 'code small', spellcheck: 'false', readonly: !admin });
  doc.value = JSON.stringify(c.config, null, 2);
  const note = h('span', { id: 'cfg-saved', class: 'muted', 'aria-live': 'polite' });
  if (!admin) return h('details', { class: 'card' }, h('summary', {}, 'The configuration document'), doc);
  return h('form', { class: 'card', 'aria-label': 'Edit the configuration', onsubmit: async (e) => {
    e.preventDefault();
    const config = parseDoc(doc.value);
    if (!config) return;
    const r = await attempt(() => api('PUT', `/v1/sandbox-configs/${c.id}`, { name: name.value, description: desc.value, config }));
    if (r) {
      note.textContent = `Saved at ${whenMs(Date.now())}.`;
      doc.value = JSON.stringify(r.config, null, 2);
      saved(r);
    }
  } }, h('h2', {}, 'Edit'),
  h('div', { class: 'row' }, h('label', { for: 'cfg-name' }, 'Name', name), h('label', { for: 'cfg-desc' }, 'Description', desc)),
  h('label', { for: 'cfg-doc' }, `Configuration (JSON; "${MASK}" keeps a stored secret)`, doc),
  h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Save'),
    h('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!confirm(`Delete configuration ${c.name}?`)) return;
      if (await attempt(() => api('DELETE', `/v1/sandbox-configs/${c.id}`))) location.hash = '#/configs';
    } }, 'Delete configuration'), note));
}

// The probe: the configuration checked by sbxd (deep: a sandbox made, a script run in it,
// the network reached from it, destroyed). A failing probe is a 200 with ok false.
function probeSection(box, c, admin) {
  const deep = h('input', { id: 'probe-deep', type: 'checkbox' });
  const out = h('div', { id: 'probe-result', 'aria-live': 'polite' });
  const form = admin && h('form', { class: 'row', 'aria-label': 'Probe the configuration', onsubmit: async (e) => {
    e.preventDefault();
    const btn = e.target.querySelector('button');
    btn.disabled = true;
    out.replaceChildren(h('p', { class: 'muted' }, deep.checked ? 'Probing (a sandbox is made and destroyed)…' : 'Probing…'));
    const r = await attempt(() => api('POST', '/v1/system/sandbox-check', { config_id: c.id, deep: deep.checked }));
    btn.disabled = false;
    if (!r) { out.replaceChildren(); return; }
    const mark = (ok) => (ok === true ? '✓ ok' : ok === false ? '✗ failed' : '– skipped');
    out.replaceChildren(h('p', {}, h('strong', { class: r.ok ? 'status-running' : 'status-failed' }, r.ok ? 'All checks pass' : 'A check fails'),
      ` · provider ${r.provider} · can: ${Object.entries(r.capabilities || {}).filter(([, v]) => v).map(([k]) => k).join(', ')}`),
    h('table', { id: 'probe-checks' }, h('thead', {}, h('tr', {},
      ['Check', 'Result', 'Message', 'Reason', 'Took'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, r.checks.map((k) => h('tr', { 'data-check': k.name },
      h('td', { class: 'mono' }, k.name),
      h('td', { class: k.ok === true ? 'status-running' : k.ok === false ? 'status-failed' : 'muted' }, mark(k.ok)),
      h('td', { class: 'details' }, k.message || ''), h('td', { class: 'mono' }, k.reason || ''),
      h('td', { class: 'nowrap' }, k.latency_ms !== undefined && k.latency_ms !== null ? `${k.latency_ms} ms` : ''))))));
  } }, h('label', { for: 'probe-deep', class: 'inline' }, deep, 'deep (create a sandbox and run a script)'),
  h('button', { type: 'submit' }, 'Run the probe'));
  box.replaceChildren(h('h2', {}, 'Probe'), form || h('p', { class: 'muted' }, 'Probing needs an admin\'s full-access key.'), out);
}

function skillsSection(box, c, admin, ctx) {
  const base = `/v1/sandbox-configs/${c.id}/skills`;
  const tbody = h('tbody');
  const live = h('section', { id: 'install', 'aria-live': 'polite' });
  const vars = h('section', { id: 'install-vars' });
  let follow = null;
  ctx.keep(box, () => follow?.abort());
  // An install's variables below the list, shown again (from the reloaded list) after a change.
  const showVars = (s) => installVars(vars, `${base}/${s.id}`, s, async () => {
    const again = (await load()).find((x) => x.id === s.id);
    if (again) showVars(again);
  });
  const load = async () => {
    const list = await attempt(() => api('GET', base));
    if (!list) return [];
    tbody.replaceChildren(...list.data.map((s) => h('tr', { 'data-name': s.name },
      h('td', { class: 'mono' }, s.name), h('td', {}, s.version), h('td', { class: `status-${s.status === 'ready' ? 'running' : s.status}` }, s.status),
      h('td', {}, s.enabled ? 'yes' : 'no'), h('td', {}, s.served?.version || ''),
      h('td', { class: 'details' }, (s.envs || []).map((v) => `${v.name}${v.required ? '*' : ''}: ${v.is_set ? 'set' : 'not set'}`).join('\n')),
      h('td', { class: 'details' }, s.error || ''), h('td', { class: 'nowrap' }, when(s.updated_at)),
      h('td', { class: 'actions' },
        h('button', { type: 'button', 'aria-label': `Follow the install of ${s.name}`, onclick: () => watch(s) }, 'Progress'), ' ',
        admin && s.status === 'installing' && h('button', { type: 'button', 'aria-label': `Stop the install of ${s.name}`, onclick: async () => {
          await attempt(() => api('POST', `${base}/${s.id}/stop`));
          load();
        } }, 'Stop'), ' ',
        admin && s.status !== 'installing' && h('button', { type: 'button', 'aria-label': `Reinstall ${s.name}`, onclick: async () => {
          if (await attempt(() => api('POST', `${base}/${s.id}/reinstall`, {}))) { await load(); watch(s); }
        } }, 'Reinstall'), ' ',
        admin && h('button', { type: 'button', 'aria-label': `${s.enabled ? 'Disable' : 'Enable'} ${s.name}`, onclick: async () => {
          await attempt(() => api('PATCH', `${base}/${s.id}`, { enabled: !s.enabled }));
          load();
        } }, s.enabled ? 'Disable' : 'Enable'), ' ',
        admin && (s.envs || []).length > 0 && h('button', { type: 'button', 'aria-label': `Variables of ${s.name}`,
          onclick: () => showVars(s) }, 'Variables'), ' ',
        admin && h('button', { type: 'button', class: 'danger', 'aria-label': `Remove ${s.name}`, onclick: async () => {
          if (!confirm(`Remove skill ${s.name} from ${c.name}?`)) return;
          await attempt(() => api('DELETE', `${base}/${s.id}`));
          load();
        } }, 'Remove')))));
    if (!list.data.length) tbody.append(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No skills installed.')));
    return list.data;
  };

  // An install's round live: its events (percent, stage, the script's output) and its
  // transcript (steps, output, guidance, the result), each from its start, then as it goes.
  async function watch(s) {
    follow?.abort();
    const mine = new AbortController();
    follow = mine;
    const bar = h('progress', { id: 'install-progress', max: 100, value: 0 });
    const stage = h('span', { id: 'install-stage', class: 'mono' }, 'queued');
    const log = h('pre', { class: 'out', id: 'install-log' });
    const transcript = h('pre', { class: 'out', id: 'install-transcript' });
    const steer = h('div', { id: 'guidance' });
    live.replaceChildren(h('h2', {}, `Installing ${s.name}`), h('div', { class: 'row' }, bar, stage),
      h('div', { class: 'split' }, h('div', {}, h('h3', {}, 'Progress log'), log), h('div', {}, h('h3', {}, 'Transcript'), transcript)),
      steer);
    // Admins guide the round while it runs; the box goes when it ends.
    const guided = admin ? guidance(steer, `${base}/${s.id}`) : null;
    let lastStage = null;
    const lines = logLines(log);
    let transcriptStarted = false;
    const followTranscript = async () => {
      transcriptStarted = true;
      try {
        const status = await stream(`${base}/${s.id}/transcript`, undefined, (t) => {
          const text = t.kind === 'step' ? `$ ${t.text}\n` : t.kind === 'output' ? t.text : `[${t.kind}] ${t.text}\n`;
          transcript.append(h('span', { class: t.stream === 'stderr' ? 'stderr' : t.kind }, text));
          transcript.scrollTop = transcript.scrollHeight;
        }, mine.signal);
        if (status === 204) transcriptStarted = false; // queued, no step yet: asked again at the next event
      } catch (e) {
        if (e.name !== 'AbortError' && e.code !== 'transcript_not_found') showError(e);
      }
    };
    try {
      await stream(`${base}/${s.id}/install-events`, undefined, (ev) => {
        if (ev.percent !== undefined) bar.value = ev.percent;
        if (ev.stage) stage.textContent = `${ev.stage}${ev.percent !== undefined ? ` · ${ev.percent}%` : ''}`;
        // Whether the round takes guidance (and the messages' state) asked again as it moves on.
        if (ev.stage !== lastStage) guided?.then((reload) => reload());
        lastStage = ev.stage;
        if (ev.log) { lines.add(ev.log, ev.stream); log.scrollTop = log.scrollHeight; }
        if (!transcriptStarted && ev.stage && ev.stage !== 'queued') followTranscript();
        if (ev.done) {
          lines.end();
          stage.textContent = `${ev.status || ev.stage} · done`;
          stage.className = `mono status-${ev.status === 'ready' ? 'running' : 'failed'}`;
          load();
        }
      }, mine.signal);
      if (!transcriptStarted) followTranscript();
    } catch (e) {
      if (e.name !== 'AbortError') showError(e);
    }
  }

  const catalog = h('select', { id: 'catalog-skill' });
  const picker = h('input', { id: 'skill-bundle', type: 'file', accept: '.zip,.tar,.tgz,.tar.gz,application/zip' });
  const progress = h('progress', { id: 'bundle-progress', max: 1, value: 0, hidden: true });
  const add = admin && h('div', { class: 'card' },
    h('form', { class: 'row', 'aria-label': 'Install from the catalog', onsubmit: async (e) => {
      e.preventDefault();
      const r = await attempt(() => api('POST', `/v1/skills/catalog/${enc(catalog.value)}/install`, { sandbox_config_ids: [c.id] }));
      if (!r) return;
      if (r.errors?.length) showError(new Error(`${r.errors[0].error.code}: ${r.errors[0].error.message}`));
      await load();
      const sid = r.installs?.[0]?.skill_id;
      if (sid) watch({ id: sid, name: catalog.selectedOptions[0]?.dataset.name || catalog.value });
    } }, h('label', { for: 'catalog-skill' }, 'Skill from the catalog', catalog), h('button', { type: 'submit' }, 'Install')),
    h('div', { class: 'row' }, h('label', { for: 'skill-bundle' }, 'Or a bundle (zip or tar with a SKILL.md)', picker), progress));
  picker.addEventListener('change', async () => {
    const f = picker.files[0];
    if (!f) return;
    progress.hidden = false;
    const r = await attempt(() => upload(base, f, (done, total) => { progress.max = total; progress.value = done; },
      { method: 'POST', type: /\.zip$/i.test(f.name) ? 'application/zip' : /gz$/i.test(f.name) ? 'application/gzip' : 'application/x-tar' }));
    progress.hidden = true;
    picker.value = '';
    if (!r) return;
    const installs = await load();
    watch({ id: r.skill_id, name: installs.find((s) => s.id === r.skill_id)?.name || f.name });
  });
  box.replaceChildren(h('h2', {}, 'Skills'), add || '',
    h('table', { id: 'config-skills' }, h('thead', {}, h('tr', {},
      ['Skill', 'Version', 'Status', 'Enabled', 'Served', 'Variables', 'Error', 'Updated', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody),
    vars, live);
  if (admin) {
    api('GET', '/v1/skills/catalog').then((cat) => catalog.replaceChildren(...cat.data.map((s) =>
      h('option', { value: s.id, 'data-name': s.name }, `${s.name} ${s.version}${s.builtin ? ' (shipped)' : ''}`)))).catch(showError);
  }
  load();
}

// The progress log's text: the script's output comes in chunks cut where a read ended (a
// chunk's "stream" says stdout or stderr), sbxd's notes (no stream) as lines with no newline.
// A stream's unfinished line waits at the end, so a note goes on a line of its own before it
// and the script's line shows whole once its newline comes.
function logLines(pre) {
  const pending = { stdout: h('span', {}), stderr: h('span', { class: 'stderr' }) };
  pre.append(pending.stdout, pending.stderr);
  const add = (text, stream) => {
    const tail = pending[stream];
    if (!tail) {
      pending.stdout.before(text.endsWith('\n') ? text : `${text}\n`);
      return;
    }
    const all = tail.textContent + text;
    const cut = all.lastIndexOf('\n') + 1;
    if (cut) pending.stdout.before(h('span', { class: stream === 'stderr' ? 'stderr' : null }, all.slice(0, cut)));
    tail.textContent = all.slice(cut);
  };
  return {
    add,
    // The round's end: what is left unfinished, shown as the lines it is.
    end: () => {
      for (const s of ['stdout', 'stderr']) if (pending[s].textContent) add('\n', s);
    },
  };
}
