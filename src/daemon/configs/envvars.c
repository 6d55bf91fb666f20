#include "envvars.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jsonfind.h"
#include "../../common/util.h"
#include "../sandbox/params.h"

int envvars_check_name(const char *name, struct sbx_err *err)
{
    static const char *const exact[] = {"PATH", "HOME", "USER", "SHELL", "PWD", "HOSTNAME"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(exact); i++)
        if (!strcmp(name, exact[i]))
            return sbx_err_set(err, EINVAL, "reserved_env_var", "%s is reserved", name);
    if (!strncmp(name, "LD_", 3) || !strncmp(name, "SBX_", 4))
        return sbx_err_set(err, EINVAL, "reserved_env_var", "names LD_* and SBX_* are reserved");
    json_t *probe = json_pack("{s:s}", name, "");
    int r = sandbox_env_validate(probe, "name", err);
    json_decref(probe);
    return r;
}

static char *personal_context(const char *user, const char *scope, const char *target,
                              const char *name)
{
    return sbx_xasprintf("user:%s:%s:%s:%s", user, scope, target, name);
}

static char *workspace_skill_context(const char *skill, const char *name)
{
    return sbx_xasprintf("skill:%s:workspace:%s", skill, name);
}

int envvars_load_declarations(struct configs *c, const char *path, struct sbx_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = sbx_read_file(path, ENVVARS_DECL_FILE_MAX, &text, &len);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return sbx_err_set(err, EINVAL, "invalid_config", "%s: not a JSON object", path);
    }
    const char *skill;
    json_t *list;
    json_object_foreach(j, skill, list)
    {
        if (!skill[0] || strlen(skill) > ENVVARS_SKILL_ID_MAX || !json_is_array(list)) {
            r = sbx_err_set(err, EINVAL, "invalid_config", "%s: %.64s: a list of variables", path,
                            skill);
            break;
        }
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
        {
            const char *name = json_string_value(json_object_get(v, "name"));
            const char *desc = json_string_value(json_object_get(v, "description"));
            if (!name || (r = envvars_check_name(name, err)) < 0) {
                r = sbx_err_set(err, EINVAL, "invalid_config", "%s: %.64s[%zu]: bad name", path,
                                skill, i);
                break;
            }
            struct store_skill_env d = {.skill_id = skill,
                                        .name = name,
                                        .description = desc ? desc : "",
                                        .required = json_is_true(json_object_get(v, "required")),
                                        .updated_at = sbx_wall_ms() / 1000};
            if ((r = store_skill_env_declare(c->store, &d, err)) < 0)
                break;
        }
        if (r < 0)
            break;
    }
    json_decref(j);
    return r;
}

struct decl_find {
    const char *name;
    bool skill_known, found;
};

static void find_decl(const struct store_skill_env *d, void *data)
{
    struct decl_find *f = data;
    f->skill_known = true;
    f->found = f->found || !strcmp(d->name, f->name);
}

static int check_target(struct configs *c, const char *scope, const char *target, const char *name,
                        struct sbx_err *err)
{
    if (!strcmp(scope, "sandbox")) {
        struct store_config cfg;
        int r = store_config_get(c->store, target, &cfg, err);
        store_config_clear(&cfg);
        return r;
    }
    struct decl_find f = {.name = name};
    int r = store_skill_env_each(c->store, target, find_decl, &f, err);
    if (r < 0)
        return r;
    if (!f.skill_known)
        return sbx_err_set(err, ENOENT, "skill_not_found", "no skill %.64s declares variables",
                           target);
    if (!f.found)
        return sbx_err_set(err, EINVAL, "env_var_not_declared",
                           "skill %.64s does not declare %.64s", target, name);
    return 0;
}

int envvars_set(struct configs *c, const char *user, const char *scope, const char *target,
                const char *name, const char *value, struct sbx_err *err)
{
    int r;
    if ((r = envvars_check_name(name, err)) < 0 ||
        (r = check_target(c, scope, target, name, err)) < 0)
        return r;
    if (strlen(value) > SANDBOX_ENV_VALUE_MAX)
        return sbx_err_set(err, EINVAL, "invalid_env", "value is at most %d bytes",
                           SANDBOX_ENV_VALUE_MAX);
    _cleanup_free_ char *ctx = personal_context(user, scope, target, name);
    _cleanup_free_ char *sealed = NULL;
    if ((r = secrets_seal(c->secrets, ctx, value, &sealed, err)) < 0)
        return r;
    struct store_env_var v = {.user = user,
                              .scope = scope,
                              .target = target,
                              .name = name,
                              .value = sealed,
                              .updated_at = sbx_wall_ms() / 1000};
    return store_personal_env_set(c->store, &v, err);
}

int envvars_delete(struct configs *c, const char *user, const char *scope, const char *target,
                   const char *name, struct sbx_err *err)
{
    struct store_env_var v = {.user = user, .scope = scope, .target = target, .name = name};
    return store_personal_env_delete(c->store, &v, err);
}

/* --- into a sandbox ------------------------------------------------------------------- */

struct merge {
    struct configs *c;
    const char *user;
    json_t *env;
    json_t *declared; /* skill -> {name: true}, for personal skill values */
    int r;
    struct sbx_err *err;
};

static void put_sealed(struct merge *m, const char *ctx, const char *name, const char *sealed)
{
    char *plain = NULL;
    if (m->r < 0)
        return;
    m->r = secrets_open_value(m->c->secrets, ctx, sealed, &plain, m->err);
    if (m->r == 0)
        json_object_set_new(m->env, name, json_string(plain));
    secrets_drop(plain);
}

static void merge_workspace_skill(const struct store_skill_env *d, void *data)
{
    struct merge *m = data;
    json_t *names = json_object_get(m->declared, d->skill_id);
    if (!names) {
        names = json_object();
        json_object_set_new(m->declared, d->skill_id, names);
    }
    json_object_set_new(names, d->name, json_true());
    if (d->value) {
        _cleanup_free_ char *ctx = workspace_skill_context(d->skill_id, d->name);
        put_sealed(m, ctx, d->name, d->value);
    }
}

char *configs_skill_env_context(const char *install_id, const char *name)
{
    return sbx_xasprintf("skill_install:%s:%s", install_id, name);
}

/* The values an admin set on the configuration's enabled skill installs. */
static void merge_install(const struct store_skill_install *i, void *data)
{
    struct merge *m = data;
    json_t *envs = i->enabled ? json_loads(i->envs_json ? i->envs_json : "{}", 0, NULL) : NULL;
    const char *name;
    json_t *v;
    json_object_foreach(envs, name, v)
    {
        _cleanup_free_ char *ctx = configs_skill_env_context(i->id, name);
        if (json_is_string(v))
            put_sealed(m, ctx, name, json_string_value(v));
    }
    json_decref(envs);
}

static void merge_personal(const struct store_env_var *v, void *data)
{
    struct merge *m = data;
    /* A skill's variable counts only while the skill declares it. */
    if (!strcmp(v->scope, "skill") &&
        !json_object_get(json_object_get(m->declared, v->target), v->name))
        return;
    _cleanup_free_ char *ctx = personal_context(v->user, v->scope, v->target, v->name);
    put_sealed(m, ctx, v->name, v->value);
}

int configs_env_for(struct configs *c, const char *user, const char *config_id, const json_t *doc,
                    json_t **out, struct sbx_err *err)
{
    struct merge m = {.c = c, .user = user, .declared = json_object(), .err = err};
    int r = config_doc_env(c->secrets, config_id, doc, &m.env, err);
    if (r == 0)
        r = store_skill_env_each(c->store, NULL, merge_workspace_skill, &m, err);
    if (r == 0)
        r = store_skill_install_each(c->store, config_id, NULL, merge_install, &m, err);
    if (r == 0)
        r = store_personal_env_each(c->store, user, "sandbox", config_id, merge_personal, &m, err);
    if (r == 0)
        r = store_personal_env_each(c->store, user, "skill", NULL, merge_personal, &m, err);
    if (r == 0)
        r = m.r;
    json_decref(m.declared);
    if (r < 0) {
        json_decref(m.env);
        return r;
    }
    *out = m.env;
    return 0;
}

/* --- what GET /v1/me/env-vars shows ---------------------------------------------------- */

struct describe {
    struct configs *c;
    const char *user;
    json_t *data;
    json_t *skills; /* [{skill_id, vars}] as the user sees them, the same for every config */
    int r;
    struct sbx_err *err;
};

static json_t *var_entry(const char *name, const char *source, long long updated_at)
{
    return json_pack("{s:s,s:s,s:o}", "name", name, "source", source, "updated_at",
                     updated_at ? json_integer(updated_at) : json_null());
}

static void mark_user(json_t *vars, const struct store_env_var *v)
{
    json_t *e = sbx_json_find(vars, "name", v->name);
    if (!e) {
        e = var_entry(v->name, "user", v->updated_at);
        json_array_append_new(vars, e);
    }
    json_object_set_new(e, "source", json_string("user"));
    json_object_set_new(e, "updated_at", json_integer(v->updated_at));
}

static void describe_personal_sandbox(const struct store_env_var *v, void *data)
{
    mark_user(data, v);
}

/* A value an admin set on one of the configuration's skill installs: "workspace", unless
 * the user's own value wins. */
static void describe_install(const struct store_skill_install *i, void *data)
{
    json_t *skills = data;
    json_t *vals = i->enabled ? json_loads(i->envs_json ? i->envs_json : "{}", 0, NULL) : NULL;
    size_t k;
    json_t *s;
    json_array_foreach(skills, k, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "skill_id")), i->catalog_id))
            continue;
        const char *name;
        json_t *v;
        json_object_foreach(vals, name, v)
        {
            json_t *e = sbx_json_find(json_object_get(s, "vars"), "name", name);
            if (e && strcmp(json_string_value(json_object_get(e, "source")), "user")) {
                json_object_set_new(e, "source", json_string("workspace"));
                json_object_set_new(e, "updated_at", json_integer(i->updated_at));
            }
        }
    }
    json_decref(vals);
}

static void describe_config(const struct store_config *cfg, void *data)
{
    struct describe *dd = data;
    if (dd->r < 0)
        return;
    json_t *doc = json_loads(cfg->config_json, 0, NULL);
    json_t *vars = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(doc, "env_vars"), k, v)
    {
        json_array_append_new(vars, var_entry(k, "workspace", cfg->updated_at));
    }
    json_decref(doc);
    dd->r = store_personal_env_each(dd->c->store, dd->user, "sandbox", cfg->id,
                                    describe_personal_sandbox, vars, dd->err);
    json_t *skills = json_deep_copy(dd->skills);
    if (dd->r == 0)
        dd->r = store_skill_install_each(dd->c->store, cfg->id, NULL, describe_install, skills,
                                         dd->err);
    json_array_append_new(dd->data, json_pack("{s:s,s:s,s:s,s:o,s:o}", "sandbox_config_id", cfg->id,
                                              "sandbox_config_name", cfg->name, "description",
                                              cfg->description, "vars", vars, "skills", skills));
}

static void describe_decl(const struct store_skill_env *d, void *data)
{
    json_t *skills = data;
    json_t *entry = NULL;
    size_t i;
    json_t *s;
    json_array_foreach(skills, i, s)
    {
        if (!strcmp(json_string_value(json_object_get(s, "skill_id")), d->skill_id))
            entry = s;
    }
    if (!entry) {
        entry = json_pack("{s:s,s:[]}", "skill_id", d->skill_id, "vars");
        json_array_append_new(skills, entry);
    }
    json_t *e = var_entry(d->name, d->value ? "workspace" : "unset", d->value ? d->updated_at : 0);
    json_object_set_new(e, "description", json_string(d->description));
    json_object_set_new(e, "required", json_boolean(d->required));
    json_array_append_new(json_object_get(entry, "vars"), e);
}

static void describe_personal_skill(const struct store_env_var *v, void *data)
{
    size_t i;
    json_t *s;
    json_array_foreach((json_t *)data, i, s)
    {
        if (!strcmp(json_string_value(json_object_get(s, "skill_id")), v->target)) {
            json_t *e = sbx_json_find(json_object_get(s, "vars"), "name", v->name);
            if (e) {
                json_object_set_new(e, "source", json_string("user"));
                json_object_set_new(e, "updated_at", json_integer(v->updated_at));
            }
        }
    }
}

json_t *envvars_describe(struct configs *c, const char *user, struct sbx_err *err)
{
    struct describe dd = {
        .c = c, .user = user, .data = json_array(), .skills = json_array(), .err = err};
    int r = store_skill_env_each(c->store, NULL, describe_decl, dd.skills, err);
    if (r == 0)
        r = store_personal_env_each(c->store, user, "skill", NULL, describe_personal_skill,
                                    dd.skills, err);
    if (r == 0)
        r = store_config_each(c->store, describe_config, &dd, err);
    if (r == 0)
        r = dd.r;
    json_decref(dd.skills);
    if (r < 0) {
        json_decref(dd.data);
        return NULL;
    }
    return dd.data;
}
