"""The agent tools' file paths against a hostile sandbox, through a real sbxd: symlinks the
sandbox plants (to a host file, to a host directory, to /proc magic links) make edit_file,
sandbox_files and sandbox_bash's change listing refuse or skip them; nothing on the host is
read, written or followed. The same over MCP (tools/call), where a refusal is an isError
result, never a JSON-RPC error or the host's bytes."""

import os
import tempfile

import harness
from harness import assert_error

D = harness.Shared()
SECRET = b"HOST-SECRET-" + os.urandom(8).hex().encode()


def teardown_module():
    made = D.cache.get("setup")
    D.close()
    if made:
        os.unlink(made[2])
        os.rmdir(made[3])


def setup():
    def make(d):
        fd, path = tempfile.mkstemp(prefix="sbx-tool-secret-")
        os.write(fd, SECRET + b"\n")
        os.close(fd)
        os.chmod(path, 0o644)
        hostdir = tempfile.mkdtemp(prefix="sbx-tool-dir-")
        a = d.client(d.client().create_key("mallory")["key"])
        sb = a.create_sandbox(ttl_seconds=900)["id"]
        r = a.exec(sb, shell="ln -s %s secret.txt && ln -s %s hostdir && "
                   "ln -s /proc/self/root/etc/passwd magic.txt && mkdir -p out && "
                   "ln -s %s out/leak.txt && echo planted" % (path, hostdir, path))
        assert r["stdout"] == "planted\n", r
        return a, sb, path, hostdir
    return D.once("setup", make)


def tool(a, sb, name, args):
    return a.request("POST", "/v1/sandboxes/%s/tools/%s" % (sb, name), args)


def test_edit_file_never_follows_a_planted_symlink():
    a, sb, path, hostdir = setup()
    for p in ("secret.txt", "magic.txt", "hostdir/new.txt", "out/leak.txt"):
        r = tool(a, sb, "edit_file", {"path": p, "old_string": "HOST", "new_string": "PWNED"})
        assert r.status in (400, 404), (p, r)
        assert r.body["error"]["code"] in ("invalid_path", "file_not_found"), (p, r)
        r = tool(a, sb, "edit_file", {"path": p, "command": "create", "file_text": "PWNED"})
        assert r.status == 400 and r.body["error"]["code"] == "invalid_path", (p, r)
        r = tool(a, sb, "edit_file", {"path": p, "command": "view"})
        assert r.status in (400, 404) and SECRET not in r.raw, (p, r)
    assert open(path, "rb").read() == SECRET + b"\n"
    assert os.listdir(hostdir) == []


def test_sandbox_files_refuses_planted_symlinks():
    a, sb, path, hostdir = setup()
    for p in ("secret.txt", "magic.txt", "out/leak.txt"):
        r = tool(a, sb, "sandbox_files", {"op": "read", "path": p})
        assert_error(r, 400, "invalid_path")
        assert SECRET not in r.raw
    assert_error(tool(a, sb, "sandbox_files", {"op": "list", "path": "hostdir"}), 400,
                 "invalid_path")
    assert_error(tool(a, sb, "sandbox_files", {"op": "write", "path": "hostdir/x",
                                               "content": "x"}), 400, "invalid_path")
    assert os.listdir(hostdir) == []
    # The artifacts never take the symlink's target either.
    arts = tool(a, sb, "sandbox_files", {"op": "artifacts"}).body["result"]["artifacts"]
    assert all(x["path"] != "out/leak.txt" for x in arts), arts


def test_sandbox_bash_does_not_hash_symlink_targets():
    a, sb, path, hostdir = setup()
    r = tool(a, sb, "sandbox_bash", {"command": "ln -sf %s another.txt; echo x > plain.txt"
                                     % path})
    files = r.body["result"]["files"]
    assert [f["path"] for f in files] == ["plain.txt"], files
    assert SECRET not in r.raw


def test_over_mcp_a_refusal_is_a_result():
    a, sb, path, hostdir = setup()
    init = a.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                      "params": {"protocolVersion": "2025-11-25",
                                                 "capabilities": {},
                                                 "clientInfo": {"name": "m", "version": "1"}}})
    sid = init.headers["mcp-session-id"]
    r = a.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "sandbox_files",
                                              "arguments": {"sandbox_id": sb, "op": "read",
                                                            "path": "secret.txt"}}},
                  headers={"Mcp-Session-Id": sid})
    res = r.body["result"]
    assert res["isError"] is True and res["_meta"]["sbx/error"]["code"] == "invalid_path"
    assert SECRET not in r.raw
