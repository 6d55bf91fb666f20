// Volumes (docs/volumes.md): the key's user's volumes, create and delete one, and a
// volume's files in the same browser as a sandbox's workspace.
import { api, enc } from './api.js';
import { h, attempt, when, bytes } from './ui.js';
import { fileBrowser } from './files.js';

export async function volumesPage(root, ctx) {
  const tbody = h('tbody');
  const name = h('input', { id: 'vol-name', required: true, pattern: '[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,62}', size: 20 });
  const size = h('input', { id: 'vol-size', type: 'number', min: 1, value: 1024, size: 7 });
  const load = async () => {
    const list = await attempt(() => api('GET', '/v1/volumes'));
    if (!list) return;
    tbody.replaceChildren(...list.data.map((v) => h('tr', { 'data-name': v.name },
      h('td', {}, h('a', { href: `#/volume/${v.id}` }, v.name)), h('td', { class: 'mono' }, v.id),
      h('td', {}, `${bytes(v.used_bytes)} of ${bytes(v.size_bytes)}`),
      h('td', { class: 'details' }, (v.mounted_in || []).map((m) => `${m.sandbox_id}:${m.path}${m.read_only ? ' (ro)' : ''}`).join('\n')),
      h('td', {}, v.node || ''), h('td', { class: 'nowrap' }, when(v.created_at)),
      h('td', {}, ctx.can.write() && h('button', { type: 'button', class: 'danger', 'aria-label': `Delete volume ${v.name}`, onclick: async () => {
        if (!confirm(`Delete volume ${v.name} and its files?`)) return;
        await attempt(() => api('DELETE', `/v1/volumes/${v.id}`));
        load();
      } }, 'Delete')))));
    if (!list.data.length) tbody.append(h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No volumes.')));
  };
  const create = ctx.can.write() && h('form', { class: 'row card', 'aria-label': 'Create a volume', onsubmit: async (e) => {
    e.preventDefault();
    if (await attempt(() => api('POST', '/v1/volumes', { name: name.value, size_mb: Number(size.value) }))) {
      name.value = '';
      load();
    }
  } }, h('label', { for: 'vol-name' }, 'Name', name), h('label', { for: 'vol-size' }, 'Size (MiB)', size),
  h('button', { class: 'primary', type: 'submit' }, 'Create volume'));
  root.replaceChildren(h('h1', {}, 'Volumes'),
    h('p', { class: 'muted' }, 'Storage that outlives sandboxes: a configuration\'s volume_mount mounts one into each of its sandboxes.'),
    create || '',
    h('table', { id: 'volumes' }, h('thead', {}, h('tr', {},
      ['Name', 'Id', 'Used', 'Mounted in', 'Node', 'Created', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody));
  await load();
}

export async function volumePage(root, ctx, id) {
  const v = await attempt(() => api('GET', `/v1/volumes/${enc(id)}`));
  const back = h('p', {}, h('a', { href: '#/volumes' }, '← Volumes'));
  if (!v) { root.replaceChildren(back); return; }
  const box = h('section', { id: 'volume-files' });
  root.replaceChildren(back, h('h1', {}, 'Volume ', h('span', { class: 'mono' }, v.name)),
    h('p', { class: 'muted' }, `${v.id} · ${bytes(v.used_bytes)} of ${bytes(v.size_bytes)} used`), box);
  fileBrowser(box, `/v1/volumes/${v.id}`, ctx.can.write(), { root: v.name,
    mkdir: (path) => api('POST', `/v1/volumes/${v.id}/directories`, { path }) });
}
