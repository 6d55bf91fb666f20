#include "policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"

/* The hosts each package manager needs (index and downloads). */
static const struct {
    const char *name;
    const char *hosts[4];
} presets[] = {
    {"pypi", {"pypi.org", "files.pythonhosted.org"}},
    {"npm", {"registry.npmjs.org"}},
};

/* Names that only mean something inside some network: never an egress target. */
static const char *const internal_suffixes[] = {
    "localhost", "local", "internal", "localdomain", "lan", "home",
    "corp", "intranet", "private", "arpa", "onion",
};

int egress_host_normalise(const char *in, size_t len, char out[EGRESS_HOST_MAX + 1],
                          struct sbx_err *err)
{
    if (len > 0 && in[len - 1] == '.')
        len--;
    if (len == 0 || len > EGRESS_HOST_MAX)
        return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                           "a host name has 1 to %d characters", EGRESS_HOST_MAX);
    /* in is len bytes, not a C string: a proxy's host points into the request. */
    int shown = len < 64 ? (int)len : 64;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        /* IPv6 literals reach here from URLs and CONNECT targets: keep them for
         * egress_host_is_ip to judge. */
        if (!ok && !(c == ':' || c == '[' || c == ']'))
            return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                               "%.*s is not a host name (letters, digits, '-' and '.'; "
                               "international names in their xn-- form)",
                               shown, in);
        if (c == '.') {
            if (label == 0 || out[i - 1] == '-')
                return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                                   "%.*s has an empty label or one ending in '-'", shown, in);
            label = 0;
        } else {
            if (label == 0 && c == '-')
                return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                                   "%.*s has a label starting with '-'", shown, in);
            if (++label > 63)
                return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                                   "%.*s has a label longer than 63 characters", shown, in);
        }
        out[i] = c;
    }
    out[len] = '\0';
    /* Only one trailing dot is the root's: "a.b.." would leave an empty last label that
     * the suffix rules and a second normalising read differently. */
    if (out[len - 1] == '.')
        return sbx_err_set(err, EINVAL, "egress_invalid_domain", "%.*s has an empty label",
                           shown, in);
    if (out[len - 1] == '-')
        return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                           "%.*s has a label ending in '-'", shown, in);
    return 0;
}

bool egress_host_is_ip(const char *host)
{
    struct egress_addr a;
    if (strchr(host, ':') || egress_addr_parse_literal(host, &a) == 0)
        return true;
    /* WHATWG URL parsing treats a host whose last label is a number (decimal, or 0x hex)
     * as IPv4, and so does many a resolver: "1.2.3.4.5" or "foo.0x10" are not names. */
    const char *last = strrchr(host, '.');
    last = last ? last + 1 : host;
    if (!*last)
        return false;
    const char *p = last;
    bool hex = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'));
    if (hex)
        p += 2;
    for (; *p; p++) {
        bool digit = (*p >= '0' && *p <= '9') ||
                     (hex && ((*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')));
        if (!digit)
            return false;
    }
    return true;
}

bool egress_host_is_internal(const char *host)
{
    if (!strchr(host, '.'))
        return true; /* single-label names resolve only through local search domains */
    size_t n = strlen(host);
    for (size_t i = 0; i < SBX_ARRAY_SIZE(internal_suffixes); i++) {
        size_t s = strlen(internal_suffixes[i]);
        if (n >= s && !strcmp(host + n - s, internal_suffixes[i]) &&
            (n == s || host[n - s - 1] == '.'))
            return true;
    }
    return false;
}

/* A host name for a sandbox allowlist: normalised, not an IP, not internal. */
static int allowlist_host(json_t *v, size_t i, char out[EGRESS_HOST_MAX + 1], struct sbx_err *err)
{
    if (!json_is_string(v))
        return sbx_err_set(err, EINVAL, "invalid_egress", "egress.domains[%zu] must be a string", i);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (strlen(s) != len)
        return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                           "egress.domains[%zu] contains NUL", i);
    /* Judge the raw text as well: "[::1]" or "127.1" are refused as addresses even
     * before any normalising could reject their characters. */
    if (len <= EGRESS_HOST_MAX + 1) {
        char raw[EGRESS_HOST_MAX + 2];
        memcpy(raw, s, len);
        raw[len] = '\0';
        if (len > 0 && raw[len - 1] == '.')
            raw[len - 1] = '\0';
        if (egress_host_is_ip(raw))
            return sbx_err_set(err, EINVAL, "egress_ip_not_allowed",
                               "egress.domains[%zu] (%.64s) is an IP address: only host "
                               "names may be allowed",
                               i, s);
    }
    int r = egress_host_normalise(s, len, out, err);
    if (r < 0)
        return sbx_err_wrap(err, "egress.domains[%zu]", i);
    if (strpbrk(out, ":[]"))
        return sbx_err_set(err, EINVAL, "egress_invalid_domain",
                           "egress.domains[%zu] (%.64s) is not a host name", i, s);
    if (egress_host_is_ip(out))
        return sbx_err_set(err, EINVAL, "egress_ip_not_allowed",
                           "egress.domains[%zu] (%.64s) is an IP address: only host names "
                           "may be allowed",
                           i, s);
    if (egress_host_is_internal(out))
        return sbx_err_set(err, EINVAL, "egress_internal_domain",
                           "egress.domains[%zu] (%.64s) is an internal name (localhost, a "
                           "single label, or a suffix such as .local or .internal)",
                           i, s);
    return 0;
}

int egress_policy_parse(json_t *v, struct egress_policy *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    out->mode = EGRESS_MODE_NONE;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return sbx_err_set(err, EINVAL, "invalid_egress",
                           "egress must be an object: {\"mode\": \"none\" | \"allowlist\" | "
                           "\"preset\", ...}");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        if (strcmp(key, "mode") && strcmp(key, "domains") && strcmp(key, "preset"))
            return sbx_err_set(err, EINVAL, "invalid_egress", "egress has an unknown field %.64s",
                               key);
    }
    const char *mode = json_string_value(json_object_get(v, "mode"));
    json_t *domains = json_object_get(v, "domains");
    json_t *preset = json_object_get(v, "preset");
    if (!mode)
        return sbx_err_set(err, EINVAL, "invalid_egress",
                           "egress.mode must be \"none\", \"allowlist\" or \"preset\"");
    if (!strcmp(mode, "none")) {
        if (domains || preset)
            return sbx_err_set(err, EINVAL, "invalid_egress",
                               "egress mode none takes no domains or preset");
        return 0;
    }
    if (!strcmp(mode, "preset")) {
        if (domains)
            return sbx_err_set(err, EINVAL, "invalid_egress",
                               "egress mode preset takes no domains");
        const char *name = json_string_value(preset);
        if (!name)
            return sbx_err_set(err, EINVAL, "invalid_egress",
                               "egress.preset must be \"pypi\" or \"npm\"");
        for (size_t i = 0; i < SBX_ARRAY_SIZE(presets); i++) {
            if (strcmp(presets[i].name, name))
                continue;
            out->mode = EGRESS_MODE_PRESET;
            snprintf(out->preset, sizeof(out->preset), "%s", name);
            for (size_t k = 0; k < SBX_ARRAY_SIZE(presets[i].hosts) && presets[i].hosts[k]; k++)
                snprintf(out->hosts[out->n++], EGRESS_HOST_MAX + 1, "%s", presets[i].hosts[k]);
            return 0;
        }
        return sbx_err_set(err, EINVAL, "egress_unknown_preset",
                           "egress.preset must be \"pypi\" or \"npm\", not %.32s", name);
    }
    if (strcmp(mode, "allowlist"))
        return sbx_err_set(err, EINVAL, "invalid_egress",
                           "egress.mode must be \"none\", \"allowlist\" or \"preset\"");
    if (preset)
        return sbx_err_set(err, EINVAL, "invalid_egress", "egress mode allowlist takes no preset");
    if (!json_is_array(domains))
        return sbx_err_set(err, EINVAL, "invalid_egress",
                           "egress.domains must be an array of host names");
    if (json_array_size(domains) > EGRESS_DOMAINS_MAX)
        return sbx_err_set(err, EINVAL, "egress_too_many_domains",
                           "egress.domains has %zu entries; at most %d host names",
                           json_array_size(domains), EGRESS_DOMAINS_MAX);
    out->mode = EGRESS_MODE_ALLOWLIST;
    size_t i;
    json_array_foreach(domains, i, val)
    {
        char host[EGRESS_HOST_MAX + 1];
        int r = allowlist_host(val, i, host, err);
        if (r < 0)
            return r;
        if (!egress_policy_allows(out, host))
            memcpy(out->hosts[out->n++], host, sizeof(host));
    }
    return 0;
}

json_t *egress_policy_to_json(const struct egress_policy *p)
{
    switch (p->mode) {
    case EGRESS_MODE_PRESET:
        return json_pack("{s:s,s:s}", "mode", "preset", "preset", p->preset);
    case EGRESS_MODE_ALLOWLIST: {
        json_t *list = json_array();
        for (unsigned i = 0; i < p->n; i++)
            json_array_append_new(list, json_string(p->hosts[i]));
        return json_pack("{s:s,s:o}", "mode", "allowlist", "domains", list);
    }
    case EGRESS_MODE_NONE:
    default:
        return json_pack("{s:s}", "mode", "none");
    }
}

bool egress_policy_allows(const struct egress_policy *p, const char *host)
{
    if (p->mode == EGRESS_MODE_NONE)
        return false;
    for (unsigned i = 0; i < p->n; i++)
        if (!strcmp(p->hosts[i], host))
            return true;
    return false;
}

/* --- the operator's policy -------------------------------------------------------- */

struct egress_operator {
    bool deny_by_default;
    unsigned n_names, n_allow, n_deny;
    char (*names)[EGRESS_HOST_MAX + 1]; /* exact names, or "*.rest" for one wildcard label */
    struct egress_cidr *allow, *deny;
};

void egress_operator_free(struct egress_operator *op)
{
    if (!op)
        return;
    free(op->names);
    free(op->allow);
    free(op->deny);
    free(op);
}

static int operator_list(json_t *j, const char *field, json_t **out, struct sbx_err *err)
{
    json_t *v = json_object_get(j, field);
    if (v && !json_is_array(v))
        return sbx_err_set(err, EINVAL, "invalid_config", "network policy: %s must be an array",
                           field);
    if (v && json_array_size(v) > EGRESS_OPERATOR_RULES_MAX)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "network policy: %s has more than %d entries", field,
                           EGRESS_OPERATOR_RULES_MAX);
    *out = v;
    return 0;
}

int egress_operator_parse(json_t *j, struct egress_operator **out, struct sbx_err *err)
{
    if (!json_is_object(j))
        return sbx_err_set(err, EINVAL, "invalid_config", "network policy must be a JSON object");
    json_t *dflt = json_object_get(j, "deny_egress_by_default");
    if (dflt && !json_is_boolean(dflt))
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "network policy: deny_egress_by_default must be true or false");
    json_t *allow, *deny;
    int r;
    if ((r = operator_list(j, "allow_out", &allow, err)) < 0 ||
        (r = operator_list(j, "deny_out", &deny, err)) < 0)
        return r;
    struct egress_operator *op = sbx_xcalloc(1, sizeof(*op));
    op->deny_by_default = json_is_true(dflt);
    size_t na = json_array_size(allow), nd = json_array_size(deny);
    op->names = sbx_xcalloc(na + 1, sizeof(*op->names));
    op->allow = sbx_xcalloc(na + 1, sizeof(*op->allow));
    op->deny = sbx_xcalloc(nd + 1, sizeof(*op->deny));
    size_t i;
    json_t *v;
    json_array_foreach(allow, i, v)
    {
        const char *s = json_string_value(v);
        if (!s) {
            egress_operator_free(op);
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "network policy: allow_out[%zu] must be a string", i);
        }
        if (egress_cidr_parse(s, &op->allow[op->n_allow]) == 0) {
            op->n_allow++;
            continue;
        }
        bool wild = !strncmp(s, "*.", 2);
        const char *name = wild ? s + 2 : s;
        char host[EGRESS_HOST_MAX + 1];
        if (egress_host_normalise(name, strlen(name), host, err) < 0 ||
            strpbrk(host, ":[]") || egress_host_is_ip(host)) {
            egress_operator_free(op);
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "network policy: allow_out[%zu] (%.64s) is not an IPv4 address, "
                               "a CIDR block, a domain or *.domain",
                               i, s);
        }
        snprintf(op->names[op->n_names++], EGRESS_HOST_MAX + 1, "%s%.*s", wild ? "*." : "",
                 EGRESS_HOST_MAX - 2, host);
    }
    json_array_foreach(deny, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || egress_cidr_parse(s, &op->deny[op->n_deny]) < 0) {
            egress_operator_free(op);
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "network policy: deny_out[%zu] must be an IPv4 address or CIDR "
                               "block",
                               i);
        }
        op->n_deny++;
    }
    *out = op;
    return 0;
}

int egress_operator_load(const char *path, struct egress_operator **out, struct sbx_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = sbx_read_file(path, EGRESS_OPERATOR_FILE_MAX, &text, &len);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading the network policy %s", path);
    json_error_t jerr;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return sbx_err_set(err, EINVAL, "invalid_config", "network policy %s: %s (line %d)",
                           path, jerr.text, jerr.line);
    r = egress_operator_parse(j, out, err);
    json_decref(j);
    return r < 0 ? sbx_err_wrap(err, "%s", path) : 0;
}

static bool name_rule_matches(const char *rule, const char *host)
{
    if (strncmp(rule, "*.", 2))
        return !strcmp(rule, host);
    /* One wildcard label: exactly one non-empty label before the rest. */
    const char *dot = strchr(host, '.');
    return dot && dot != host && !strcmp(dot + 1, rule + 2);
}

bool egress_operator_host_allowed(const struct egress_operator *op, const char *host)
{
    if (!op || !op->deny_by_default)
        return true;
    for (unsigned i = 0; i < op->n_names; i++)
        if (name_rule_matches(op->names[i], host))
            return true;
    return false;
}

bool egress_operator_may_allow_by_address(const struct egress_operator *op)
{
    return op && op->n_allow > 0;
}

const char *egress_operator_addr_check(const struct egress_operator *op, bool host_allowed,
                                       const struct egress_addr *addr)
{
    if (!op)
        return NULL;
    for (unsigned i = 0; i < op->n_deny; i++)
        if (egress_cidr_match(&op->deny[i], addr))
            return "operator_deny_out";
    if (host_allowed)
        return NULL;
    for (unsigned i = 0; i < op->n_allow; i++)
        if (egress_cidr_match(&op->allow[i], addr))
            return NULL;
    return "operator_default_deny";
}
