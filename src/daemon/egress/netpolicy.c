#include "netpolicy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"

int egress_netpolicy_parse(json_t *j, struct egress_netpolicy **out, struct sbx_err *err)
{
    if (!json_is_object(j))
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "a sandbox's network policy is not an "
                           "object");
    struct egress_netpolicy *n = sbx_xcalloc(1, sizeof(*n));
    json_t *pol = json_object_get(j, "policy");
    n->allow_private = json_is_true(json_object_get(j, "allow_private_endpoints"));
    if (json_is_object(pol)) {
        int r = egress_operator_parse(pol, &n->op, err);
        if (r < 0) {
            free(n);
            return r;
        }
        json_t *rules = json_object_get(pol, "rules");
        n->rules = json_is_array(rules) ? json_incref(rules) : json_array();
    } else {
        n->rules = json_array();
    }
    *out = n;
    return 0;
}

void egress_netpolicy_free(struct egress_netpolicy *n)
{
    if (!n)
        return;
    egress_operator_free(n->op);
    json_decref(n->rules);
    free(n);
}

static bool host_matches(const char *rule, const char *host)
{
    if (strncmp(rule, "*.", 2))
        return !strcmp(rule, host);
    const char *dot = strchr(host, '.');
    return dot && dot != host && !strcmp(dot + 1, rule + 2);
}

const json_t *egress_netpolicy_rule(const struct egress_netpolicy *n, bool https, const char *host,
                                    const char *method, const char *path)
{
    if (!n)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach(n->rules, i, r)
    {
        const char *scheme = json_string_value(json_object_get(r, "scheme"));
        if (!scheme || strcmp(scheme, https ? "https" : "http"))
            continue;
        /* On a CONNECT the SNI was checked against the host, so both name the host. */
        const char *h = json_string_value(json_object_get(r, "host"));
        const char *sni = json_string_value(json_object_get(r, "sni"));
        if ((h && !host_matches(h, host)) || (sni && !host_matches(sni, host)))
            continue;
        json_t *methods = json_object_get(r, "methods");
        if (methods && method) {
            bool any = false;
            size_t j;
            json_t *m;
            json_array_foreach(methods, j, m)
            {
                any = any || !strcmp(json_string_value(m), method);
            }
            if (!any)
                continue;
        }
        const char *prefix = json_string_value(json_object_get(r, "path"));
        if (prefix && path && strncmp(path, prefix, strlen(prefix)))
            continue;
        return r;
    }
    return NULL;
}
