#include "procmeter.h"

#include <string.h>

#include "../../common/util.h"
#include "../billing/billing.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/manager.h"

struct procmeter {
    struct sandbox *sb;
    procmeter_started_fn started; /* NULL once told or detached */
    void *data;
    struct billing_exec billing;
};

/* The process ended, or the stream did (sandbox stopped, paused or destroyed): its
 * time up to now is metered either way. */
static void on_ended(json_t *result, const struct sbx_err *err, void *data)
{
    struct procmeter *m = data;
    billing_meter_exec(&m->billing);
    free(m);
}

static const struct agentcall_ops wait_ops = {.on_done = on_ended};

static void on_started(json_t *result, const struct sbx_err *err, void *data)
{
    struct procmeter *m = data;
    procmeter_started_fn started = m->started;
    void *sdata = m->data;
    if (err) {
        billing_exec_drop(&m->billing);
        free(m);
    } else if (sandbox_is_v1(m->sb)) {
        /* A v1 machine lives for one op: it stops now, and the process with it. A wait
         * stream would keep it alive, or boot a fresh machine to wait on. */
        on_ended(result, NULL, m);
    } else {
        struct sbx_err e = {0};
        json_t *op = json_pack("{s:s,s:s,s:b}", "op", "process_logs", "id",
                               json_string_value(json_object_get(result, "id")) ?: "", "wait", 1);
        if (agentcall_start(m->sb, op, &wait_ops, m, NULL, &e) < 0)
            on_ended(NULL, &e, m);
    }
    if (started)
        started(result, err, sdata);
}

static const struct agentcall_ops start_ops = {.on_done = on_started};

int procmeter_start(struct sandbox *sb, const struct auth_identity *who, json_t *op,
                    procmeter_started_fn started, void *data, struct procmeter **out,
                    struct sbx_err *err)
{
    if (billing_admit(who->user, err) < 0) {
        json_decref(op);
        return sbx_err_ret(err);
    }
    struct procmeter *m = sbx_xcalloc(1, sizeof(*m));
    m->sb = sb;
    m->started = started;
    m->data = data;
    /* Counted as running at once: parallel starts see each other (billing_exec_begin). */
    billing_exec_begin(who->user, who->key_id, sb->rec.id, sb->rec.backend, &m->billing);
    int r = agentcall_start(sb, op, &start_ops, m, NULL, err);
    if (r < 0) {
        billing_exec_drop(&m->billing);
        free(m);
        return r;
    }
    *out = m;
    return 0;
}

void procmeter_detach(struct procmeter *m)
{
    m->started = NULL;
}
