/* Import circle with config_docker.c (allowed inside a folder,
 * docs/architecture.md#layering): the `docker` object of the document is parsed there,
 * apart for its size, with the ceilings this file's header defines. */
#include "config_doc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jsonfind.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../../runtime/rt.h"
#include "../egress/policy.h"
#include "../sandbox/params.h"
#include "../sandbox/template.h"

#define BAD(...) sbx_err_set(err, EINVAL, "invalid_sandbox_config", __VA_ARGS__)

static const char *const known_fields[] = {
    "backend",
    "template",
    "limits",
    "default_timeout_sec",
    "terminal_idle_disconnect_sec",
    "desktop_enabled",
    "allow_private_endpoints",
    "env_vars",
    "skill_rollout",
    "network",
    "volume_mount",
    "skill_image",
    "docker",
    "sandbox_type", /* document 002's name of backend */
    "e2b",
    "cube",
};

char *config_doc_env_context(const char *id, const char *name)
{
    return sbx_xasprintf("config:%s:env:%s", id, name);
}

static char *inject_context(const char *id, const char *rule, const char *header)
{
    return sbx_xasprintf("config:%s:inject:%s:%s", id, rule, header);
}

static int get_int(json_t *in, const char *field, long long min, long long max, long long dflt,
                   long long *out, struct sbx_err *err)
{
    json_t *v = json_object_get(in, field);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return BAD("%s must be an integer from %lld to %lld", field, min, max);
    *out = json_integer_value(v);
    return 0;
}

static int get_bool(json_t *in, const char *field, bool *out, struct sbx_err *err)
{
    json_t *v = json_object_get(in, field);
    *out = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return BAD("%s must be true or false", field);
    *out = json_is_true(v);
    return 0;
}

static int build_limits(json_t *in, const struct config_ceilings *ceil, json_t **out,
                        struct sbx_err *err)
{
    json_t *l = json_object_get(in, "limits");
    if (l && !json_is_null(l) && !json_is_object(l))
        return BAD("limits must be an object {memory_mb, pids, cpu_millicores}");
    const char *k;
    json_t *v;
    json_object_foreach(l, k, v)
    {
        if (strcmp(k, "memory_mb") && strcmp(k, "pids") && strcmp(k, "cpu_millicores"))
            return BAD("limits.%.64s is not a limit (memory_mb, pids, cpu_millicores)", k);
    }
    /* 0 is the daemon's own limit, as answers show it: a document read back saves again. */
    json_t *given = json_object();
    json_object_foreach(l, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) != 0)
            json_object_set(given, k, v);
    }
    long long mem, pids, cpu;
    int r;
    if ((r = get_int(given, "memory_mb", 64, ceil->memory_mb, 0, &mem, err)) < 0 ||
        (r = get_int(given, "pids", 16, ceil->pids, 0, &pids, err)) < 0 ||
        (r = get_int(given, "cpu_millicores", 100, ceil->cpu_millicores, 0, &cpu, err)) < 0) {
        json_decref(given);
        return sbx_err_wrap(err, "limits (at most this host's)");
    }
    json_decref(given);
    *out = json_pack("{s:I,s:I,s:I}", "memory_mb", (json_int_t)mem, "pids", (json_int_t)pids,
                     "cpu_millicores", (json_int_t)cpu);
    return 0;
}

/* The stored sealed value of a secret the client sent back masked. */
static int keep_masked(const char *what, const char *stored, char **out, struct sbx_err *err)
{
    if (!stored || !secrets_is_sealed(stored))
        return BAD("%s is the masked placeholder but nothing is stored to keep", what);
    *out = sbx_xstrdup(stored);
    return 0;
}

int config_doc_seal_or_keep(const struct secrets *sec, const char *context, const char *what,
                            const char *value, const char *stored, char **out,
                            struct sbx_err *err)
{
    if (!strcmp(value, SECRETS_MASK))
        return keep_masked(what, stored, out, err);
    return secrets_seal(sec, context, value, out, err);
}

static int build_env(const struct secrets *sec, const char *id, json_t *in, const json_t *stored,
                     json_t **out, struct sbx_err *err)
{
    json_t *env = json_object_get(in, "env_vars");
    if (env && json_is_null(env))
        env = NULL;
    int r = sandbox_env_validate(env, "env_vars", err);
    if (r < 0) {
        snprintf(err->code, sizeof(err->code), "invalid_sandbox_config");
        return r;
    }
    json_t *old = json_object_get(stored, "env_vars");
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        _cleanup_free_ char *ctx = config_doc_env_context(id, k);
        _cleanup_free_ char *what = sbx_xasprintf("env_vars.%.64s", k);
        char *sealed = NULL;
        r = config_doc_seal_or_keep(sec, ctx, what, json_string_value(v),
                         json_string_value(json_object_get(old, k)), &sealed, err);
        if (r < 0) {
            json_decref(o);
            return r;
        }
        json_object_set_new(o, k, json_string(sealed));
        free(sealed);
    }
    *out = o;
    return 0;
}

static bool header_name_valid(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n > CONFIG_HEADER_MAX)
        return false;
    for (const char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_'))
            return false;
    /* Headers the proxy itself owns, or that change how the request is framed. */
    static const char *const owned[] = {
        "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(owned); i++)
        if (!strcasecmp(h, owned[i]))
            return false;
    return true;
}

static int rule_host(json_t *rule, const char *list, const char *field, size_t i, json_t *out,
                     struct sbx_err *err)
{
    json_t *v = json_object_get(rule, field);
    if (!v || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    if (!s)
        return BAD("network.%s[%zu].%s must be a host name or *.domain", list, i, field);
    bool wild = !strncmp(s, "*.", 2);
    char host[EGRESS_HOST_MAX + 1];
    struct sbx_err e2 = {0};
    if (egress_host_normalise(wild ? s + 2 : s, strlen(wild ? s + 2 : s), host, &e2) < 0 ||
        egress_host_is_ip(host))
        return BAD("network.%s[%zu].%s (%.64s) must be a host name or *.domain", list, i, field, s);
    _cleanup_free_ char *norm = sbx_xasprintf("%s%s", wild ? "*." : "", host);
    json_object_set_new(out, field, json_string(norm));
    return 0;
}

/* The stored rule of that name, in rules or cube_rules (the same list under its two
 * names: a client may switch from one to the other and keep its masked secrets). */
static const json_t *stored_rule(const json_t *stored, const char *name)
{
    const json_t *net = json_object_get(stored, "network");
    const json_t *r = sbx_json_find(json_object_get(net, "rules"), "name", name);
    return r ? r : sbx_json_find(json_object_get(net, "cube_rules"), "name", name);
}

static int build_inject(const struct secrets *sec, const char *id, json_t *rule, const char *list,
                        size_t i, const char *name, const json_t *stored, json_t *out,
                        struct sbx_err *err)
{
    json_t *inj = json_object_get(rule, "inject");
    if (!inj || json_is_null(inj))
        return 0;
    if (!json_is_array(inj) || json_array_size(inj) > CONFIG_INJECT_MAX)
        return BAD("network.%s[%zu].inject must be a list of at most %d {header, secret, "
                   "format}",
                   list, i, CONFIG_INJECT_MAX);
    const json_t *old = stored_rule(stored, name);
    json_t *sealed_list = json_array();
    json_object_set_new(out, "inject", sealed_list);
    size_t j;
    json_t *h;
    json_array_foreach(inj, j, h)
    {
        const char *header = json_string_value(json_object_get(h, "header"));
        const char *secret = json_string_value(json_object_get(h, "secret"));
        json_t *fv = json_object_get(h, "format");
        const char *format = fv && !json_is_null(fv) ? json_string_value(fv) : "{secret}";
        if (!json_is_object(h) || !header || !header_name_valid(header) || !secret || !format)
            return BAD("network.%s[%zu].inject[%zu] must be {header (a header name the "
                       "proxy does not own), secret (string), format?}",
                       list, i, j);
        const char *at = strstr(format, "{secret}");
        if (!at || strstr(at + 1, "{secret}") || strlen(format) > CONFIG_HEADER_MAX ||
            strpbrk(format, "\r\n"))
            return BAD("network.%s[%zu].inject[%zu].format must hold {secret} once, on one "
                       "line",
                       list, i, j);
        if (strpbrk(secret, "\r\n"))
            return BAD("network.%s[%zu].inject[%zu].secret must be on one line", list, i, j);
        const char *old_secret = NULL;
        size_t k;
        json_t *oh;
        json_array_foreach(json_object_get(old, "inject"), k, oh)
        {
            const char *oname = json_string_value(json_object_get(oh, "header")) ?: "";
            if (strcasecmp(oname, header))
                continue;
            old_secret = json_string_value(json_object_get(oh, "secret"));
            /* A kept value stays under the name it was sealed with. */
            if (!strcmp(secret, SECRETS_MASK))
                header = oname;
        }
        _cleanup_free_ char *ctx = inject_context(id, name, header);
        _cleanup_free_ char *what = sbx_xasprintf("network.%s[%zu].inject[%zu].secret", list, i, j);
        char *sealed = NULL;
        int r = config_doc_seal_or_keep(sec, ctx, what, secret, old_secret, &sealed, err);
        if (r < 0)
            return r;
        json_array_append_new(sealed_list, json_pack("{s:s,s:s,s:s}", "header", header, "secret",
                                                     sealed, "format", format));
        free(sealed);
    }
    return 0;
}

static int build_rule(const struct secrets *sec, const char *id, json_t *rule, const char *list,
                      size_t i, const json_t *stored, json_t *names, json_t **out,
                      struct sbx_err *err)
{
    if (!json_is_object(rule))
        return BAD("network.%s[%zu] must be an object", list, i);
    const char *name = json_string_value(json_object_get(rule, "name"));
    if (!name || !name[0] || strlen(name) > 64 || json_object_get(names, name))
        return BAD("network.%s[%zu].name must be a distinct string of 1-64 characters", list, i);
    json_object_set_new(names, name, json_true());
    json_t *sv = json_object_get(rule, "scheme");
    const char *scheme = sv && !json_is_null(sv) ? json_string_value(sv) : "https";
    if (!scheme || (strcmp(scheme, "https") && strcmp(scheme, "http")))
        return BAD("network.%s[%zu].scheme must be \"https\" or \"http\"", list, i);
    json_t *o = json_pack("{s:s,s:s}", "name", name, "scheme", scheme);
    int r;
    bool deny, audit;
    if ((r = rule_host(rule, list, "host", i, o, err)) < 0 ||
        (r = rule_host(rule, list, "sni", i, o, err)) < 0 ||
        (r = get_bool(rule, "deny", &deny, err)) < 0 ||
        (r = get_bool(rule, "audit", &audit, err)) < 0)
        goto fail;
    if (!json_object_get(o, "host") && !json_object_get(o, "sni")) {
        r = BAD("network.%s[%zu] needs host or sni", list, i);
        goto fail;
    }
    if (json_object_get(o, "sni") && strcmp(scheme, "https")) {
        r = BAD("network.%s[%zu].sni is for https rules", list, i);
        goto fail;
    }
    json_object_set_new(o, "deny", json_boolean(deny));
    json_object_set_new(o, "audit", json_boolean(audit));
    json_t *m = json_object_get(rule, "methods");
    if (m && !json_is_null(m)) {
        if (!json_is_array(m) || json_array_size(m) > 16) {
            r = BAD("network.%s[%zu].methods must be a list of HTTP methods", list, i);
            goto fail;
        }
        json_t *ms = json_array();
        json_object_set_new(o, "methods", ms);
        size_t j;
        json_t *mv;
        json_array_foreach(m, j, mv)
        {
            const char *s = json_string_value(mv);
            bool ok = s && s[0] && strlen(s) <= 16;
            for (const char *c = s; ok && *c; c++)
                ok = *c >= 'A' && *c <= 'Z';
            if (!ok) {
                r = BAD("network.%s[%zu].methods[%zu] must be an upper-case method", list, i, j);
                goto fail;
            }
            json_array_append_new(ms, json_string(s));
        }
    }
    json_t *p = json_object_get(rule, "path");
    if (p && !json_is_null(p)) {
        const char *s = json_string_value(p);
        if (!s || s[0] != '/' || strlen(s) > CONFIG_PATH_MAX || strpbrk(s, " \r\n")) {
            r = BAD("network.%s[%zu].path must be a path prefix starting with /", list, i);
            goto fail;
        }
        json_object_set_new(o, "path", json_string(s));
    }
    if ((r = build_inject(sec, id, rule, list, i, name, stored, o, err)) < 0)
        goto fail;
    bool inject = json_array_size(json_object_get(o, "inject")) > 0;
    if (inject && (strcmp(scheme, "https") || deny)) {
        r = BAD("network.%s[%zu]: inject is for https rules that do not deny", list, i);
        goto fail;
    }
    /* Without terminating TLS the proxy sees only the name of an https connection, so a
     * method or path on an https rule could never be judged. */
    if (!inject && !strcmp(scheme, "https") &&
        (json_object_get(o, "methods") || json_object_get(o, "path"))) {
        r = BAD("network.%s[%zu]: methods and path on an https rule need inject (the proxy "
                "reads https requests only for hosts it injects into)",
                list, i);
        goto fail;
    }
    *out = o;
    return 0;
fail:
    json_decref(o);
    return r;
}

/* The name an e2b_host_rules entry has among the rules the proxy applies. */
static char *e2b_rule_name(const char *host)
{
    return sbx_xasprintf("e2b:%s", host);
}

/* Is host (a name or *.domain, normalised) listed in allow_out? The document requires an
 * e2b host rule's host there: the rule only adds headers, allow_out lets it out. */
static bool allow_out_lists(json_t *allow, const char *host)
{
    size_t i;
    json_t *v;
    json_array_foreach(allow, i, v)
    {
        const char *a = json_string_value(v);
        char norm[EGRESS_HOST_MAX + 1];
        struct sbx_err e2 = {0};
        bool wild = a && !strncmp(a, "*.", 2);
        if (!a || egress_host_normalise(wild ? a + 2 : a, strlen(wild ? a + 2 : a), norm, &e2) < 0)
            continue;
        _cleanup_free_ char *entry = sbx_xasprintf("%s%s", wild ? "*." : "", norm);
        if (!strcmp(host, entry))
            return true;
        /* One wildcard label, as the proxy matches it. */
        const char *dot = strchr(host, '.');
        if (wild && host[0] != '*' && dot && dot != host && !strcmp(dot + 1, norm))
            return true;
    }
    return false;
}

/* e2b_host_rules[i] = {host, headers: {header: secret}}: stored {host, headers: {header:
 * sealed}}, secrets bound to the rule the proxy knows it as (e2b:<host>). */
static int build_e2b_rule(const struct secrets *sec, const char *id, json_t *rule, size_t i,
                          json_t *allow, const json_t *stored, json_t *names, json_t **out,
                          struct sbx_err *err)
{
    if (!json_is_object(rule))
        return BAD("network.e2b_host_rules[%zu] must be an object {host, headers}", i);
    const char *k;
    json_t *v;
    json_object_foreach(rule, k, v)
    {
        if (strcmp(k, "host") && strcmp(k, "headers"))
            return BAD("network.e2b_host_rules[%zu].%.64s is not a field (host, headers)", i, k);
    }
    json_t *o = json_object();
    int r = rule_host(rule, "e2b_host_rules", "host", i, o, err);
    const char *host = json_string_value(json_object_get(o, "host"));
    json_t *headers = json_object_get(rule, "headers");
    if (r == 0 && !host)
        r = BAD("network.e2b_host_rules[%zu] needs host", i);
    else if (r == 0 && !allow_out_lists(allow, host))
        r = BAD("network.e2b_host_rules[%zu].host %s must also be in network.allow_out", i, host);
    else if (r == 0 && (!json_is_object(headers) || json_object_size(headers) == 0 ||
                        json_object_size(headers) > CONFIG_INJECT_MAX))
        r = BAD("network.e2b_host_rules[%zu].headers must be {header: secret}, 1 to %d", i,
                CONFIG_INJECT_MAX);
    _cleanup_free_ char *name = host ? e2b_rule_name(host) : NULL;
    if (r == 0 && json_object_get(names, name))
        r = BAD("network.e2b_host_rules[%zu]: host %s is named twice (or a rule is named %s)", i,
                host, name);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    json_object_set_new(names, name, json_true());
    json_t *old = NULL;
    size_t j;
    json_array_foreach(json_object_get(json_object_get(stored, "network"), "e2b_host_rules"), j, v)
    {
        if (!strcmp(json_string_value(json_object_get(v, "host")) ?: "", host))
            old = json_object_get(v, "headers");
    }
    json_t *sealed_headers = json_object();
    json_object_set_new(o, "headers", sealed_headers);
    json_object_foreach(headers, k, v)
    {
        const char *secret = json_string_value(v);
        if (!header_name_valid(k) || !secret || strpbrk(secret, "\r\n")) {
            json_decref(o);
            return BAD("network.e2b_host_rules[%zu].headers.%.64s must be a header name the "
                       "proxy does not own, its secret a string on one line",
                       i, k);
        }
        const char *old_secret = NULL, *ok, *hname = k;
        json_t *ov;
        json_object_foreach(old, ok, ov)
        {
            if (strcasecmp(ok, k))
                continue;
            old_secret = json_string_value(ov);
            /* A kept value stays under the name it was sealed with. */
            if (!strcmp(secret, SECRETS_MASK))
                hname = ok;
        }
        _cleanup_free_ char *ctx = inject_context(id, name, hname);
        _cleanup_free_ char *what =
            sbx_xasprintf("network.e2b_host_rules[%zu].headers.%.64s", i, k);
        char *sealed = NULL;
        if ((r = config_doc_seal_or_keep(sec, ctx, what, secret, old_secret, &sealed, err)) < 0) {
            json_decref(o);
            return r;
        }
        json_object_set_new(sealed_headers, hname, json_string(sealed));
        free(sealed);
    }
    *out = o;
    return 0;
}

/* A list field of network: absent, null or a list of at most CONFIG_RULES_MAX. */
static int rule_list(json_t *n, const char *field, json_t **out, struct sbx_err *err)
{
    json_t *l = json_object_get(n, field);
    *out = l && !json_is_null(l) ? l : NULL;
    if (*out && (!json_is_array(l) || json_array_size(l) > CONFIG_RULES_MAX))
        return BAD("network.%s must be a list of at most %d rules", field, CONFIG_RULES_MAX);
    return 0;
}

/* network as stored: deny_egress_by_default, allow_out, deny_out, rules, and, when the
 * client sent them, the document's cube_rules and e2b_host_rules in their own shape (the
 * way out shows what was sent; config_doc_network turns them into rules for the proxy). */
static int build_network(const struct secrets *sec, const char *id, json_t *in,
                         const json_t *stored, json_t **out, struct sbx_err *err)
{
    json_t *n = json_object_get(in, "network");
    if (!n || json_is_null(n)) {
        *out = json_null();
        return 0;
    }
    if (!json_is_object(n))
        return BAD("network must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(n, k, v)
    {
        if (strcmp(k, "deny_egress_by_default") && strcmp(k, "allow_out") &&
            strcmp(k, "deny_out") && strcmp(k, "rules") && strcmp(k, "cube_rules") &&
            strcmp(k, "e2b_host_rules") && strcmp(k, "allow_public_inbound"))
            return BAD("network.%.64s is not a network policy field", k);
    }
    struct egress_operator *op = NULL;
    int r = egress_operator_parse(n, &op, err);
    egress_operator_free(op);
    if (r < 0) {
        snprintf(err->code, sizeof(err->code), "invalid_sandbox_config");
        return r;
    }
    json_t *rules, *cube, *e2b;
    if ((r = rule_list(n, "rules", &rules, err)) < 0 ||
        (r = rule_list(n, "cube_rules", &cube, err)) < 0 ||
        (r = rule_list(n, "e2b_host_rules", &e2b, err)) < 0)
        return r;
    /* One ordered list under two names: where both hold rules, no order between them
     * would be the one the client meant. */
    if (json_array_size(rules) && json_array_size(cube))
        return BAD("network.rules and network.cube_rules are the same ordered list: send one");
    /* allow_public_inbound is accepted from old inputs and dropped: inbound always needs
     * credentials here (preview links are signed). */
    json_t *allow = json_object_get(n, "allow_out"), *deny = json_object_get(n, "deny_out");
    json_t *o = json_pack("{s:b,s:o,s:o,s:[]}", "deny_egress_by_default",
                          json_is_true(json_object_get(n, "deny_egress_by_default")), "allow_out",
                          allow ? json_incref(allow) : json_array(), "deny_out",
                          deny ? json_incref(deny) : json_array(), "rules");
    if (cube)
        json_object_set_new(o, "cube_rules", json_array());
    if (e2b)
        json_object_set_new(o, "e2b_host_rules", json_array());
    json_t *names = json_object();
    size_t i;
    for (int l = 0; l < 2 && r == 0; l++) {
        const char *list = l ? "cube_rules" : "rules";
        json_array_foreach(l ? cube : rules, i, v)
        {
            json_t *rule = NULL;
            if ((r = build_rule(sec, id, v, list, i, stored, names, &rule, err)) < 0)
                break;
            json_array_append_new(json_object_get(o, list), rule);
        }
    }
    json_array_foreach(r == 0 ? e2b : NULL, i, v)
    {
        json_t *rule = NULL;
        if ((r = build_e2b_rule(sec, id, v, i, json_object_get(o, "allow_out"), stored, names,
                                &rule, err)) < 0)
            break;
        json_array_append_new(json_object_get(o, "e2b_host_rules"), rule);
    }
    json_decref(names);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    *out = o;
    return 0;
}

/* The rules the proxy applies, in order, secrets still sealed: rules (or cube_rules, the
 * same list), then each e2b host rule as an https rule injecting its headers as they are. */
static json_t *engine_rules(const json_t *net)
{
    json_t *all = json_array();
    static const char *const lists[] = {"rules", "cube_rules"};
    for (size_t l = 0; l < SBX_ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(net, lists[l]), i, r)
        {
            json_array_append_new(all, json_deep_copy(r));
        }
    }
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(net, "e2b_host_rules"), i, r)
    {
        const char *host = json_string_value(json_object_get(r, "host"));
        _cleanup_free_ char *name = e2b_rule_name(host);
        json_t *inject = json_array();
        const char *h;
        json_t *sv;
        json_object_foreach(json_object_get(r, "headers"), h, sv)
        {
            json_array_append_new(inject, json_pack("{s:s,s:O,s:s}", "header", h, "secret", sv,
                                                    "format", "{secret}"));
        }
        json_array_append_new(all, json_pack("{s:s,s:s,s:s,s:b,s:b,s:o}", "name", name, "scheme",
                                             "https", "host", host, "deny", 0, "audit", 0, "inject",
                                             inject));
    }
    return all;
}

static int build_volume(json_t *in, json_t **out, struct sbx_err *err)
{
    json_t *v = json_object_get(in, "volume_mount");
    if (!v || json_is_null(v)) {
        *out = json_null();
        return 0;
    }
    if (!json_is_object(v))
        return BAD("volume_mount must be an object");
    json_t *o = json_object();
    static const char *const strs[] = {"mount_path", "provider", "volume_id", "volume_name"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(strs); i++) {
        json_t *s = json_object_get(v, strs[i]);
        if (s && !json_is_null(s) && (!json_is_string(s) || json_string_length(s) > 256)) {
            json_decref(o);
            return BAD("volume_mount.%s must be a string", strs[i]);
        }
        if (s && json_is_string(s))
            json_object_set(o, strs[i], s);
    }
    bool enabled;
    int r = get_bool(v, "enabled", &enabled, err);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    json_object_set_new(o, "enabled", json_boolean(enabled));
    *out = o;
    return 0;
}

int config_doc_build(const struct secrets *sec, const struct config_ceilings *ceil, const char *id,
                     json_t *in, const json_t *stored, json_t **out, struct sbx_err *err)
{
    if (!json_is_object(in))
        return BAD("config must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(in, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(known_fields) && !known; i++)
            known = !strcmp(k, known_fields[i]);
        if (!known)
            return BAD("config.%.64s is not a configuration field", k);
    }
    v = json_object_get(in, "backend");
    json_t *st = json_object_get(in, "sandbox_type");
    if (st && !json_is_null(st)) {
        if (v && !json_is_null(v) && !json_equal(v, st))
            return BAD("backend and sandbox_type name two backends");
        v = st;
    }
    const char *backend = "gvisor";
    if (v && !json_is_null(v)) {
        if (!rt_backend_find(json_string_value(v)))
            return BAD("backend must be \"gvisor\", \"namespaces\", \"local\", \"docker\", "
                       "\"e2b\" or \"cube\"");
        backend = rt_backend_find(json_string_value(v))->name;
    }
    v = json_object_get(in, "template");
    const char *tpl = CONFIG_STANDARD_TEMPLATE;
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || !template_name_valid(json_string_value(v)))
            return BAD("template must be a template name");
        tpl = json_string_value(v);
    }
    v = json_object_get(in, "skill_rollout");
    const char *rollout = "next_turn";
    if (v && !json_is_null(v)) {
        rollout = json_string_value(v);
        if (!rollout || (strcmp(rollout, "next_turn") && strcmp(rollout, "new_session")))
            return BAD("skill_rollout must be \"next_turn\" or \"new_session\"");
    }
    long long timeout, idle;
    bool desktop, priv;
    int r;
    if ((r = get_int(in, "default_timeout_sec", 0, ceil->command_timeout_sec, 0, &timeout,
                     err)) < 0 ||
        (r = get_int(in, "terminal_idle_disconnect_sec", 0, CONFIG_TERMINAL_IDLE_MAX, 0, &idle,
                     err)) < 0 ||
        (r = get_bool(in, "desktop_enabled", &desktop, err)) < 0 ||
        (r = get_bool(in, "allow_private_endpoints", &priv, err)) < 0)
        return r;
    if (!desktop && !strcmp(tpl, CONFIG_DESKTOP_TEMPLATE))
        return BAD("template %s needs desktop_enabled true", CONFIG_DESKTOP_TEMPLATE);
    if (idle && idle < CONFIG_TERMINAL_IDLE_MIN)
        return BAD("terminal_idle_disconnect_sec must be 0 (%d) or from %d to %d",
                   CONFIG_TERMINAL_IDLE_DEFAULT, CONFIG_TERMINAL_IDLE_MIN,
                   CONFIG_TERMINAL_IDLE_MAX);
    json_t *limits = NULL, *env = NULL, *net = NULL, *vol = NULL, *docker = NULL, *prov = NULL;
    if ((r = build_limits(in, ceil, &limits, err)) < 0 ||
        (r = config_doc_docker(in, backend, ceil, limits, &docker, err)) < 0 ||
        (r = config_doc_provider(sec, id, in, stored, backend, &prov, err)) < 0 ||
        (r = build_env(sec, id, in, stored, &env, err)) < 0 ||
        (r = build_network(sec, id, in, stored, &net, err)) < 0 ||
        (r = build_volume(in, &vol, err)) < 0) {
        json_decref(limits);
        json_decref(env);
        json_decref(net);
        json_decref(docker);
        json_decref(prov);
        return r;
    }
    if (!strcmp(backend, "local") &&
        (json_is_true(json_object_get(net, "deny_egress_by_default")) ||
         json_array_size(json_object_get(net, "allow_out")) ||
         json_array_size(json_object_get(net, "deny_out")) ||
         json_array_size(json_object_get(net, "rules")) ||
         json_array_size(json_object_get(net, "cube_rules")) ||
         json_array_size(json_object_get(net, "e2b_host_rules")))) {
        /* Its sandboxes have the host's network and no egress proxy: nothing would hold. */
        json_decref(limits);
        json_decref(env);
        json_decref(net);
        json_decref(vol);
        json_decref(docker);
        json_decref(prov);
        return BAD("backend local has the host's network: a network policy cannot be applied");
    }
    json_t *image = json_object_get(stored, "skill_image");
    *out =
        json_pack("{s:s,s:s,s:o,s:I,s:I,s:b,s:b,s:o,s:s,s:o,s:o,s:O}", "backend", backend,
                  "template", tpl, "limits", limits, "default_timeout_sec", (json_int_t)timeout,
                  "terminal_idle_disconnect_sec", (json_int_t)idle, "desktop_enabled", desktop,
                  "allow_private_endpoints", priv, "env_vars", env, "skill_rollout", rollout,
                  "network", net, "volume_mount", vol, "skill_image", image ? image : json_null());
    if (*out && docker)
        json_object_set_new(*out, "docker", docker);
    if (*out && prov)
        json_object_set_new(*out, backend, prov);
    return 0;
}

json_t *config_doc_masked(const json_t *stored)
{
    json_t *o = json_deep_copy(stored);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(o, "env_vars"), k, v)
    {
        json_string_set(v, SECRETS_MASK);
    }
    size_t i, j;
    json_t *rule, *h;
    json_t *net = json_object_get(o, "network");
    static const char *const lists[] = {"rules", "cube_rules"};
    for (size_t l = 0; l < SBX_ARRAY_SIZE(lists); l++) {
        json_array_foreach(json_object_get(net, lists[l]), i, rule)
        {
            json_array_foreach(json_object_get(rule, "inject"), j, h)
            {
                json_object_set_new(h, "secret", json_string(SECRETS_MASK));
            }
        }
    }
    json_array_foreach(json_object_get(net, "e2b_host_rules"), i, rule)
    {
        json_object_foreach(json_object_get(rule, "headers"), k, v)
        {
            json_string_set(v, SECRETS_MASK);
        }
    }
    config_doc_provider_mask(o);
    json_t *vol = json_object_get(o, "volume_mount");
    /* Mounted by every backend (docs/volumes.md). */
    if (json_is_object(vol))
        json_object_set_new(vol, "supported", json_true());
    return o;
}

int config_doc_env(const struct secrets *sec, const char *id, const json_t *stored, json_t **out,
                   struct sbx_err *err)
{
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(stored, "env_vars"), k, v)
    {
        _cleanup_free_ char *ctx = config_doc_env_context(id, k);
        char *plain = NULL;
        int r = secrets_open_value(sec, ctx, json_string_value(v), &plain, err);
        if (r < 0) {
            json_decref(o);
            return r;
        }
        json_object_set_new(o, k, json_string(plain));
        secrets_drop(plain);
    }
    *out = o;
    return 0;
}

int config_doc_inject(const struct secrets *sec, const char *id, const json_t *stored, json_t **out,
                      struct sbx_err *err)
{
    json_t *o = json_object();
    size_t i, j;
    json_t *rule, *h;
    json_t *rules = engine_rules(json_object_get(stored, "network"));
    json_array_foreach(rules, i, rule)
    {
        const char *name = json_string_value(json_object_get(rule, "name"));
        json_t *list = json_array();
        json_array_foreach(json_object_get(rule, "inject"), j, h)
        {
            const char *header = json_string_value(json_object_get(h, "header"));
            const char *format = json_string_value(json_object_get(h, "format"));
            _cleanup_free_ char *ctx = inject_context(id, name, header);
            char *plain = NULL;
            int r = secrets_open_value(sec, ctx, json_string_value(json_object_get(h, "secret")),
                                       &plain, err);
            if (r < 0) {
                json_decref(list);
                json_decref(rules);
                json_decref(o);
                return r;
            }
            const char *at = strstr(format, "{secret}");
            char *value = sbx_xasprintf("%.*s%s%s", (int)(at - format), format, plain,
                                        at + strlen("{secret}"));
            secrets_drop(plain);
            json_array_append_new(list, json_pack("{s:s,s:s}", "header", header, "value", value));
            secrets_drop(value);
        }
        if (json_array_size(list))
            json_object_set_new(o, name, list);
        else
            json_decref(list);
    }
    json_decref(rules);
    *out = o;
    return 0;
}

json_t *config_doc_network(const json_t *stored)
{
    json_t *n = json_object_get(stored, "network");
    bool priv = json_is_true(json_object_get(stored, "allow_private_endpoints"));
    if (!json_is_object(n) && !priv)
        return NULL;
    json_t *pol = json_is_object(n) ? json_deep_copy(n) : json_null();
    if (json_is_object(pol)) {
        /* The document's two shapes reach the proxy as rules: one rule engine. */
        json_object_set_new(pol, "rules", engine_rules(n));
        json_object_del(pol, "cube_rules");
        json_object_del(pol, "e2b_host_rules");
    }
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(pol, "rules"), i, rule)
    {
        /* The proxy learns that a rule injects, never the sealed secret. */
        json_t *inj = json_object_get(rule, "inject");
        if (inj) {
            json_object_set_new(rule, "injects", json_integer((json_int_t)json_array_size(inj)));
            json_object_del(rule, "inject");
        }
    }
    return json_pack("{s:o,s:b}", "policy", pol, "allow_private_endpoints", priv);
}

bool config_doc_workspace_remote(const json_t *stored)
{
    const json_t *docker = json_object_get(stored, "docker");
    struct rt_docker engine = {.host = json_string_value(json_object_get(docker, "host"))};
    return rt_workspace_remote(json_string_value(json_object_get(stored, "backend")), &engine);
}
