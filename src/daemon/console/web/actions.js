import { api } from './api.js';
import { h, attempt } from './ui.js';

// Pause/resume, fork and delete: shown only to keys that may use them (the API refuses
// the others anyway).
export function sandboxActions(ctx, sb, after) {
  if (!ctx.can.write()) return [];
  const act = (label, fn, cls) => h('button', { type: 'button', class: cls || '', 'aria-label': `${label} ${sb.id}`,
    onclick: async (e) => {
      e.target.disabled = true;
      await attempt(fn);
      e.target.disabled = false;
      await after();
    } }, label);
  return [
    sb.status === 'paused'
      ? act('Resume', () => api('POST', `/v1/sandboxes/${sb.id}/resume`))
      : act('Pause', () => api('POST', `/v1/sandboxes/${sb.id}/pause`)),
    ' ', act('Fork', () => api('POST', `/v1/sandboxes/${sb.id}/fork`, { count: 1 })),
    ' ', act('Delete', async () => {
      if (!confirm(`Delete sandbox ${sb.id} and its files?`)) return;
      await api('DELETE', `/v1/sandboxes/${sb.id}`);
    }, 'danger'),
  ];
}
