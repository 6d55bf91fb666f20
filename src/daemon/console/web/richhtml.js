// HTML a sandbox's kernel returned (text/html outputs: a pandas DataFrame, display(HTML(…)))
// turned into safe DOM. The sandbox runs user code, so its HTML is hostile: it is parsed by
// DOMParser into an inert document (no script runs, nothing loads) and rebuilt element by
// element from an allowlist of table and text tags, with no attribute except a cell's
// colspan/rowspan as numbers. Everything else is dropped: unknown tags keep only their text,
// script/style/template and the like lose their content too. Never innerHTML of raw output,
// and the CSP stays as strict as it is (docs/console.md).

const TAGS = new Set(['table', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td', 'caption',
  'p', 'br', 'hr', 'div', 'span', 'b', 'i', 'strong', 'em', 'u', 's', 'small', 'sub', 'sup',
  'code', 'pre', 'kbd', 'samp', 'blockquote', 'ul', 'ol', 'li', 'dl', 'dt', 'dd',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
// Dropped with everything inside them (their text is code or markup, not content).
const DROP = new Set(['script', 'style', 'template', 'noscript', 'iframe', 'object', 'embed',
  'svg', 'math', 'head', 'title', 'textarea', 'select', 'frameset', 'frame', 'link', 'meta']);
const SPAN_MAX = 1000;
// An image's source: only data: URLs of these types, base64 or not.
const IMAGE_SRC = /^data:image\/(png|jpeg|gif|webp|svg\+xml)[;,]/i;
const SIZE_MAX = 4000;
const ALT_MAX = 500;
// Bounds on what one output can make the page build (the kernel allows 6 MiB of HTML).
const NODES_MAX = 20000;
const DEPTH_MAX = 64;

export function sanitizeHtml(html) {
  const doc = new DOMParser().parseFromString(String(html), 'text/html');
  const out = document.createDocumentFragment();
  let budget = NODES_MAX;
  const copy = (src, dst, depth) => {
    for (const n of src.childNodes) {
      if (budget-- <= 0) return;
      if (n.nodeType === Node.TEXT_NODE) {
        dst.append(document.createTextNode(n.data));
        continue;
      }
      if (n.nodeType !== Node.ELEMENT_NODE) continue;
      const tag = n.localName;
      if (DROP.has(tag) || n.namespaceURI !== 'http://www.w3.org/1999/xhtml') continue;
      if (tag === 'img') {
        if (IMAGE_SRC.test(n.getAttribute('src') || '')) dst.append(image(n));
        continue;
      }
      if (!TAGS.has(tag) || depth >= DEPTH_MAX) {
        copy(n, dst, depth);
        continue;
      }
      const el = document.createElement(tag);
      if (tag === 'td' || tag === 'th') {
        for (const a of ['colspan', 'rowspan']) {
          const v = Number.parseInt(n.getAttribute(a) || '', 10);
          if (v > 1 && v <= SPAN_MAX) el.setAttribute(a, String(v));
        }
      }
      dst.append(el);
      copy(n, el, depth + 1);
    }
  };
  copy(doc.body, out, 0);
  return out;
}

// An <img> of the output kept: its data: source, alt text and pixel size, nothing else.
function image(src) {
  const el = document.createElement('img');
  el.setAttribute('src', src.getAttribute('src'));
  el.setAttribute('alt', (src.getAttribute('alt') || 'image in the output').slice(0, ALT_MAX));
  for (const a of ['width', 'height']) {
    const v = Number.parseInt(src.getAttribute(a) || '', 10);
    if (v > 0 && v <= SIZE_MAX) el.setAttribute(a, String(v));
  }
  return el;
}
