// Bar charts of a value per UTC day, drawn as plain SVG by the page (no chart library: a
// few rectangles and labels are all the console needs, and nothing more is shipped).
// Shared by the usage and wallet pages.

const SVG = 'http://www.w3.org/2000/svg';
const COLOURS = ['#2456c7', '#1b7a3a', '#b3261e', '#a36a00'];

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// The last `n` UTC days as YYYY-MM-DD, oldest first, ending today.
export function lastDays(n) {
  const t = new Date();
  return [...Array(n).keys()].reverse().map((k) =>
    new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate() - k)).toISOString().slice(0, 10));
}

// days: ['2026-12-01', …]; series: [{label, values: [number per day]}]; fmt: a value as
// text with its unit. One group of bars a day, a legend when there is more than one series;
// each bar has a <title> (its tooltip) and its value written above it when not zero.
export function barChart(days, series, fmt, label) {
  const W = 900, H = 240, pad = 40, gw = (W - pad * 2) / days.length;
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values));
  const bw = (gw * 0.7) / series.length;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img', 'aria-label': label, class: 'chart' });
  root.append(svg('line', { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: '#8a93a6' }));
  root.append(svg('text', { x: pad - 6, y: pad - 8, 'text-anchor': 'end', 'font-size': 11 }, fmt(max)));
  days.forEach((d, i) => {
    series.forEach((s, j) => {
      const v = s.values[i];
      const bh = (v / max) * (H - pad * 2);
      const x = pad + i * gw + gw * 0.15 + j * bw;
      const bar = svg('rect', { x, y: H - pad - bh, width: bw, height: Math.max(bh, 0), fill: COLOURS[j % COLOURS.length],
                                'data-day': d, 'data-series': s.label });
      bar.append(svg('title', {}, `${d} · ${s.label}: ${fmt(v)}`));
      root.append(bar);
      if (v) root.append(svg('text', { x: x + bw / 2, y: H - pad - bh - 4, 'text-anchor': 'middle', 'font-size': 10 }, fmt(v)));
    });
    root.append(svg('text', { x: pad + i * gw + gw / 2, y: H - pad + 14, 'text-anchor': 'middle', 'font-size': 10 }, d.slice(5)));
  });
  if (series.length > 1) {
    series.forEach((s, j) => {
      const x = W - pad - (series.length - j) * 150;
      root.append(svg('rect', { x, y: 6, width: 12, height: 12, fill: COLOURS[j % COLOURS.length] }));
      root.append(svg('text', { x: x + 16, y: 16, 'font-size': 11 }, s.label));
    });
  }
  return root;
}
