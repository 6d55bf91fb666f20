/* Skills installed into sandbox configurations (docs/skills.md), admin only:
 *   POST   /v1/skills/catalog/{id}/install            {sandbox_config_ids} -> 202
 *   GET    /v1/sandbox-configs/{id}/skills
 *   GET    /v1/sandbox-configs/{id}/skills/{skill}
 *   PATCH  /v1/sandbox-configs/{id}/skills/{skill}    {enabled?, envs?}
 *   DELETE /v1/sandbox-configs/{id}/skills/{skill}
 *   POST   .../{skill}/reinstall {instructions?}, .../{skill}/stop
 *   GET    .../{skill}/guidance, POST .../{skill}/guidance
 *   GET    .../{skill}/files, .../{skill}/files/content?path=
 *   GET    .../{skill}/install-events, .../{skill}/transcript   (SSE)
 * and for agents, any key:
 *   GET    /v1/skills?sandbox_config_id= */
#include <errno.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "catalog.h"
#include "installs.h"

static void answer(struct http_req *req, int r, unsigned status, json_t *j,
                   const struct sbx_err *err)
{
    if (r < 0)
        http_respond_error(req, err);
    else
        http_respond_json(req, status, j);
}

static void audit_install(struct sbxd *d, struct http_req *req, const char *action,
                          const char *config_id, const char *skill_id, int r,
                          const struct sbx_err *err)
{
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), action, skill_id,
                 r < 0 ? err->code : "ok", json_pack("{s:s}", "sandbox_config_id", config_id));
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static void api_catalog_install(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    const char *cat = http_req_param(req, 0);
    int r = http_req_json(req, &body, &err);
    json_t *ids = json_object_get(body, "sandbox_config_ids");
    if (r == 0 && (!json_is_array(ids) || !json_array_size(ids) ||
                   json_array_size(ids) > INSTALL_CONFIGS_MAX))
        r = sbx_err_set(&err, EINVAL, "invalid_request",
                        "sandbox_config_ids must be a list of 1 to %d configuration ids",
                        INSTALL_CONFIGS_MAX);
    struct store_skill s = {0};
    if (r == 0)
        r = store_skill_get(d->store, cat, &s, &err);
    store_skill_clear(&s);
    if (r < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    /* Each configuration on its own: some may be taken while others are refused. */
    json_t *installs = json_array(), *errors = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        struct sbx_err e = {0};
        char skill_id[STORE_ID_MAX + 1] = "";
        const char *cid = json_string_value(v);
        int rr = cid ? installs_start(d->installs, http_req_identity(req), cid, cat, skill_id, &e)
                     : sbx_err_set(&e, EINVAL, "invalid_request", "an id must be a string");
        audit_install(d, req, "skill.install", cid ? cid : "", skill_id, rr, &e);
        if (rr == 0)
            json_array_append_new(installs,
                                  json_pack("{s:s,s:s,s:s}", "sandbox_config_id", cid, "skill_id",
                                            skill_id, "status", "installing"));
        else
            json_array_append_new(errors, json_pack("{s:o,s:{s:s,s:s}}", "sandbox_config_id",
                                                    cid ? json_string(cid) : json_null(), "error",
                                                    "code", e.code, "message", e.msg));
    }
    json_decref(body);
    http_respond_json(
        req, 202,
        json_pack("{s:s,s:o,s:o}", "catalog_id", cat, "installs", installs, "errors", errors));
}

static void api_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *list = NULL;
    int r = installs_list(d->installs, http_req_param(req, 0), &list, &err);
    answer(req, r, 200, r < 0 ? NULL : json_pack("{s:s,s:o}", "object", "list", "data", list),
           &err);
}

static void api_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    int r = installs_get(d->installs, http_req_param(req, 0), http_req_param(req, 1), &j, &err);
    answer(req, r, 200, j, &err);
}

static void api_patch(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *j = NULL, *ignored = NULL;
    const char *cid = http_req_param(req, 0), *sid = http_req_param(req, 1);
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = installs_patch(d->installs, cid, sid, body, &j, &ignored, &err);
    json_decref(body);
    audit_install(d, req, "skill.update", cid, sid, r, &err);
    if (r == 0)
        json_object_set_new(j, "ignored_envs", ignored);
    answer(req, r, 200, j, &err);
}

static void api_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *cid = http_req_param(req, 0), *sid = http_req_param(req, 1);
    int r = installs_delete(d->installs, cid, sid, &err);
    audit_install(d, req, "skill.uninstall", cid, sid, r, &err);
    answer(req, r, 200,
           r < 0 ? NULL
                 : json_pack("{s:s,s:s,s:b}", "object", "sandbox_config_skill", "id", sid,
                             "deleted", 1),
           &err);
}

static void api_reinstall(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    const char *cid = http_req_param(req, 0), *sid = http_req_param(req, 1);
    size_t len = 0;
    int r = 0;
    if (http_req_body(req, &len) && len)
        r = http_req_json(req, &body, &err);
    json_t *ins = json_object_get(body, "instructions");
    if (r == 0 && ins && !json_is_null(ins) &&
        (!json_is_string(ins) || utf8_chars(json_string_value(ins)) > INSTALL_INSTRUCTIONS_MAX))
        r = sbx_err_set(&err, EINVAL, "invalid_request",
                        "instructions must be a string of at most %d characters",
                        INSTALL_INSTRUCTIONS_MAX);
    if (r == 0)
        r = installs_reinstall(d->installs, http_req_identity(req), cid, sid,
                               json_string_value(ins), &err);
    json_decref(body);
    audit_install(d, req, "skill.reinstall", cid, sid, r, &err);
    answer(req, r, 202, r < 0 ? NULL : json_pack("{s:s}", "skill_id", sid), &err);
}

static void api_stop(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    const char *cid = http_req_param(req, 0), *sid = http_req_param(req, 1);
    int r = installs_stop(d->installs, http_req_identity(req), cid, sid, &j, &err);
    audit_install(d, req, "skill.stop", cid, sid, r, &err);
    answer(req, r, 200, j, &err);
}

static void api_guidance(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    int r =
        installs_guidance(d->installs, http_req_param(req, 0), http_req_param(req, 1), &j, &err);
    answer(req, r, 200, j, &err);
}

static void api_guide(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    int r = http_req_json(req, &body, &err);
    const char *expected = json_string_value(json_object_get(body, "expected_message_id"));
    const char *steer = json_string_value(json_object_get(body, "steer_id"));
    const char *content = json_string_value(json_object_get(body, "content"));
    if (r == 0 && (!expected || !steer || !*steer || strlen(steer) > INSTALL_STEER_ID_MAX ||
                   !sbx_field_valid(steer, strlen(steer), false)))
        r = sbx_err_set(&err, EINVAL, "invalid_request",
                        "expected_message_id and steer_id (1 to %d characters) are required",
                        INSTALL_STEER_ID_MAX);
    if (r == 0 && (!content || !*content || utf8_chars(content) > INSTALL_GUIDANCE_MAX))
        r = sbx_err_set(&err, EINVAL, "invalid_request", "content must be 1 to %d characters",
                        INSTALL_GUIDANCE_MAX);
    if (r == 0)
        r = installs_guide(d->installs, http_req_param(req, 0), http_req_param(req, 1), expected,
                           steer, content, &err);
    json_decref(body);
    answer(req, r, 202, r < 0 ? NULL : json_pack("{s:b}", "accepted", 1), &err);
}

static void api_files(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char cat[STORE_SKILL_ID_MAX + 1];
    json_t *list = NULL;
    int r =
        installs_catalog_id(d->installs, http_req_param(req, 0), http_req_param(req, 1), cat, &err);
    if (r == 0)
        r = skills_files(d->skills, cat, &list, &err);
    answer(req, r, 200, r < 0 ? NULL : json_pack("{s:s,s:o}", "object", "list", "data", list),
           &err);
}

static void api_file_content(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    char cat[STORE_SKILL_ID_MAX + 1];
    json_t *j = NULL;
    const char *path = http_req_query(req, "path");
    int r =
        installs_catalog_id(d->installs, http_req_param(req, 0), http_req_param(req, 1), cat, &err);
    if (r == 0 && !path)
        r = sbx_err_set(&err, EINVAL, "invalid_path", "give ?path= (e.g. SKILL.md)");
    if (r == 0)
        r = skills_file_content(d->skills, cat, path, &j, &err);
    answer(req, r, 200, j, &err);
}

static void follow(struct sbxd *d, struct http_req *req, bool transcript)
{
    struct sbx_err err = {0};
    int r = installs_follow(d->installs, http_req_param(req, 0), http_req_param(req, 1), transcript,
                            req, &err);
    if (r < 0 && !strcmp(err.code, "transcript_not_ready"))
        http_respond_text(req, 204, "");
    else if (r < 0)
        http_respond_error(req, &err);
}

static void api_events(struct sbxd *d, struct http_req *req)
{
    follow(d, req, false);
}

static void api_transcript(struct sbxd *d, struct http_req *req)
{
    follow(d, req, true);
}

static void api_agent_skills(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *j = NULL;
    int r = installs_agent_list(d->installs, http_req_query(req, "sandbox_config_id"), &j, &err);
    answer(req, r, 200, j, &err);
}

#define SKILL "/v1/sandbox-configs/{}/skills/{}"

static const struct route routes[] = {
    {"POST", "/v1/skills/catalog/{}/install", AUTH_ADMIN_FULL, api_catalog_install, 0},
    {"GET", "/v1/sandbox-configs/{}/skills", AUTH_ADMIN, api_list, 0},
    {"GET", SKILL, AUTH_ADMIN, api_get, 0},
    {"PATCH", SKILL, AUTH_ADMIN_FULL, api_patch, 0},
    {"DELETE", SKILL, AUTH_ADMIN_FULL, api_delete, 0},
    {"POST", SKILL "/reinstall", AUTH_ADMIN_FULL, api_reinstall, 0},
    {"POST", SKILL "/stop", AUTH_ADMIN_FULL, api_stop, 0},
    {"GET", SKILL "/guidance", AUTH_ADMIN, api_guidance, 0},
    {"POST", SKILL "/guidance", AUTH_ADMIN_FULL, api_guide, 0},
    {"GET", SKILL "/files", AUTH_ADMIN, api_files, 0},
    {"GET", SKILL "/files/content", AUTH_ADMIN, api_file_content, 0},
    {"GET", SKILL "/install-events", AUTH_ADMIN, api_events, 0},
    {"GET", SKILL "/transcript", AUTH_ADMIN, api_transcript, 0},
    {"GET", "/v1/skills", AUTH_KEY, api_agent_skills, 0},
};

const struct route_table skill_install_routes = ROUTE_TABLE(routes);
