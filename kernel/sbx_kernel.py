# sbx kernel: the one long-lived Python process of a sandbox (docs/kernel.md).
#
# sbx-agent starts it as `python3 -u -c <this file> <fd> <js>` (the file is compiled into the
# agent, so nothing is mounted and the template is not rebuilt) with <fd> a unix socket to the
# agent, <js> the source of sbx_kernel.js (the node process that runs JavaScript and
# TypeScript cells), fds 1 and 2 pipes the agent reads and stdin /dev/null. Over the socket go
# lines of JSON:
#   agent -> kernel  {"t":"run","code":...,"ctx"?,"lang"?}
#                    {"t":"llm_reply","id":n,"text"|"error":...}
#   kernel -> agent  {"t":"ready"}  {"t":"output","mime","data"}  {"t":"llm","id":n,...}
#                    {"t":"done","execution_count","duration_ms","result","error","final"?}
# User output is never framed: print() writes to fd 1 and the agent streams it, so output of
# subprocesses and C extensions arrives too.

import ast
import base64
import builtins
import io
import json
import linecache
import os
import re
import signal
import socket
import subprocess
import sys
import time
import traceback
import types

RESULT_MAX = 64 * 1024          # bytes of UTF-8 in "result" (and "final"), marker included
OUTPUT_MAX = 6 * 1024 * 1024    # bytes of one rich output's data (the agent's line limit is 8 MiB)
LINE_MAX = 4 * 1024 * 1024      # longest line the agent sends us
GREP_LINE_MAX = 1000            # characters of a matching line that grep() returns
KERNEL_FILE = "<sbx-kernel>"

_ctl = None
_ctl_in = None
_in_cell = False
_final = None
_llm_seq = 0
_js_src = ""
_node = None  # (Popen, answers file) of the node process, started by the first JS cell


# --- the control socket -------------------------------------------------------------------

def _clean(s):
    # Lone surrogates (a __repr__ may return anything) cannot be encoded as UTF-8 JSON.
    return s.encode("utf-8", "replace").decode("utf-8")


def _send(msg):
    line = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    # An interrupt must not cut a line in half: it is held until the line is written.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        _ctl.sendall(line)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _recv():
    line = _ctl_in.readline(LINE_MAX)
    if not line:
        os._exit(0)  # the agent is gone: nobody can use this kernel any more
    try:
        msg = json.loads(line)
    except ValueError:
        return {}
    return msg if isinstance(msg, dict) else {}


def _cut(text):
    data = text.encode("utf-8")
    if len(data) <= RESULT_MAX:
        return text
    marker = "\n...[cut: %d bytes in full]" % len(data)
    keep = data[:RESULT_MAX - len(marker.encode())].decode("utf-8", "ignore")
    return keep + marker


# --- rich outputs -------------------------------------------------------------------------

def _emit(mime, data):
    if isinstance(data, bytes):
        data = base64.b64encode(data).decode("ascii")
    if len(data) > OUTPUT_MAX:
        sys.stderr.write("sbx: a %s output of %d bytes was dropped (limit %d)\n"
                         % (mime, len(data), OUTPUT_MAX))
        return
    _send({"t": "output", "mime": mime, "data": _clean(data)})


def _figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _flush_figures():
    """Every open pyplot figure becomes an image/png output and is closed, as a notebook's
    inline backend does at the end of a cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            _emit("image/png", _figure_png(plt.figure(num)))
    finally:
        plt.close("all")


def _rich(obj):
    """The richest representation obj offers, as (mime, data), or None."""
    fig_type = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    if fig_type is not None and isinstance(obj, fig_type):
        return "image/png", _figure_png(obj)
    for meth, mime in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                       ("_repr_svg_", "image/svg+xml"), ("_repr_html_", "text/html")):
        f = getattr(obj, meth, None)
        if callable(f) and not isinstance(obj, type):
            data = f()
            if data is not None:
                return mime, data
    return None


def display(*objs):
    """Show objects in the answer's outputs: figures and objects with _repr_png_ /
    _repr_html_ (pandas, HTML(...)) richly, anything else as text/plain."""
    for obj in objs:
        r = _rich(obj)
        if r is None:
            r = ("text/plain", repr(obj))
        _emit(*r)


class HTML:
    """display(HTML("<b>bold</b>")) puts the markup in the outputs as text/html."""

    def __init__(self, data):
        self.data = str(data)

    def _repr_html_(self):
        return self.data

    def __repr__(self):
        return "HTML(%r)" % (self.data[:60],)


_MPL_BACKEND = """
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas
from matplotlib.backend_bases import FigureManagerBase as FigureManager
def show(*args, **kwargs):
    _flush_figures()
"""


class _BackendFinder:
    """Serves the module `sbx_inline`, matplotlib's backend here (MPLBACKEND is
    module://sbx_inline): Agg rendering, and plt.show() turns figures into outputs."""

    def find_spec(self, name, path=None, target=None):
        if name != "sbx_inline":
            return None
        import importlib.util
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, mod):
        mod._flush_figures = _flush_figures
        exec(compile(_MPL_BACKEND, KERNEL_FILE, "exec"), mod.__dict__)


# --- REPL helpers (spec 004): large strings and files without loading them whole ---------

def _path_of(src):
    if isinstance(src, os.PathLike):
        return os.fspath(src)
    if isinstance(src, str) and 0 < len(src) < 4096 and "\n" not in src and "\0" not in src \
            and os.path.isfile(src):
        return src
    return None


def peek(src, start=0, length=2000):
    """Text at [start, start+length) of a string, or of a file (byte offsets, read with one
    seek: the file is not loaded)."""
    if start < 0 or length < 0:
        raise ValueError("start and length must be non-negative")
    path = _path_of(src)
    if path is not None:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(length).decode("utf-8", "replace")
    if isinstance(src, (bytes, bytearray)):
        return bytes(src[start:start + length]).decode("utf-8", "replace")
    return str(src)[start:start + length]


def _lines_of_str(s):
    pos, n = 0, len(s)
    while pos < n:
        end = s.find("\n", pos)
        if end < 0:
            end = n
        yield s[pos:end]
        pos = end + 1


def grep(pattern, src, max_matches=100, ignore_case=False):
    """[(line_number, line)] for lines of a string or file that match the regular expression
    (at most max_matches; lines cut at 1000 characters). A file is read line by line."""
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    out = []
    path = _path_of(src)
    if path is not None:
        f = open(path, "r", encoding="utf-8", errors="replace", newline="")
        lines = (line.rstrip("\r\n") for line in f)
    else:
        f = None
        if isinstance(src, (bytes, bytearray)):
            src = bytes(src).decode("utf-8", "replace")
        lines = _lines_of_str(str(src))
    try:
        for i, line in enumerate(lines, 1):
            if rx.search(line):
                out.append((i, line[:GREP_LINE_MAX]))
                if len(out) >= max_matches:
                    break
    finally:
        if f is not None:
            f.close()
    return out


def chunk_indices(src, size=100_000, overlap=0):
    """[(start, end)] offsets that cover a string, a file (bytes) or a length in chunks of
    `size`, each overlapping the previous one by `overlap`; feed them to peek()."""
    if size <= 0 or overlap < 0 or overlap >= size:
        raise ValueError("need size > 0 and 0 <= overlap < size")
    if isinstance(src, int):
        total = src
    else:
        path = _path_of(src)
        total = os.path.getsize(path) if path is not None else len(src)
    out, start = [], 0
    while start < total:
        end = min(start + size, total)
        out.append((start, end))
        if end == total:
            break
        start = end - overlap
    return out


def FINAL(answer):
    """Mark the task's final answer; the run_code answer carries it as "final"."""
    global _final
    _final = answer if isinstance(answer, str) else repr(answer)


class LLMQueryError(RuntimeError):
    pass


def llm_query(prompt, model=None, system=None, max_tokens=None, temperature=None):
    """Ask the operator's OpenAI-compatible model (configured in sbxd; this sandbox holds no
    key) and return the answer's text. Raises LLMQueryError when it is not configured or
    the call fails."""
    global _llm_seq
    if not isinstance(prompt, str):
        raise TypeError("prompt must be a string")
    _llm_seq += 1
    req = {"t": "llm", "id": _llm_seq, "prompt": _clean(prompt)}
    for k, v in (("model", model), ("system", system), ("max_tokens", max_tokens),
                 ("temperature", temperature)):
        if v is not None:
            req[k] = v
    _send(req)
    while True:
        msg = _recv()
        if msg.get("t") == "llm_reply" and msg.get("id") == _llm_seq:
            break
    if "error" in msg:
        raise LLMQueryError(msg["error"])
    return msg.get("text", "")


HELPERS = {"display": display, "HTML": HTML, "peek": peek, "grep": grep,
           "chunk_indices": chunk_indices, "FINAL": FINAL, "llm_query": llm_query,
           "LLMQueryError": LLMQueryError}


# --- cells --------------------------------------------------------------------------------

def _user_tb(tb):
    # The kernel's own frames are noise in the user's traceback.
    while tb is not None and tb.tb_frame.f_code.co_filename in (KERNEL_FILE, "<string>"):
        tb = tb.tb_next
    return tb


def _error(e):
    if isinstance(e, SyntaxError):
        lines = traceback.format_exception_only(type(e), e)
    else:
        lines = traceback.format_exception(type(e), e, _user_tb(e.__traceback__))
    return {"name": type(e).__name__, "value": _clean(str(e)), "traceback": _clean("".join(lines))}


def _run(ns, code, count):
    global _in_cell, _final
    filename = "<cell %d>" % count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _final = None
    result = error = None
    t0 = time.monotonic()
    try:
        _in_cell = True
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), ns)
        if last is not None:
            value = eval(compile(last, filename, "eval"), ns)
            if value is not None:
                ns["_"] = value
                result = _cut(_clean(repr(value)))
                rich = _rich(value)
                if rich is not None and rich[0] != "image/png":
                    _emit(*rich)
        _flush_figures()
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the kernel lives on
        _in_cell = False
        error = _error(e)
        try:
            _flush_figures()
        except Exception:
            pass
    finally:
        _in_cell = False
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    done = {"t": "done", "execution_count": count, "result": result, "error": error,
            "duration_ms": int((time.monotonic() - t0) * 1000)}
    if _final is not None:
        done["final"] = _cut(_clean(_final))
    return done


def _node_proc():
    global _node
    if _node is not None and _node[0].poll() is None:
        return _node
    r, w = os.pipe()
    try:
        # In the kernel's process group: an interrupt, a timeout's kill or a reset reach it.
        proc = subprocess.Popen(["node", "--disable-warning=ExperimentalWarning", "-e", _js_src,
                                 str(w)], stdin=subprocess.PIPE, pass_fds=(w,))
    finally:
        os.close(w)
    _node = (proc, os.fdopen(r, "rb"))
    return _node


def _run_js(lang, ctx, code, count):
    """A JavaScript (lang "js") or TypeScript ("ts") cell on the node process, in the vm
    context of its own named ctx."""
    global _in_cell, _node
    t0 = time.monotonic()
    result = error = None
    try:
        _in_cell = True
        proc, answers = _node_proc()
        proc.stdin.write(json.dumps({"id": count, "code": code, "ctx": ctx or "",
                                     "lang": lang}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = answers.readline(LINE_MAX)
            if not line:
                _node = None
                raise RuntimeError("node exited (exit status %s)" % proc.wait())
            msg = json.loads(line)
            # The answer of an interrupted cell may still come: it is not this one's.
            if msg.get("id") == count:
                break
        result, error = msg.get("result"), msg.get("error")
    except FileNotFoundError:
        error = {"name": "Error", "value": "node is not installed in this sandbox's template",
                 "traceback": ""}
    except BaseException as e:  # KeyboardInterrupt too: the kernel lives on
        error = _error(e)
    finally:
        _in_cell = False
    return {"t": "done", "execution_count": count, "result": result, "error": error,
            "duration_ms": int((time.monotonic() - t0) * 1000)}


def _on_sigint(signum, frame):
    # Only a running cell is interrupted; between cells the kernel's own loop must not be.
    if _in_cell:
        raise KeyboardInterrupt


def _on_forked(signum, frame):
    # The agent says this process is one of several copies restored from one memory
    # snapshot (a fork): generators seeded before it would repeat in every copy.
    for name in ("random", "numpy"):
        mod = sys.modules.get(name)
        if mod is None:
            continue
        if name == "random":
            mod.seed()
        elif hasattr(mod, "random"):
            mod.random.seed()


def main():
    global _ctl, _ctl_in, _js_src
    fd = int(sys.argv[1])
    _js_src = sys.argv[2] if len(sys.argv) > 2 else ""
    os.set_inheritable(fd, False)  # user subprocesses never see the control socket
    _ctl = socket.socket(fileno=fd)
    _ctl_in = _ctl.makefile("rb")
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGUSR2, _on_forked)
    sys.meta_path.append(_BackendFinder())
    sys.argv = [""]
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__.update(HELPERS)
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod
    ns = main_mod.__dict__
    try:
        os.chdir("/workspace")
    except OSError:
        pass
    _send({"t": "ready", "pid": os.getpid()})
    count = 0
    # Separate namespaces by name (E2B's code contexts; the daemon bounds how many): each is
    # a fresh __main__-like dict with the helpers, made on first use.
    spaces = {}
    while True:
        msg = _recv()
        if msg.get("t") != "run" or not isinstance(msg.get("code"), str):
            continue  # e.g. a late llm_reply for an interrupted llm_query
        count += 1
        ctx = msg.get("ctx")
        if msg.get("lang") in ("js", "ts"):
            _send(_run_js(msg["lang"], ctx, msg["code"], count))
            continue
        space = ns
        if isinstance(ctx, str) and ctx:
            space = spaces.get(ctx)
            if space is None:
                space = spaces[ctx] = dict(HELPERS, __name__="__main__", __builtins__=builtins)
        _send(_run(space, msg["code"], count))


main()
