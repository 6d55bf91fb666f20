/* The checks for what sbxd fetches itself for a sandbox (url inputs): the operator's policy
 * and the address rules of the proxy's connections, without a connection. Not the sandbox's
 * own policy: sbxd fetches, the sandbox only gets the bytes (docs/files.md). */
#include <errno.h>
#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "proxy_internal.h"
#include "resolve.h"

int egress_proxy_check_url(const struct egress_proxy *px, const char *url,
                           char host[EGRESS_HOST_MAX + 1], struct sbx_err *err)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    size_t len = strlen(url);
    if (http_parser_parse_url(url, len, 0, &u) != 0 || !(u.field_set & (1 << UF_HOST)) ||
        !(u.field_set & (1 << UF_SCHEMA)) || u.field_data[UF_SCHEMA].len != 5 ||
        strncasecmp(url + u.field_data[UF_SCHEMA].off, "https", 5))
        return sbx_err_set(err, EINVAL, "invalid_input", "url must be an https:// URL");
    if ((u.field_set & (1 << UF_PORT)) && u.port != 443)
        return sbx_err_set(err, EACCES, "egress_denied", "url: only port 443 is allowed");
    if (u.field_set & (1 << UF_USERINFO))
        return sbx_err_set(err, EINVAL, "invalid_input", "url must not carry credentials");
    if (egress_host_normalise(url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len, host,
                              err) < 0)
        return sbx_err_set(err, EINVAL, "invalid_input", "url: %s", err->msg);
    if (egress_host_is_ip(host))
        return sbx_err_set(err, EACCES, "egress_denied",
                           "url: %s is an IP address: egress allows host names only", host);
    if (egress_host_is_internal(host))
        return sbx_err_set(err, EACCES, "egress_denied", "url: %s is an internal name", host);
    if (!egress_operator_host_allowed(px->op, host) &&
        !egress_operator_may_allow_by_address(px->op))
        return sbx_err_set(err, EACCES, "egress_denied",
                           "url: %s is not in the operator's allow_out", host);
    return 0;
}

struct egress_check {
    struct egress_proxy *px;
    struct egress_lookup *lookup;
    char host[EGRESS_HOST_MAX + 1];
    unsigned port;
    egress_checked_fn cb;
    void *data;
};

static void check_resolved(void *data, int status, const struct egress_addr *addrs, size_t n)
{
    struct egress_check *k = data;
    struct sbx_err err = {0};
    if (status < 0) {
        sbx_err_set(&err, -status, "egress_denied", "%s does not resolve", k->host);
        k->cb(k->data, -status ? status : -ENOENT, NULL, &err);
        free(k);
        return;
    }
    bool host_ok = egress_operator_host_allowed(k->px->op, k->host);
    for (size_t i = 0; i < n; i++) {
        if (!egress_resolver_addr_check(k->px->resolver, &addrs[i], k->port) &&
            !egress_operator_addr_check(k->px->op, host_ok, &addrs[i])) {
            k->cb(k->data, 0, &addrs[i], NULL);
            free(k);
            return;
        }
    }
    sbx_err_set(&err, EACCES, "egress_denied", "%s resolves only to addresses egress refuses",
                k->host);
    k->cb(k->data, -EACCES, NULL, &err);
    free(k);
}

struct egress_check *egress_proxy_resolve_checked(struct egress_proxy *px, const char *host,
                                                  unsigned port, egress_checked_fn cb, void *data)
{
    struct egress_check *k = sbx_xcalloc(1, sizeof(*k));
    k->px = px;
    snprintf(k->host, sizeof(k->host), "%s", host);
    k->port = port;
    k->cb = cb;
    k->data = data;
    k->lookup = egress_resolve(px->resolver, host, check_resolved, k);
    return k;
}

void egress_check_cancel(struct egress_check *k)
{
    if (!k)
        return;
    egress_lookup_cancel(k->lookup);
    free(k);
}
