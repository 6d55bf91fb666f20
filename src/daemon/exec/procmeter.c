#include "procmeter.h"

#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../billing/billing.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/manager.h"

struct procmeter {
    struct sandbox *sb;
    procmeter_started_fn started; /* NULL once told or detached */
    void *data;
    struct billing_exec billing;
    /* The audit entry, written once the agent answered the start. */
    struct store *store;
    struct auth_identity who;
    char request_id[64];
    char action[32];
    char sandbox_id[STORE_ID_MAX + 1];
    json_t *what; /* audit_command_details */
};

static void audit_start(struct procmeter *m, json_t *result, const struct sbx_err *err)
{
    char outcome[80];
    if (err)
        snprintf(outcome, sizeof(outcome), "error:%s", err->code);
    else
        snprintf(outcome, sizeof(outcome), "started");
    json_t *details = m->what;
    m->what = NULL;
    if (result) {
        json_t *id = json_object_get(result, "id"), *pid = json_object_get(result, "pid");
        if (json_is_string(id))
            json_object_set(details, "process_id", id);
        if (json_is_integer(pid))
            json_object_set(details, "pid", pid);
    }
    audit_record(m->store, &m->who, NULL, m->request_id, m->action, m->sandbox_id, outcome,
                 details);
}

/* The process ended, or the stream did (sandbox stopped, paused or destroyed): its
 * time up to now is metered either way. */
static void on_ended(json_t *result, const struct sbx_err *err, void *data)
{
    struct procmeter *m = data;
    billing_meter_exec(&m->billing);
    json_decref(m->what);
    free(m);
}

static const struct agentcall_ops wait_ops = {.on_done = on_ended};

static void on_started(json_t *result, const struct sbx_err *err, void *data)
{
    struct procmeter *m = data;
    procmeter_started_fn started = m->started;
    void *sdata = m->data;
    audit_start(m, err ? NULL : result, err);
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

int procmeter_start(struct sandbox *sb, const struct procmeter_origin *o, json_t *op,
                    procmeter_started_fn started, void *data, struct procmeter **out,
                    struct sbx_err *err)
{
    const struct auth_identity *who = o->who;
    if (billing_admit(who->user, err) < 0) {
        json_decref(op);
        return sbx_err_ret(err);
    }
    struct procmeter *m = sbx_xcalloc(1, sizeof(*m));
    m->sb = sb;
    m->started = started;
    m->data = data;
    m->store = manager_store(sb->mgr);
    m->who = *who;
    snprintf(m->request_id, sizeof(m->request_id), "%s", o->request_id ? o->request_id : "");
    snprintf(m->action, sizeof(m->action), "%s", o->action);
    snprintf(m->sandbox_id, sizeof(m->sandbox_id), "%s", sb->rec.id);
    m->what = audit_command_details(NULL, o->command, o->command ? strlen(o->command) : 0);
    /* Counted as running at once: parallel starts see each other (billing_exec_begin). */
    billing_exec_begin(who->user, who->key_id, sb->rec.id, sb->rec.backend, &m->billing);
    int r = agentcall_start(sb, op, &start_ops, m, NULL, err);
    if (r < 0) {
        billing_exec_drop(&m->billing);
        json_decref(m->what);
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
