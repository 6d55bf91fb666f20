// A file browser over a files API: a sandbox's workspace (/v1/sandboxes/{id}) or a volume
// (/v1/volumes/{id}), which list, upload, download and delete the same way. Directory by
// directory; upload with progress; a file's name previews it (images whole, text its first
// 64 KiB, a PDF drawn page by page by pdf.js: pdfview.js).
import { api, upload, blob, encPath } from './api.js';
import { h, attempt, when, bytes } from './ui.js';
import { showPdf, closePdf } from './pdfview.js';

// base: the API path the files hang off; root: how the browser names the top (/workspace);
// mkdir: a path → promise that makes that directory, when the API has a route for it.
export function fileBrowser(box, base, canWrite, { root = '', mkdir = null } = {}) {
  let dir = '';
  const where = h('span', { id: 'cwd', class: 'mono' });
  const tbody = h('tbody');
  const shown = h('section', { id: 'preview', 'aria-live': 'polite' });
  const progress = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true });
  const picker = h('input', { id: 'upload', type: 'file', multiple: true });
  const newDir = h('input', { id: 'mkdir', size: 18, 'aria-label': 'New directory', placeholder: 'new directory' });
  const file = (rel) => `${base}/files/${encPath(rel)}`;
  const load = async () => {
    where.textContent = `${root}/${dir}`;
    const q = dir ? `?path=${encodeURIComponent(dir)}` : '';
    const list = await attempt(() => api('GET', `${base}/files${q}`));
    if (!list) return;
    const rows = [];
    if (dir) rows.push(h('tr', {}, h('td', { colspan: 5 }, h('a', { href: '#', onclick: (e) => { e.preventDefault(); dir = dir.split('/').slice(0, -1).join('/'); load(); } }, '..'))));
    for (const f of list.data) {
      const name = f.path.split('/').pop();
      const rel = dir ? `${dir}/${name}` : name;
      const nameCell = f.type === 'directory'
        ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); dir = rel; load(); } }, `${name}/`)
        : h('button', { type: 'button', class: 'link mono', 'aria-label': `Preview ${rel}`, onclick: () => preview(file(rel), rel, f.size, shown) }, name);
      rows.push(h('tr', { 'data-path': rel },
        h('td', {}, nameCell), h('td', {}, f.type), h('td', {}, f.type === 'file' ? bytes(f.size) : ''),
        h('td', {}, when(f.mtime)),
        h('td', { class: 'actions' },
          f.type === 'file' && h('button', { type: 'button', 'aria-label': `Download ${rel}`, onclick: () => download(file(rel), rel) }, 'Download'), ' ',
          canWrite && h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${rel}`, onclick: async () => {
            if (!confirm(`Delete ${root}/${rel}?`)) return;
            await attempt(() => api('DELETE', file(rel)));
            load();
          } }, 'Delete'))));
    }
    if (!list.data.length) rows.push(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'Empty.')));
    tbody.replaceChildren(...rows);
  };
  picker.addEventListener('change', async () => {
    for (const f of picker.files) {
      progress.hidden = false;
      progress.value = 0;
      await attempt(() => upload(file(dir ? `${dir}/${f.name}` : f.name), f, (done, total) => {
        progress.max = total;
        progress.value = done;
      }));
      progress.hidden = true;
    }
    picker.value = '';
    load();
  });
  const mk = canWrite && mkdir && h('form', { class: 'row', 'aria-label': 'Make a directory', onsubmit: async (e) => {
    e.preventDefault();
    if (!newDir.value) return;
    if (await attempt(() => mkdir(dir ? `${dir}/${newDir.value}` : newDir.value)) !== undefined) newDir.value = '';
    load();
  } }, newDir, h('button', { type: 'submit' }, 'Make directory'));
  box.replaceChildren(h('div', { class: 'row' }, h('strong', {}, 'Directory '), where,
    h('button', { type: 'button', onclick: load }, 'Refresh')),
  canWrite ? h('div', { class: 'row' }, h('label', { for: 'upload' }, 'Upload files into this directory', picker), progress, mk || '') : '',
  h('table', { id: 'files' }, h('thead', {}, h('tr', {},
    ['Name', 'Type', 'Size', 'Modified', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody), shown);
  load();
}

const IMAGES = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp' };
const PREVIEW_TEXT_MAX = 64 * 1024;

// Images are shown whole; a PDF (by its magic bytes) drawn by pdf.js, with its download at
// hand; anything else as text, its first 64 KiB, when it decodes as UTF-8 (else: no preview).
async function preview(url, rel, size, box) {
  const b = await attempt(() => blob(url));
  if (!b) return;
  const old = box.querySelector('img')?.src;
  if (old) URL.revokeObjectURL(old);
  closePdf(box);
  const head = h('h2', {}, rel, h('span', { class: 'muted' }, ` · ${bytes(size)}`));
  const type = IMAGES[rel.split('.').pop().toLowerCase()];
  if (type) {
    box.replaceChildren(head, h('img', { src: URL.createObjectURL(new Blob([b], { type })), alt: rel, class: 'preview' }));
    return;
  }
  if (b.size >= 5 && await b.slice(0, 5).text() === '%PDF-') {
    const save = h('button', { type: 'button', 'aria-label': `Download PDF ${rel}`, onclick: () => saveBlob(b, rel) }, 'Download');
    box.replaceChildren(head, h('p', { class: 'muted' }, 'Rendering the PDF…'));
    try {
      // pdf.js hands the bytes to its worker: a copy, so the blob stays whole for Download.
      await showPdf(box, new Uint8Array(await b.arrayBuffer()), head, save);
    } catch (e) {
      box.replaceChildren(head, h('p', { class: 'stderr-text', id: 'pdf-error' }, `This PDF cannot be shown: ${e?.message || e}`),
        h('div', { class: 'row' }, save));
    }
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

async function download(url, rel) {
  const b = await attempt(() => blob(url));
  if (b) saveBlob(b, rel);
}

function saveBlob(b, rel) {
  const href = URL.createObjectURL(b);
  const a = h('a', { href, download: rel.split('/').pop(), hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 60000);
}
