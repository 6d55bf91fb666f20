// Small DOM helpers and the error banner, shared by the pages.
import { ApiError } from './api.js';

// h('button', {class: 'x', onclick: f}, 'text', child...): an element. Attributes that are
// functions become listeners; false/null ones are left out. Text is always text, never HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
    else if (k === 'hidden' || k === 'disabled' || k === 'required') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const banner = () => document.getElementById('error');

// The API's code and message with the request id to quote, or any other failure.
export function showError(e) {
  const b = banner();
  b.replaceChildren();
  if (e instanceof ApiError) {
    b.append(h('strong', {}, e.code), ': ', e.message,
             e.requestId ? h('span', { class: 'muted' }, ' (request id ', h('code', { class: 'reqid' }, e.requestId), ')') : '');
  } else {
    b.append(String(e?.message || e));
  }
  b.hidden = false;
}

export function clearError() {
  banner().hidden = true;
}

// Runs an action, showing its failure in the banner; returns its value or undefined.
export async function attempt(fn) {
  try {
    clearError();
    return await fn();
  } catch (e) {
    showError(e);
    return undefined;
  }
}

// A local date and time as 2026-12-07 05:23:02 (the sv-SE locale's shape: short, sortable).
export function whenMs(ms) {
  return ms ? new Date(ms).toLocaleString('sv-SE') : '';
}

export function when(unixSeconds) {
  return whenMs(unixSeconds * 1000);
}

// An audit entry's details, a line per field, long values cut (the API has them whole).
export function details(d) {
  if (!d || typeof d !== 'object') return d ? String(d) : '';
  return Object.entries(d).map(([k, v]) => {
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    return `${k}: ${s.length > 100 ? `${s.slice(0, 100)}…` : s}`;
  }).join('\n');
}

export function timeLeft(expiresAt) {
  let s = Math.max(0, Math.round(expiresAt - Date.now() / 1000));
  const hrs = Math.floor(s / 3600);
  s -= hrs * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return hrs ? `${hrs}h ${String(m).padStart(2, '0')}m` : `${m}m ${String(s).padStart(2, '0')}s`;
}

export function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

// Decode a frame's data (base64 when the API says so) as text.
export function frameText(data, encoding) {
  if (encoding !== 'base64') return data || '';
  const raw = atob(data);
  return new TextDecoder().decode(Uint8Array.from(raw, (c) => c.charCodeAt(0)));
}
