#include "recipe.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/template.h"

#define BAD(err, ...) sbx_err_set(err, EINVAL, "invalid_recipe", __VA_ARGS__)

static bool in_set(char c, const char *set)
{
    return c && strchr(set, c);
}

static bool alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Debian package names (policy 5.6.1) with an optional "=version": they become apt-get
 * arguments, so nothing may look like an option. */
static bool apt_spec_valid(const char *s)
{
    const char *eq = strchr(s, '=');
    size_t n = eq ? (size_t)(eq - s) : strlen(s);
    if (n < 2 || !alnum_lower(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!alnum_lower(s[i]) && !in_set(s[i], "+-."))
            return false;
    if (!eq)
        return true;
    if (!eq[1] || !((eq[1] >= '0' && eq[1] <= '9')))
        return false;
    for (const char *p = eq + 1; *p; p++)
        if (!alnum_lower(*p) && !(*p >= 'A' && *p <= 'Z') && !in_set(*p, ".+~:-"))
            return false;
    return true;
}

static bool npm_name_part(const char *s, size_t n)
{
    if (n == 0 || !alnum_lower(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!alnum_lower(s[i]) && !in_set(s[i], "._-"))
            return false;
    return true;
}

/* "name", "@scope/name", either with "@version-or-range". */
static bool npm_spec_valid(const char *s)
{
    const char *p = s;
    if (*p == '@') {
        const char *slash = strchr(p, '/');
        if (!slash || !npm_name_part(p + 1, (size_t)(slash - p - 1)))
            return false;
        p = slash + 1;
    }
    const char *at = strchr(p, '@');
    size_t n = at ? (size_t)(at - p) : strlen(p);
    if (!npm_name_part(p, n))
        return false;
    if (!at)
        return true;
    if (!at[1])
        return false;
    for (const char *q = at + 1; *q; q++)
        if (!alnum_lower(*q) && !(*q >= 'A' && *q <= 'Z') && !in_set(*q, ".^~<>=*+-|"))
            return false;
    return true;
}

/* Places a file of the recipe may not go: what the sandbox mounts over the tree (the
 * workspace, /tmp, the agent) or what the kernel provides. */
static const char *const forbidden_prefixes[] = {"/proc",      "/sys",       "/dev",    "/tmp",
                                                 "/workspace", "/home/user", "/opt/sbx"};

static bool file_path_valid(const char *path)
{
    size_t n = strlen(path);
    if (n < 2 || n > RECIPE_FILE_PATH_MAX || path[0] != '/' || path[n - 1] == '/' ||
        !sbx_field_valid(path, n, false))
        return false;
    for (const char *seg = path; seg && *seg; seg = strchr(seg + 1, '/')) {
        const char *s = seg + 1;
        size_t len = strcspn(s, "/");
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && !strncmp(s, "..", 2)))
            return false;
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(forbidden_prefixes); i++) {
        size_t l = strlen(forbidden_prefixes[i]);
        if (!strncmp(path, forbidden_prefixes[i], l) && (path[l] == '/' || !path[l]))
            return false;
    }
    return true;
}

static int strings(json_t *body, const char *field, size_t max, size_t each_max,
                   bool (*valid)(const char *), json_t **out, struct sbx_err *err)
{
    json_t *v = json_object_get(body, field);
    *out = json_array();
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return BAD(err, "%s must be an array of strings", field);
    if (json_array_size(v) > max)
        return BAD(err, "%s: at most %zu entries (RECIPE_%s), got %zu", field, max,
                   !strcmp(field, "run")            ? "RUN_MAX"
                   : !strcmp(field, "apt_packages") ? "APT_MAX"
                                                    : "NPM_MAX",
                   json_array_size(v));
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *s = json_string_value(e);
        if (!s)
            return BAD(err, "%s[%zu] must be a string", field, i);
        if (strlen(s) > each_max)
            return BAD(err, "%s[%zu] is longer than %zu bytes", field, i, each_max);
        if (valid && !valid(s))
            return BAD(err, "%s[%zu]: '%.64s' is not a valid %s", field, i, s,
                       !strcmp(field, "apt_packages")
                           ? "Debian package (name or name=version)"
                           : "npm package (name, @scope/name, @version)");
        if (!valid && !*s)
            return BAD(err, "%s[%zu] is empty", field, i);
        json_array_append(*out, e);
    }
    return 0;
}

static int command(json_t *body, const char *field, const char **out, struct sbx_err *err)
{
    json_t *v = json_object_get(body, field);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    if (!s || !*s)
        return BAD(err, "%s must be a non-empty string", field);
    if (strlen(s) > RECIPE_COMMAND_MAX)
        return BAD(err, "%s is longer than %d bytes (RECIPE_COMMAND_MAX)", field,
                   RECIPE_COMMAND_MAX);
    *out = s;
    return 0;
}

static int files(json_t *body, json_t **out, struct sbx_err *err)
{
    json_t *v = json_object_get(body, "files");
    *out = json_array();
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return BAD(err, "files must be an array of {path, content, mode?}");
    if (json_array_size(v) > RECIPE_FILES_MAX)
        return BAD(err, "files: at most %d entries (RECIPE_FILES_MAX)", RECIPE_FILES_MAX);
    size_t total = 0, i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        json_t *content = json_object_get(e, "content");
        json_t *mode = json_object_get(e, "mode");
        if (!json_is_object(e) || !path || !json_is_string(content))
            return BAD(err, "files[%zu] must be {path, content, mode?}", i);
        const char *k;
        json_t *x;
        json_object_foreach(e, k, x)
        {
            if (strcmp(k, "path") && strcmp(k, "content") && strcmp(k, "mode"))
                return BAD(err, "files[%zu]: unknown field %.32s", i, k);
        }
        if (!file_path_valid(path))
            return BAD(err,
                       "files[%zu].path '%.64s' must be an absolute path without . or .. outside "
                       "/proc, /sys, /dev, /tmp, /workspace, /home/user and /opt/sbx",
                       i, path);
        json_int_t m = 0644;
        if (mode && !json_is_null(mode)) {
            if (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
                json_integer_value(mode) > 07777)
                return BAD(err, "files[%zu].mode must be an integer 0..4095 (0o7777)", i);
            m = json_integer_value(mode);
        }
        total += json_string_length(content);
        if (total > RECIPE_FILES_BYTES)
            return BAD(err, "files: contents over %d bytes together (RECIPE_FILES_BYTES)",
                       RECIPE_FILES_BYTES);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(*out, j), "path")), path))
                return BAD(err, "files[%zu].path %.64s is given twice", i, path);
        json_array_append_new(
            *out, json_pack("{s:s,s:O,s:I}", "path", path, "content", content, "mode", m));
    }
    return 0;
}

static const char *const known_fields[] = {"name",          "from",        "apt_packages",
                                           "npm_packages",  "files",       "run",
                                           "start_command", "ready_check", "public"};

int recipe_parse(json_t *body, struct recipe *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *k;
    json_t *x;
    json_object_foreach(body, k, x)
    {
        bool known = false;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(known_fields); i++)
            known |= !strcmp(k, known_fields[i]);
        if (!known)
            return BAD(err, "unknown field %.32s", k);
    }
    const char *name = json_string_value(json_object_get(body, "name"));
    if (!name)
        return BAD(err, "name is required (a template name: [a-z0-9-], 1..%d)", TEMPLATE_NAME_MAX);
    if (!template_name_valid(name) || name[0] == '-')
        return sbx_err_set(err, EINVAL, "invalid_template",
                           "name '%.64s': template names are [a-z0-9-], 1..%d, not starting with -",
                           name, TEMPLATE_NAME_MAX);
    json_t *fromv = json_object_get(body, "from");
    const char *from = fromv && !json_is_null(fromv) ? json_string_value(fromv) : "base";
    if (!from || !template_name_valid(from))
        return BAD(err, "from must be a template name");
    if (!strcmp(from, name))
        return BAD(err, "a template cannot start from itself");
    json_t *pub = json_object_get(body, "public");
    if (pub && !json_is_boolean(pub) && !json_is_null(pub))
        return BAD(err, "public must be true or false");
    json_t *apt = NULL, *npm = NULL, *run = NULL, *fl = NULL;
    const char *start = NULL, *ready = NULL;
    int r;
    if ((r = strings(body, "apt_packages", RECIPE_APT_MAX, RECIPE_PACKAGE_MAX, apt_spec_valid, &apt,
                     err)) < 0 ||
        (r = strings(body, "npm_packages", RECIPE_NPM_MAX, RECIPE_PACKAGE_MAX, npm_spec_valid, &npm,
                     err)) < 0 ||
        (r = strings(body, "run", RECIPE_RUN_MAX, RECIPE_COMMAND_MAX, NULL, &run, err)) < 0 ||
        (r = files(body, &fl, err)) < 0 || (r = command(body, "start_command", &start, err)) < 0 ||
        (r = command(body, "ready_check", &ready, err)) < 0) {
        json_decref(apt);
        json_decref(npm);
        json_decref(run);
        json_decref(fl);
        return r;
    }
    out->doc = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:s?,s:s?}", "name", name, "from", from,
                         "apt_packages", apt, "npm_packages", npm, "files", fl, "run", run,
                         "start_command", start, "ready_check", ready);
    if (!out->doc)
        return sbx_err_set(err, ENOMEM, "internal", "normalising the recipe");
    out->name = json_string_value(json_object_get(out->doc, "name"));
    out->from = json_string_value(json_object_get(out->doc, "from"));
    out->apt = json_object_get(out->doc, "apt_packages");
    out->npm = json_object_get(out->doc, "npm_packages");
    out->files = json_object_get(out->doc, "files");
    out->run = json_object_get(out->doc, "run");
    out->start_command = json_string_value(json_object_get(out->doc, "start_command"));
    out->ready_check = json_string_value(json_object_get(out->doc, "ready_check"));
    out->public_given = json_is_boolean(pub);
    out->public_ = json_is_true(pub);
    return 0;
}

void recipe_clear(struct recipe *r)
{
    json_decref(r->doc);
    memset(r, 0, sizeof(*r));
}

void recipe_digest(const struct recipe *r, const char *from_digest, const char *apt_sources,
                   const char *npm_registry, char out[65])
{
    json_t *d = json_deep_copy(r->doc);
    json_object_del(d, "name");
    _cleanup_free_ char *text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    _cleanup_free_ char *all =
        sbx_xasprintf("sbx-recipe-1\n%s\nfrom %s\napt %s\nnpm %s\n", text ? text : "", from_digest,
                      apt_sources ? apt_sources : "", npm_registry ? npm_registry : "");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(all, strlen(all), md, &n, EVP_sha256(), NULL) != 1)
        abort();
    sbx_hex(md, 32, out);
}
