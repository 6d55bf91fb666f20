// A terminal into the sandbox: xterm.js over the terminal WebSocket. The ticket comes from
// POST terminal-ticket (the key never enters the URL); the shell's pty_id is kept in this
// tab's sessionStorage so a reload re-attaches to the same shell (the server replays its
// recent screen).
import { Terminal } from './xterm.mjs';
import { FitAddon } from './addon-fit.mjs';
import { api } from './api.js';
import { h, showError } from './ui.js';

const ptyKey = (id) => `sbx.console.pty.${id}`;

export function openTerminal(box, sandboxId) {
  const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false,
                              screenReaderMode: false });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const host = h('div', { class: 'term', id: 'terminal', role: 'region', 'aria-label': 'Terminal' });
  const state = h('span', { id: 'term-state', class: 'muted', 'aria-live': 'polite' }, 'connecting…');
  const reconnect = h('button', { type: 'button', hidden: true, onclick: () => connect(false) }, 'Reconnect');
  const fresh = h('button', { type: 'button', onclick: () => { sessionStorage.removeItem(ptyKey(sandboxId)); connect(false); } }, 'New shell');
  const hint = h('span', { class: 'muted', id: 'term-help' },
    'Click the terminal and type. Every key goes to the shell, Tab too; Ctrl+] leaves the terminal (as in sbx terminal).');
  box.replaceChildren(h('div', { class: 'row' }, state, reconnect, fresh, hint), host);
  term.open(host);
  // xterm.js takes Tab for the shell, which would trap a keyboard user inside it: Ctrl+]
  // (the CLI's detach key) moves the focus to the buttons above instead of reaching the shell.
  term.attachCustomKeyEventHandler((e) => {
    if (e.type === 'keydown' && e.ctrlKey && e.code === 'BracketRight') { fresh.focus(); return false; }
    return true;
  });
  term.textarea?.setAttribute('aria-describedby', 'term-help');
  fit.fit();
  let ws = null;
  let closed = false;
  const enc = new TextEncoder();
  term.onData((d) => ws?.readyState === 1 && ws.send(enc.encode(d)));
  term.onResize(({ cols, rows }) => ws?.readyState === 1 && ws.send(JSON.stringify({ type: 'resize', cols, rows })));
  const onWinResize = () => fit.fit();
  window.addEventListener('resize', onWinResize);

  async function connect(retried) {
    ws?.close();
    reconnect.hidden = true;
    state.textContent = 'connecting…';
    let t;
    try {
      t = await api('POST', `/v1/sandboxes/${sandboxId}/terminal-ticket`, {});
    } catch (e) {
      showError(e);
      state.textContent = 'not connected';
      reconnect.hidden = false;
      return;
    }
    const pty = sessionStorage.getItem(ptyKey(sandboxId));
    const q = new URLSearchParams({ ticket: t.ticket, cols: term.cols, rows: term.rows });
    if (pty) q.set('pty_id', pty);
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    const sock = new WebSocket(`${proto}://${location.host}/v1/sandboxes/${sandboxId}/terminal?${q}`);
    ws = sock;
    sock.binaryType = 'arraybuffer';
    let ready = false;
    sock.onmessage = (m) => {
      if (typeof m.data !== 'string') { term.write(new Uint8Array(m.data)); return; }
      const msg = JSON.parse(m.data);
      if (msg.type === 'ready') {
        ready = true;
        sessionStorage.setItem(ptyKey(sandboxId), msg.pty_id);
        state.textContent = `${pty ? 're-attached to' : 'connected to'} ${msg.pty_id}`;
        term.focus();
      } else if (msg.type === 'exited') {
        sessionStorage.removeItem(ptyKey(sandboxId));
        state.textContent = `the shell exited (${msg.exit_code})`;
      } else if (msg.type === 'error') {
        state.textContent = `closed: ${msg.code}`;
      }
    };
    sock.onclose = () => {
      if (closed || ws !== sock) return;
      // A re-attach to a shell that has ended is refused before the upgrade: start anew.
      if (!ready && pty && !retried) {
        sessionStorage.removeItem(ptyKey(sandboxId));
        connect(true);
        return;
      }
      if (!ready) state.textContent = 'could not connect';
      reconnect.hidden = false;
    };
  }
  connect(false);
  return () => {
    closed = true;
    window.removeEventListener('resize', onWinResize);
    ws?.close();
    term.dispose();
  };
}
