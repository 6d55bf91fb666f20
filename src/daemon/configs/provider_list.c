/* The provider lists of a configuration, on a worker thread (provider_list.h). */
#include "provider_list.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../../runtime/provider_api.h"
#include "../sbxd.h"
#include "configs.h"

struct list_job {
    enum provider_list_kind kind;
    char *backend, *api_url, *api_key;
    long timeout_ms;
    provider_list_done done;
    void *data;
    json_t *list;
    int r;
    struct sbx_err err;
    long long ms;
};

static void list_run(void *data)
{
    struct list_job *j = data;
    if (j->r < 0)
        return; /* the connection could not be opened: said on the loop */
    struct provider_conn c = {.kind = j->backend, .api_url = j->api_url, .api_key = j->api_key,
                              .http_timeout_ms = j->timeout_ms};
    long long t = sbx_now_ms();
    j->r = j->kind == PROVIDER_LIST_TEMPLATES ? provider_template_list(&c, &j->list, &j->err)
                                              : provider_sandbox_list(&c, &j->list, &j->err);
    j->ms = sbx_now_ms() - t;
}

static void list_done(void *data, bool ran)
{
    struct list_job *j = data;
    if (!ran)
        sbx_err_set(&j->err, ECANCELED, "provider_error", "the daemon is stopping");
    json_t *res = ran && j->r == 0
                      ? json_pack("{s:b,s:o,s:s,s:I}", "reachable", 1, "list", j->list, "api_url",
                                  j->api_url, "latency_ms", (json_int_t)j->ms)
                      : json_pack("{s:b,s:s,s:s,s:I}", "reachable", 0, "error", j->err.msg,
                                  "code", j->err.code, "latency_ms", (json_int_t)j->ms);
    if (j->r < 0 || !ran)
        json_decref(j->list);
    if (j->api_key)
        secrets_drop(j->api_key);
    free(j->backend);
    free(j->api_url);
    j->done(j->data, res);
    free(j);
}

bool configs_provider_list(struct sbxd *d, const char *config_id, const json_t *doc,
                           enum provider_list_kind kind, provider_list_done done, void *data)
{
    const char *backend = json_string_value(json_object_get(doc, "backend"));
    if (!rt_is_provider(backend))
        return false;
    struct list_job *j = sbx_xcalloc(1, sizeof(*j));
    j->kind = kind;
    j->done = done;
    j->data = data;
    json_t *prov = NULL;
    int r = config_doc_provider_open(d->configs->secrets, config_id, doc, &prov, &j->err);
    const struct rt_provider *env = !strcmp(backend, "cube") ? &d->cfg.cube : &d->cfg.e2b;
    const char *url = prov ? json_string_value(json_object_get(prov, "api_url")) : env->api_url;
    if (r == 0 && !url)
        r = sbx_err_set(&j->err, EINVAL, "provider_error",
                        "no %s connection: the configuration has no %s object and "
                        "SBX_%s_API_URL is unset",
                        backend, backend, !strcmp(backend, "cube") ? "CUBE" : "E2B");
    if (r < 0) {
        json_decref(prov);
        j->r = r;
        j->backend = sbx_xstrdup(backend);
        jobs_submit(d->jobs, list_run, list_done, j); /* done is always called later */
        return true;
    }
    const char *key = prov ? json_string_value(json_object_get(prov, "api_key")) : env->api_key;
    j->backend = sbx_xstrdup(backend);
    j->api_url = sbx_xstrdup(url);
    j->api_key = key ? sbx_xstrdup(key) : NULL;
    j->timeout_ms = prov ? (long)json_integer_value(json_object_get(prov, "http_timeout_sec")) * 1000
                         : env->http_timeout_ms;
    json_decref(prov);
    jobs_submit(d->jobs, list_run, list_done, j);
    return true;
}
