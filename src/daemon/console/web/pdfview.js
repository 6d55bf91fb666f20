// A PDF drawn in the page by pdf.js (pdfjs-dist, pinned in ../package-lock.json and built
// into sbxd like the other pages): no frame or object (the CSP allows neither), nothing
// fetched from anywhere. Its parser runs in a worker, a module script of this origin
// (/console/pdf.worker.mjs), which `script-src 'self'` already allows. The library is
// loaded on the first PDF only: it is large and most visits never need it.
import { h } from './ui.js';

const WORKER = '/console/pdf.worker.mjs';
// A page is drawn at most this wide (CSS pixels) and never past this scale.
const WIDTH_MAX = 820;
const SCALE_MAX = 2;

let lib;
async function pdfjs() {
  if (!lib) {
    lib = await import('./pdf.mjs');
    lib.GlobalWorkerOptions.workerSrc = WORKER;
  }
  return lib;
}

// The document shown in each preview box, destroyed (its worker's memory freed) when the
// box shows something else.
const open = new WeakMap();

export function closePdf(box) {
  open.get(box)?.destroy();
  open.delete(box);
}

// Draws page 1 of the PDF's bytes into box under head, with previous and next buttons when it
// has more (and the controls in extra beside them). Throws what pdf.js throws for a file it
// cannot read.
export async function showPdf(box, data, head, extra) {
  closePdf(box);
  const { getDocument } = await pdfjs();
  // No WebAssembly decoders, no font or colour-map files fetched (none are served): fonts
  // the file does not embed are drawn with the system's.
  const doc = await getDocument({ data, useWasm: false, useSystemFonts: true, enableXfa: false }).promise;
  open.set(box, doc);
  const canvas = h('canvas', { id: 'pdf-canvas', class: 'pdf', role: 'img' });
  const where = h('span', { id: 'pdf-page', 'aria-live': 'polite' });
  let n = 1;
  let drawing = Promise.resolve();
  const draw = () => {
    drawing = drawing.then(async () => {
      const page = await doc.getPage(n);
      const base = page.getViewport({ scale: 1 });
      const view = page.getViewport({ scale: Math.min(SCALE_MAX, WIDTH_MAX / base.width) });
      const ratio = window.devicePixelRatio || 1;
      canvas.width = Math.floor(view.width * ratio);
      canvas.height = Math.floor(view.height * ratio);
      canvas.style.width = `${Math.floor(view.width)}px`;
      canvas.style.height = `${Math.floor(view.height)}px`;
      canvas.setAttribute('aria-label', `Page ${n} of ${doc.numPages}`);
      await page.render({ canvas, viewport: view, transform: ratio === 1 ? null : [ratio, 0, 0, ratio, 0, 0] }).promise;
      where.textContent = `page ${n} of ${doc.numPages}`;
      canvas.dataset.rendered = String(n);
    });
    return drawing;
  };
  const turn = (d) => () => {
    if (n + d < 1 || n + d > doc.numPages) return;
    n += d;
    draw();
  };
  const nav = doc.numPages > 1
    ? h('div', { class: 'row' },
      h('button', { type: 'button', 'aria-label': 'Previous page', onclick: turn(-1) }, '‹ Previous'), where,
      h('button', { type: 'button', 'aria-label': 'Next page', onclick: turn(1) }, 'Next ›'), extra)
    : h('div', { class: 'row' }, where, extra);
  box.replaceChildren(head, nav, canvas);
  await draw();
}
