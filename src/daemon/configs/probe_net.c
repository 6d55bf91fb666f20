#include "probe_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../egress/netpolicy.h"
#include "../egress/proxy.h"
#include "../files/fetch.h"
#include "config_doc.h"

/* The check reads the answer's start only: reaching the host is what it asks. */
#define PROBE_NET_FETCH_MAX_BYTES (64u * 1024u)
#define PROBE_NET_FETCH_TIMEOUT_MS 10000

struct probe_net {
    struct egress_proxy *px;
    struct jobs *jobs;
    char *ca_file;
    struct egress_netpolicy *np; /* the configuration's, NULL for a local backend */
    char host[EGRESS_HOST_MAX + 1];
    char url[EGRESS_HOST_MAX + 16];
    struct egress_check *check;
    struct fetch *fetch;
    probe_net_fn cb;
    void *data;
};

static void net_free(struct probe_net *n)
{
    egress_netpolicy_free(n->np);
    free(n->ca_file);
    free(n);
}

static void net_done(struct probe_net *n, int ok, const char *message, const char *reason)
{
    n->cb(n->data, ok, message, reason);
    net_free(n);
}

/* May host leave by the configuration's policy and rules and the operator's? why says
 * what refuses it. */
static bool host_allowed(struct probe_net *n, const char *host, char *why, size_t why_len)
{
    if (n->np && !egress_operator_host_allowed(n->np->op, host)) {
        snprintf(why, why_len, "%s is not in the configuration's allow_out", host);
        return false;
    }
    const json_t *rule = egress_netpolicy_rule(n->np, true, host, NULL, NULL);
    if (rule && json_is_true(json_object_get(rule, "deny"))) {
        snprintf(why, why_len, "the configuration's rule %s denies %s",
                 json_string_value(json_object_get(rule, "name")), host);
        return false;
    }
    _cleanup_free_ char *url = sbx_xasprintf("https://%s/", host);
    char norm[EGRESS_HOST_MAX + 1];
    struct sbx_err err = {0};
    if (egress_proxy_check_url(n->px, url, norm, &err) < 0) {
        snprintf(why, why_len, "%s", err.msg);
        return false;
    }
    snprintf(n->host, sizeof(n->host), "%s", norm);
    snprintf(n->url, sizeof(n->url), "https://%s/", norm);
    return true;
}

/* The first candidate the policies let out: allow_out's host names in order (not its
 * wildcards or addresses: nothing names a host there), then, where egress is allowed by
 * default, the fallback. */
static bool pick_host(struct probe_net *n, const json_t *net, const char *fallback, char *why,
                      size_t why_len, const char **reason)
{
    snprintf(why, why_len, "egress is denied by default and allow_out names no host");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(net, "allow_out"), i, v)
    {
        const char *a = json_string_value(v);
        char host[EGRESS_HOST_MAX + 1];
        struct sbx_err err = {0};
        if (!a || !strncmp(a, "*.", 2) || strchr(a, '/') ||
            egress_host_normalise(a, strlen(a), host, &err) < 0 || egress_host_is_ip(host))
            continue;
        if (host_allowed(n, host, why, why_len))
            return true;
    }
    if (json_is_true(json_object_get(net, "deny_egress_by_default")))
        return false;
    if (!fallback) {
        snprintf(why, why_len, "allow_out names no host and SBX_PROBE_HOST is not set");
        *reason = "no_probe_host";
        return false;
    }
    return host_allowed(n, fallback, why, why_len);
}

static void on_fetched(unsigned char *body, size_t len, const struct fetch_info *info,
                       const struct sbx_err *err, void *arg)
{
    struct probe_net *n = arg;
    (void)info;
    n->fetch = NULL;
    free(body);
    /* An answer longer than the check reads is an answer all the same. */
    if (err && !strcmp(err->code, "input_too_large")) {
        err = NULL;
        len = PROBE_NET_FETCH_MAX_BYTES;
    }
    if (err) {
        _cleanup_free_ char *msg = sbx_xasprintf("%s", err->msg);
        net_done(n, 0, msg, "network_unreachable");
        return;
    }
    _cleanup_free_ char *msg =
        sbx_xasprintf("%s answered through the egress proxy's rules (%zu bytes)", n->url, len);
    net_done(n, 1, msg, NULL);
}

static void on_resolved(void *data, int status, const struct egress_addr *addr,
                        const struct sbx_err *err)
{
    struct probe_net *n = data;
    n->check = NULL;
    if (status < 0) {
        net_done(n, 0, err->msg, "network_unreachable");
        return;
    }
    /* The configuration's deny_out is judged on the address, as the proxy judges it. */
    const char *why = n->np ? egress_operator_addr_check(
                                  n->np->op, egress_operator_host_allowed(n->np->op, n->host), addr)
                            : NULL;
    if (why) {
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(addr->family, addr->b, ip, sizeof(ip));
        _cleanup_free_ char *msg = sbx_xasprintf(
            "%s resolves to %s, which the configuration's network policy refuses (%s)", n->host, ip,
            why);
        net_done(n, -1, msg, "skipped_by_policy");
        return;
    }
    struct sbx_err e = {0};
    n->fetch = fetch_start(n->px, n->jobs, n->url, n->ca_file, PROBE_NET_FETCH_MAX_BYTES,
                           PROBE_NET_FETCH_TIMEOUT_MS, on_fetched, n, &e);
    if (!n->fetch)
        net_done(n, 0, e.msg, e.code);
}

void probe_net_start(struct egress_proxy *px, struct jobs *jobs, const char *ca_file,
                     const char *fallback_host, const json_t *doc, probe_net_fn cb, void *data,
                     char host[EGRESS_HOST_MAX + 1], struct probe_net **out)
{
    struct probe_net *n = sbx_xcalloc(1, sizeof(*n));
    n->px = px;
    n->jobs = jobs;
    n->ca_file = ca_file ? sbx_xstrdup(ca_file) : NULL;
    n->cb = cb;
    n->data = data;
    host[0] = '\0';
    *out = NULL;
    char why[512];
    bool local = !strcmp(json_string_value(json_object_get(doc, "backend")) ?: "", "local");
    json_t *net = config_doc_network(doc);
    json_t *pol = json_object_get(net, "policy");
    struct sbx_err err = {0};
    bool picked = false;
    const char *reason = "skipped_by_policy";
    if (local && !fallback_host) {
        snprintf(why, sizeof(why),
                 "backend local has the host's network and SBX_PROBE_HOST "
                 "is not set");
        reason = "no_probe_host";
    } else if (local) {
        /* No proxy between its sandboxes and the host's network: reach the fallback. */
        picked = host_allowed(n, fallback_host, why, sizeof(why));
    } else if (!json_is_object(pol)) {
        snprintf(why, sizeof(why),
                 "the configuration has no network policy: its sandboxes "
                 "have egress none unless created with an allowlist");
    } else if (egress_netpolicy_parse(net, &n->np, &err) < 0) {
        snprintf(why, sizeof(why), "%s", err.msg);
    } else {
        picked = pick_host(n, pol, fallback_host, why, sizeof(why), &reason);
    }
    json_decref(net);
    if (!picked) {
        net_done(n, -1, why, reason);
        return;
    }
    snprintf(host, EGRESS_HOST_MAX + 1, "%s", n->host);
    n->check = egress_proxy_resolve_checked(px, n->host, 443, on_resolved, n);
    *out = n;
}

void probe_net_cancel(struct probe_net *n)
{
    if (!n)
        return;
    egress_check_cancel(n->check);
    fetch_cancel(n->fetch);
    net_free(n);
}

/* Through the sandbox's egress listener as any command goes out: a CONNECT, then TLS to
 * the host and one request. The certificate is not judged: the check is of the way
 * out, and the sandbox's trust is its own. */
const char *const probe_net_sandbox_script =
    "import socket, ssl, sys\n"
    "host = sys.argv[1]\n"
    "try:\n"
    "    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
    "    s.sendall(b'CONNECT %s:443 HTTP/1.1\\r\\nHost: %s:443\\r\\n\\r\\n' % (host.encode(), "
    "host.encode()))\n"
    "    h = b''\n"
    "    while b'\\r\\n\\r\\n' not in h:\n"
    "        c = s.recv(4096)\n"
    "        if not c:\n"
    "            break\n"
    "        h += c\n"
    "    lines = h.decode('latin-1').split('\\r\\n')\n"
    "    if not lines[0].startswith('HTTP/1.1 200'):\n"
    "        why = [l.split(':', 1)[1].strip() for l in lines\n"
    "               if l.lower().startswith('x-sbx-egress-reason:')]\n"
    "        print('sbx-net-refused', why[0] if why else 'proxy', lines[0])\n"
    "        sys.exit(0)\n"
    "    ctx = ssl.create_default_context()\n"
    "    ctx.check_hostname = False\n"
    "    ctx.verify_mode = ssl.CERT_NONE\n"
    "    t = ctx.wrap_socket(s, server_hostname=host)\n"
    "    t.sendall(b'GET / HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n' % "
    "host.encode())\n"
    "    print('sbx-net-ok', t.recv(4096).split(b'\\r\\n')[0].decode('latin-1'))\n"
    "except Exception as e:\n"
    "    print('sbx-net-error', type(e).__name__, e)\n";

json_t *probe_net_sandbox_argv(const char *host)
{
    return json_pack("[s,s,s,s]", "python3", "-c", probe_net_sandbox_script, host);
}

void probe_net_sandbox_judge(const char *out, size_t len, const char *host, int *ok, char *message,
                             size_t message_len, char reason[PROBE_NET_REASON_MAX])
{
    /* Its first line. */
    char text[512];
    size_t n = 0;
    while (n < len && n < sizeof(text) - 1 && out[n] != '\n' && out[n] != '\0')
        n++;
    memcpy(text, out, n);
    text[n] = '\0';
    reason[0] = '\0';
    if (!strncmp(text, "sbx-net-ok ", 11)) {
        *ok = 1;
        snprintf(message, message_len,
                 "from the sandbox, %s answered %.120s through the egress "
                 "proxy",
                 host, text + 11);
    } else if (!strncmp(text, "sbx-net-refused ", 16)) {
        *ok = 0;
        const char *r = text + 16;
        size_t rl = strcspn(r, " ");
        snprintf(reason, PROBE_NET_REASON_MAX, "%.*s", (int)(rl < 63 ? rl : 63), r);
        snprintf(message, message_len, "the egress proxy refused %s to the sandbox: %.200s", host,
                 r);
    } else {
        *ok = 0;
        snprintf(reason, PROBE_NET_REASON_MAX, "network_unreachable");
        snprintf(message, message_len, "from the sandbox: %.200s",
                 text[0] ? text : "no answer from the check");
    }
}
