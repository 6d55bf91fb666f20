/* Import circle with proxy.c (allowed inside a folder, docs/architecture.md#layering): a
 * proxied connection's life is one state machine split in two files: proxy.c owns the
 * socket and calls decide.c for the verdict, which answers by calling back
 * egress_conn_connect or egress_conn_refuse (proxy_internal.h). Both are the egress
 * folder's; nothing outside sees the loop. */
/* What a proxied request may reach: the sandbox's policy, the operator's and its
 * configuration's layers, then every resolved address checked before one is dialled. */
#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../sandbox/manager.h"
#include "netpolicy.h"
#include "policy.h"
#include "proxy_internal.h"

static void resolved(void *data, int status, const struct egress_addr *addrs, size_t n)
{
    struct egress_conn *c = data;
    c->lookup = NULL;
    egress_conn_stop_timer(c);
    if (status < 0) {
        egress_conn_refuse(c, 502, "error", "dns_failed", "%s does not resolve (%s)", c->host,
                           status == -ENOENT ? "no such name" : strerror(-status));
        return;
    }
    bool host_ok = egress_operator_host_allowed(c->px->op, c->host);
    const struct egress_netpolicy *net = c->sb->net;
    bool net_ok = net && egress_operator_host_allowed(net->op, c->host);
    const char *first_why = NULL;
    char first_addr[EGRESS_ADDR_STR_MAX] = "";
    for (size_t i = 0; i < n; i++) {
        const char *why = egress_resolver_addr_check_private(c->px->resolver, &addrs[i], c->port,
                                                             net && net->allow_private);
        if (!why)
            why = egress_operator_addr_check(c->px->op, host_ok, &addrs[i]);
        /* The configuration's layer names itself: config_deny_out, config_default_deny. */
        if (!why && net && egress_operator_addr_check(net->op, net_ok, &addrs[i]))
            why =
                !strcmp(egress_operator_addr_check(net->op, net_ok, &addrs[i]), "operator_deny_out")
                    ? "config_deny_out"
                    : "config_default_deny";
        if (!why) {
            c->addrs[c->naddrs++] = addrs[i];
            continue;
        }
        if (!first_why) {
            first_why = why;
            egress_addr_format(&addrs[i], first_addr);
        }
    }
    if (c->naddrs == 0) {
        snprintf(c->address, sizeof(c->address), "%s", first_addr);
        bool operator= !strncmp(first_why, "operator_", 9) || !strncmp(first_why, "config_", 7);
        egress_conn_refuse(c, 403, "denied", operator? first_why : "blocked_address",
                           "%s resolves to %s (%s)", c->host, first_addr, first_why);
        return;
    }
    c->reason[0] = '\0';
    egress_conn_connect(c);
}

static void on_resolve_timeout(struct loop *l, void *data)
{
    struct egress_conn *c = data;
    c->timer = NULL;
    egress_conn_refuse(c, 504, "error", "dns_timeout", "resolving %s took longer than %d ms",
                       c->host, EGRESS_RESOLVE_TIMEOUT_MS);
}

void egress_conn_decide(struct egress_conn *c)
{
    snprintf(c->method, sizeof(c->method), "%s",
             http_method_str((enum http_method)c->rh.parser.method));
    c->is_connect = c->rh.parser.method == HTTP_CONNECT;
    const char *url = (const char *)c->head + c->rh.url_off;
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(url, c->rh.url_len, c->is_connect, &u) != 0 ||
        !(u.field_set & (1 << UF_HOST))) {
        egress_conn_refuse(c, 400, "denied", "bad_request",
                           "send CONNECT host:443 or an absolute http:// URL");
        return;
    }
    if (!c->is_connect) {
        bool http = (u.field_set & (1 << UF_SCHEMA)) && u.field_data[UF_SCHEMA].len == 4 &&
                    !strncasecmp(url + u.field_data[UF_SCHEMA].off, "http", 4);
        if (!http) {
            egress_conn_refuse(
                c, 400, "denied", "bad_request",
                "plain requests need an absolute http:// URL (use CONNECT for https)");
            return;
        }
        const char *path = "/";
        size_t plen = 1, end = c->rh.url_len;
        if (u.field_set & (1 << UF_PATH)) {
            path = url + u.field_data[UF_PATH].off;
            plen = u.field_data[UF_PATH].len;
        }
        if (u.field_set & (1 << UF_QUERY))
            end = (size_t)u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len;
        else if (u.field_set & (1 << UF_PATH))
            end = (size_t)u.field_data[UF_PATH].off + plen;
        if (u.field_set & (1 << UF_PATH))
            c->target = sbx_xasprintf("%.*s", (int)(end - u.field_data[UF_PATH].off), path);
        else if (u.field_set & (1 << UF_QUERY))
            c->target = sbx_xasprintf("/?%.*s", (int)u.field_data[UF_QUERY].len,
                                      url + u.field_data[UF_QUERY].off);
        else
            c->target = sbx_xstrdup("/");
    }
    c->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
    struct sbx_err err = {0};
    const char *rawhost = url + u.field_data[UF_HOST].off;
    size_t hlen = u.field_data[UF_HOST].len;
    snprintf(c->host, sizeof(c->host), "%.*s",
             (int)(hlen < EGRESS_HOST_MAX ? hlen : EGRESS_HOST_MAX), rawhost);
    char host[EGRESS_HOST_MAX + 1];
    if (egress_host_normalise(rawhost, hlen, host, &err) < 0) {
        egress_conn_refuse(c, 400, "denied", "bad_request", "%s", err.msg);
        return;
    }
    snprintf(c->host, sizeof(c->host), "%s", host);
    /* An address in any spelling: never a target of its own. Judged as an address first
     * so the reason says what it really is. */
    if (egress_host_is_ip(host)) {
        struct egress_addr a;
        if (egress_addr_parse_literal(host, &a) == 0) {
            egress_addr_format(&a, c->address);
            const char *cls = egress_addr_class(&a);
            if (cls) {
                egress_conn_refuse(c, 403, "denied", "blocked_address", "%s is %s (%s)", host,
                                   c->address, cls);
                return;
            }
        }
        egress_conn_refuse(c, 403, "denied", "ip_literal",
                           "%s is an IP address: egress allows host names only", host);
        return;
    }
    unsigned want_port = c->is_connect ? 443 : 80;
    if (c->port != want_port) {
        egress_conn_refuse(c, 403, "denied", "port_not_allowed", "%s to port %u: only %s",
                           c->method, c->port,
                           c->is_connect ? "CONNECT to port 443" : "plain HTTP to port 80");
        return;
    }
    const struct egress_policy *pol = c->sb->egress;
    const struct egress_netpolicy *net = c->sb->net;
    /* A configuration's network policy stands in for an allowlist of the sandbox's own;
     * one it has anyway narrows it. */
    bool own = pol && pol->mode != EGRESS_MODE_NONE;
    if (!own && !(net && net->op)) {
        egress_conn_refuse(c, 403, "denied", "egress_none", "this sandbox's egress policy is none");
        return;
    }
    if (net && net->op && !egress_operator_host_allowed(net->op, host) &&
        !egress_operator_may_allow_by_address(net->op)) {
        egress_conn_refuse(c, 403, "denied", "config_default_deny",
                           "%s is not in the configuration's allow_out", host);
        return;
    }
    const json_t *rule = egress_netpolicy_rule(net, c->is_connect, host,
                                               c->is_connect ? NULL : c->method, c->target);
    if (rule) {
        const char *name = json_string_value(json_object_get(rule, "name"));
        if (json_is_true(json_object_get(rule, "deny"))) {
            egress_conn_refuse(c, 403, "denied", "rule_denied",
                               "%s: denied by the configuration's rule %s", host, name);
            return;
        }
        if (json_object_get(rule, "injects")) {
            json_t *hv = json_object_get(c->sb->config_inject, name);
            if (!c->is_connect || !json_array_size(hv) || !c->px->ca) {
                egress_conn_refuse(c, 502, "error", "inject_unavailable",
                                   "%s: rule %s injects a header but its values are not here", host,
                                   name);
                return;
            }
            c->inject_rule = rule;
            c->inject_headers = json_incref(hv);
        }
        if (json_is_true(json_object_get(rule, "audit")))
            snprintf(c->audit_rule, sizeof(c->audit_rule), "%s", name);
    }
    if (own && !egress_policy_allows(pol, host)) {
        egress_conn_refuse(c, 403, "denied", "host_not_allowed",
                           "%s is not in this sandbox's egress %s", host,
                           pol->mode == EGRESS_MODE_PRESET ? "preset" : "allowlist");
        return;
    }
    if (!egress_operator_host_allowed(c->px->op, host) &&
        !egress_operator_may_allow_by_address(c->px->op)) {
        egress_conn_refuse(c, 403, "denied", "operator_default_deny",
                           "%s is not in the operator's allow_out", host);
        return;
    }
    c->state = ST_RESOLVING;
    egress_conn_stop_timer(c);
    c->timer = loop_timer_add(c->px->loop, EGRESS_RESOLVE_TIMEOUT_MS, on_resolve_timeout, c);
    c->lookup = egress_resolve(c->px->resolver, host, resolved, c);
}
