/* Import circle with e2b_api.c and e2b_secrets.c (allowed inside a folder,
 * docs/architecture.md#layering): e2b_api.c's create and update call it; it opens secrets. */
/* E2B's network (docs/e2b.md): create's `network` with the top-level
 * `allow_internet_access`, and PUT /sandboxes/{id}/network, on sbx's egress.
 *
 * A policy of host names only (allowOut names, no rules, the internet not asked for) is
 * the sandbox's own allowlist (docs/egress.md), or none. Anything more (per-host rules
 * with header transforms, addresses and CIDRs, `*.` names, denyOut, allowInternetAccess)
 * is what a sandbox configuration's network expresses (docs/configs.md): the E2B object is
 * written as a configuration document's network ({deny_egress_by_default, allow_out,
 * deny_out, e2b_host_rules}), checked and sealed by the configuration's own code
 * (configs_doc_of) and applied as a configuration's is (configs_apply at create;
 * config_doc_network and config_doc_inject on an update), so the proxy's one rule engine
 * and its header injection serve both. Header values name the user's secrets as
 * ${e2b.secrets.<name>} (e2b_secrets.c); they are opened here, put in the document (which
 * seals them again for the sandbox) and dropped. */
#include "e2b_network.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../configs/configs.h"
#include "../egress/policy.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "e2b_secrets.h"

#define SECRET_REF "${e2b.secrets."
#define ALL_TRAFFIC "0.0.0.0/0"

/* Is v a list of strings (or absent/null)? */
static bool string_list(json_t *v)
{
    if (!v || json_is_null(v))
        return true;
    if (!json_is_array(v))
        return false;
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) if (!json_is_string(s)) return false;
    return true;
}

static bool lists(json_t *list, const char *want)
{
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) if (!strcmp(json_string_value(s), want)) return true;
    return false;
}

/* A host name the sandbox's own allowlist takes (no address, no wildcard)? */
static bool plain_name(const char *s)
{
    char norm[EGRESS_HOST_MAX + 1];
    struct sbx_err e = {0};
    return !strchr(s, '*') && !strchr(s, '/') &&
           egress_host_normalise(s, strlen(s), norm, &e) == 0 && !egress_host_is_ip(norm);
}

/* A header value with every ${e2b.secrets.<name>} replaced by that secret of user's. */
static int resolve_value(struct sbxd *d, const char *user, const char *in, char **out,
                         struct sbx_err *err)
{
    size_t cap = strlen(in) + 1, len = 0;
    char *buf = sbx_xmalloc(cap);
    const char *p = in;
    int r = 0;
    while (*p) {
        const char *ref = strstr(p, SECRET_REF);
        const char *other = strstr(p, "${e2b.");
        if (other && (!ref || other < ref)) {
            r = sbx_err_set(err, ENOSYS, "e2b_not_supported",
                            "network.rules: only ${e2b.secrets.<name>} placeholders are served "
                            "here (workload identity tokens are not)");
            break;
        }
        const char *end = ref ? strchr(ref + strlen(SECRET_REF), '}') : NULL;
        size_t lit = ref ? (size_t)(ref - p) : strlen(p);
        char *val = NULL;
        if (ref && !end) {
            r = sbx_err_set(err, EINVAL, "invalid_request",
                            "network.rules: an unterminated ${e2b.secrets.…} placeholder");
            break;
        }
        if (ref) {
            _cleanup_free_ char *name = sbx_xasprintf(
                "%.*s", (int)(end - ref - strlen(SECRET_REF)), ref + strlen(SECRET_REF));
            if ((r = e2b_secret_value(d, user, name, &val, err)) < 0) {
                if (r == -ENOENT)
                    snprintf(err->code, sizeof(err->code), "invalid_request");
                break;
            }
        }
        size_t vlen = val ? strlen(val) : 0;
        if (len + lit + vlen + 1 > cap) {
            char *bigger = sbx_xmalloc(cap = (len + lit + vlen + 1) * 2);
            memcpy(bigger, buf, len);
            OPENSSL_cleanse(buf, len);
            free(buf);
            buf = bigger;
        }
        memcpy(buf + len, p, lit);
        len += lit;
        if (val) {
            memcpy(buf + len, val, vlen);
            len += vlen;
            secrets_drop(val);
        }
        p = ref ? end + 1 : p + lit;
    }
    buf[len] = '\0';
    if (r < 0) {
        secrets_drop(buf);
        return r;
    }
    *out = buf;
    return 0;
}

/* rules {host: [{transform: {headers: {name: value}}}]} as e2b_host_rules [{host, headers}]:
 * a host's rules are one header set (a later rule's header replaces an earlier one). */
static int host_rules(struct sbxd *d, const char *user, json_t *rules, json_t *out,
                      struct sbx_err *err)
{
    const char *host;
    json_t *list;
    json_object_foreach(rules, host, list)
    {
        if (!json_is_array(list))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "network.rules.%.128s must be a list of rules", host);
        json_t *headers = json_object();
        json_array_append_new(out, json_pack("{s:s,s:o}", "host", host, "headers", headers));
        size_t i;
        json_t *rule;
        json_array_foreach(list, i, rule)
        {
            json_t *h = json_object_get(json_object_get(rule, "transform"), "headers");
            if (!json_is_object(rule) || (h && !json_is_object(h)))
                return sbx_err_set(err, EINVAL, "invalid_request",
                                   "network.rules.%.128s[%zu] must be {transform: {headers}}",
                                   host, i);
            const char *name;
            json_t *v;
            json_object_foreach(h, name, v)
            {
                char *clear = NULL;
                if (!json_is_string(v))
                    return sbx_err_set(err, EINVAL, "invalid_request",
                                       "network.rules.%.128s headers.%.64s must be a string",
                                       host, name);
                int r = resolve_value(d, user, json_string_value(v), &clear, err);
                if (r < 0)
                    return r;
                json_object_set_new(headers, name, json_string(clear));
                secrets_drop(clear);
            }
        }
        if (!json_object_size(headers))
            json_array_remove(out, json_array_size(out) - 1); /* a rule with no headers does nothing */
    }
    return 0;
}

/* Drop the clear header values from a document built for the configuration's checks. */
static void drop_clear(json_t *config)
{
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(json_object_get(config, "network"), "e2b_host_rules"), i,
                       rule)
    {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(rule, "headers"), k, v)
            OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
    }
    json_decref(config);
}

int e2b_network_parse(struct sbxd *d, const char *user, json_t *network, json_t *internet,
                      const char *template_name, struct e2b_network *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    if (network && json_is_null(network))
        network = NULL;
    if (internet && json_is_null(internet))
        internet = NULL;
    if (network && !json_is_object(network))
        return sbx_err_set(err, EINVAL, "invalid_request", "network must be an object");
    if (internet && !json_is_boolean(internet))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "allow_internet_access must be a boolean");
    json_t *allow = json_object_get(network, "allowOut");
    json_t *deny = json_object_get(network, "denyOut");
    json_t *rules = json_object_get(network, "rules");
    if (!string_list(allow) || !string_list(deny))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "network.allowOut and network.denyOut must be lists of strings");
    if (rules && !json_is_null(rules) && !json_is_object(rules))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "network.rules must be an object {host: [rule]}");
    if (json_object_get(network, "egressProxy") &&
        !json_is_null(json_object_get(network, "egressProxy")))
        return sbx_err_set(err, ENOSYS, "e2b_not_supported",
                           "network.egressProxy is not supported by this sbx server");
    /* E2B: allowInternetAccess false is denyOut [0.0.0.0/0]; allowOut wins over denyOut.
     * sbx's default, when neither is given, stays its own: nothing gets out. */
    bool closed = json_is_false(internet) || lists(deny, ALL_TRAFFIC) ||
                  (!internet && !json_array_size(deny));
    bool plain = closed && !json_object_size(rules);
    size_t i;
    json_t *s;
    json_array_foreach(allow, i, s) plain = plain && plain_name(json_string_value(s));
    if (plain) {
        json_t *p = json_array_size(allow)
                        ? json_pack("{s:s,s:O}", "mode", "allowlist", "domains", allow)
                        : json_pack("{s:s}", "mode", "none");
        int r = egress_policy_parse(p, &out->egress, err);
        json_decref(p);
        return r;
    }
    json_t *allow_out = allow ? json_deep_copy(allow) : json_array();
    json_t *deny_out = json_array();
    json_array_foreach(deny, i, s) if (strcmp(json_string_value(s), ALL_TRAFFIC))
        json_array_append(deny_out, s);
    json_t *e2b = json_array();
    const char *runtime = NULL;
    json_t *config = json_pack(
        "{s:s,s:b,s:{s:b,s:o,s:o,s:o}}", "template", template_name, "desktop_enabled", 1,
        "network", "deny_egress_by_default", closed, "allow_out", allow_out, "deny_out", deny_out,
        "e2b_host_rules", e2b);
    int r = manager_runtime_pick(d->mgr, NULL, &runtime, err);
    if (r == 0) {
        json_object_set_new(config, "backend", json_string(runtime));
        r = host_rules(d, user, rules, e2b, err);
    }
    /* Open to the internet, a rule's host is reachable anyway: the configuration's check
     * wants it listed in allow_out all the same. */
    json_array_foreach(e2b, i, s) if (!closed)
        json_array_append(allow_out, json_object_get(s, "host"));
    if (r == 0)
        r = configs_doc_of(d->configs, config, NULL, &out->doc, err);
    drop_clear(config);
    if (r < 0 && !strcmp(err->code, "invalid_sandbox_config"))
        snprintf(err->code, sizeof(err->code), "invalid_request");
    if (r == 0)
        r = egress_policy_parse(NULL, &out->egress, err); /* none: the document decides */
    return r;
}

void e2b_network_clear(struct e2b_network *n)
{
    json_decref(n->doc);
    n->doc = NULL;
}

int e2b_network_apply(struct sbxd *d, const struct auth_identity *who, struct e2b_network *n,
                      struct sandbox_params *p, json_t **hold, struct sbx_err *err)
{
    *hold = NULL;
    p->egress = n->egress;
    if (!n->doc)
        return 0;
    return configs_apply(d->configs, who, NULL, n->doc, p, hold, err);
}

int e2b_network_update(struct sbxd *d, struct sandbox *sb, struct e2b_network *n,
                       struct sbx_err *err)
{
    if (sb->config_id[0] && !n->doc)
        return 0; /* its own allowlist narrows the configuration's policy (egress_replace) */
    if (sb->config_id[0])
        return sbx_err_set(err, EPERM, "sandbox_config_widened",
                           "sandbox %s takes its network from configuration %s: only a list of "
                           "host names (its own allowlist, which narrows it) can be set",
                           sb->rec.id, sb->config_id);
    json_t *inject = NULL, *net = NULL;
    if (n->doc) {
        int r = config_doc_inject(d->configs->secrets, CONFIGS_PROBE_ID, n->doc, &inject, err);
        if (r < 0)
            return r;
        /* Injection works for clients that trust the proxy's CA, which a sandbox gets at
         * create (configs_apply writes the bundle and points SSL_CERT_FILE at it). */
        if (json_object_size(inject) && !json_object_get(sb->config_env, "SSL_CERT_FILE")) {
            json_decref(inject);
            return sbx_err_set(err, ENOSYS, "e2b_not_supported",
                               "network.rules can be set by an update only on a sandbox created "
                               "with network.rules (its clients trust the proxy's CA from the "
                               "start)");
        }
        net = config_doc_network(n->doc);
    }
    int r = sandbox_network_set(sb, net, err);
    json_decref(net);
    if (r < 0) {
        json_decref(inject);
        return r;
    }
    json_decref(sb->config_inject);
    sb->config_inject = json_object_size(inject) ? inject : NULL;
    if (!sb->config_inject)
        json_decref(inject);
    return 0;
}
