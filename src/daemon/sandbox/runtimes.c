/* Which execution backends this daemon runs (docs/runtime.md). SBX_BACKEND lists them in
 * order of preference; when the operator set it, each is proved at start-up by a real
 * sandbox start on the base template (then destroyed), and the first that works is the
 * default. One that fails is logged and left out; none working stops the daemon. Without
 * SBX_BACKEND the daemon runs gVisor alone and starts nothing to check it, as before. */
#include "lifecycle.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../runtime/docker_image.h"
#include "../../runtime/provider_api.h"
#include "template.h"

#define PROBE_MEMORY_BYTES (256ull << 20)
#define PROBE_PIDS 64
#define PROBE_TMP_BYTES (16ull << 20)

static int probe(struct manager *m, const char *name, struct sbx_err *err)
{
    if (!strcmp(name, "docker")) {
        /* The engine answers: its images (sbx-base among them) may come later, through
         * POST /v1/templates/{name}/docker-image (docs/runtime.md "Docker"). */
        _cleanup_free_ char *version = NULL;
        bool has = false;
        struct docker_engine e = {.host = m->rt.docker_host};
        int r = docker_engine_info(&e, 0, &version, &has, NULL, err);
        if (r == 0)
            log_info("backend docker: engine %s at %s", version, m->rt.docker_host);
        return r;
    }
    if (!strcmp(name, "e2b") || !strcmp(name, "cube")) {
        /* Reachable and the credentials good: the provider's list answers. A sandbox is
         * made only by the configurations' deep probe (docs/providers.md). */
        const struct rt_provider *p = !strcmp(name, "e2b") ? m->rt.e2b : m->rt.cube;
        struct provider_conn c = {.kind = name, .api_url = p->api_url, .api_key = p->api_key,
                                  .http_timeout_ms = p->http_timeout_ms};
        json_t *list = NULL;
        int r = provider_sandbox_list(&c, &list, err);
        if (r == 0)
            log_info("backend %s: the provider at %s answers (%zu sandboxes)", name, p->api_url,
                     json_array_size(list));
        json_decref(list);
        return r;
    }
    struct template_info tpl;
    int r = template_resolve(m->cfg->template_cache, "base", &tpl, err);
    if (r < 0)
        return r;
    char id[RT_ID_MAX + 1];
    snprintf(id, sizeof(id), "probe-%s-%d", name, (int)getpid());
    _cleanup_free_ char *dir = sbx_xasprintf("%s/probe/%s", m->cfg->data_dir, id);
    _cleanup_free_ char *state = sbx_xasprintf("%s/state", dir);
    _cleanup_free_ char *ws = sbx_xasprintf("%s/workspace", dir);
    (void)sbx_rm_rf(dir);
    if ((r = sbx_mkdir_p(state, 0700)) < 0 || (r = sbx_mkdir_p(ws, 0755)) < 0) {
        template_info_clear(&tpl);
        return sbx_err_sys(err, -r, "creating %s", dir);
    }
    struct rt_spec spec = {.id = id,
                           .rootfs = tpl.rootfs,
                           .state_dir = state,
                           .workspace = ws,
                           .memory_bytes = PROBE_MEMORY_BYTES,
                           .pids_max = PROBE_PIDS,
                           .cpu_millicores = 1000,
                           .tmp_bytes = PROBE_TMP_BYTES,
                           .hostname = "sandbox",
                           .runtime = name};
    long long t0 = sbx_now_ms();
    int fd = -1;
    r = rt_start(&m->rt, &spec, &fd, err);
    if (r == 0) {
        r = rt_start_wait(&m->rt, &spec, fd, err);
        close(fd);
    }
    template_info_clear(&tpl);
    struct sbx_err derr = {0};
    (void)rt_destroy(&m->rt, id, state, dir, NULL, &derr);
    if (r == 0)
        log_info("backend %s: works (a sandbox started in %lld ms)", name, sbx_now_ms() - t0);
    return r;
}

int manager_runtimes_init(struct manager *m, struct sbx_err *err)
{
    m->nruntimes = 0;
    for (char **p = m->cfg->backends; *p && m->nruntimes < MANAGER_RUNTIMES_MAX; p++) {
        const struct rt_backend *b = rt_backend_find(*p);
        bool dup = false;
        for (int i = 0; i < m->nruntimes; i++)
            dup = dup || !strcmp(m->runtimes[i], b->name);
        if (dup)
            continue;
        struct sbx_err perr = {0};
        if (m->cfg->probe_backends && probe(m, b->name, &perr) < 0) {
            log_error("backend %s: unusable, left out: %s", b->name, perr.msg);
            continue;
        }
        if (!b->isolated)
            log_warn("backend %s: ENABLED. Sandboxes on it run on this host with NO ISOLATION "
                     "(a mount namespace only): never for untrusted code",
                     b->name);
        m->runtimes[m->nruntimes++] = b->name;
    }
    if (m->nruntimes == 0)
        return sbx_err_set(err, ENODEV, "invalid_config",
                           "no execution backend of SBX_BACKEND works on this host");
    log_info("backends: %s is the default of %d", m->runtimes[0], m->nruntimes);
    return 0;
}

int manager_runtime_pick(const struct manager *m, const char *asked, const char **out,
                         struct sbx_err *err)
{
    if (!asked) {
        *out = m->runtimes[0];
        return 0;
    }
    for (int i = 0; i < m->nruntimes; i++)
        if (!strcmp(m->runtimes[i], asked)) {
            *out = m->runtimes[i];
            return 0;
        }
    char allowed[64] = "";
    for (int i = 0; i < m->nruntimes; i++)
        snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
                 i ? ", " : "", m->runtimes[i]);
    return sbx_err_set(err, EINVAL, "invalid_runtime",
                       "runtime %s is not enabled on this host (enabled: %s)", asked, allowed);
}
