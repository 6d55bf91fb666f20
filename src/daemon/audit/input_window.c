/* Coalesced audit of binary stdin (input_window.h). */
#include "input_window.h"

#include <string.h>

#include "../../common/loop.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../auth/auth.h"
#include "../store/store.h"
#include "audit.h"

struct window {
    struct audit_windows *owner;
    struct loop_timer *timer; /* NULL: the slot is free */
    struct auth_identity who;
    char request_id[64];
    char action[32];
    char sandbox[STORE_ID_MAX + 1];
    char process[32];
    char via[16];
    unsigned long long calls, bytes;
};

struct audit_windows {
    struct loop *loop;
    struct store *store;
    struct window slots[AUDIT_INPUT_WINDOWS_MAX];
};

struct audit_windows *audit_windows_new(struct loop *loop, struct store *store)
{
    struct audit_windows *w = sbx_xcalloc(1, sizeof(*w));
    w->loop = loop;
    w->store = store;
    for (size_t i = 0; i < AUDIT_INPUT_WINDOWS_MAX; i++)
        w->slots[i].owner = w;
    return w;
}

/* The window's entry (when anything was summed into it), and the slot freed. */
static void window_close(struct window *s)
{
    if (s->calls)
        audit_record(s->owner->store, &s->who, NULL, s->request_id, s->action, s->sandbox, "ok",
                     json_pack("{s:s,s:s,s:{s:I,s:I,s:i}}", "process", s->process, "via", s->via,
                               "coalesced", "calls", (json_int_t)s->calls, "bytes",
                               (json_int_t)s->bytes, "window_ms", AUDIT_INPUT_WINDOW_MS));
    s->timer = NULL;
    s->calls = s->bytes = 0;
}

static void on_window_end(struct loop *l, void *data)
{
    window_close(data);
}

void audit_windows_free(struct audit_windows *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < AUDIT_INPUT_WINDOWS_MAX; i++) {
        struct window *s = &w->slots[i];
        if (s->timer) {
            loop_timer_cancel(w->loop, s->timer);
            window_close(s);
        }
    }
    free(w);
}

bool audit_input_binary(const char *buf, size_t n)
{
    return memchr(buf, '\0', n) || !sbx_utf8_valid(buf, n);
}

bool audit_window_take(struct audit_windows *w, const struct auth_identity *who,
                       const char *request_id, const char *action, const char *sandbox,
                       const char *process, const char *via, size_t n)
{
    struct window *free_slot = NULL;
    for (size_t i = 0; i < AUDIT_INPUT_WINDOWS_MAX; i++) {
        struct window *s = &w->slots[i];
        if (!s->timer) {
            free_slot = free_slot ? free_slot : s;
            continue;
        }
        if (!strcmp(s->sandbox, sandbox) && !strcmp(s->process, process) &&
            !strcmp(s->action, action)) {
            s->calls++;
            s->bytes += n;
            return false;
        }
    }
    if (!free_slot || strlen(sandbox) >= sizeof(free_slot->sandbox) ||
        strlen(process) >= sizeof(free_slot->process) ||
        strlen(action) >= sizeof(free_slot->action) || strlen(via) >= sizeof(free_slot->via))
        return true;
    struct window *s = free_slot;
    if (who)
        s->who = *who;
    else
        memset(&s->who, 0, sizeof(s->who));
    snprintf(s->request_id, sizeof(s->request_id), "%s", request_id ? request_id : "");
    snprintf(s->action, sizeof(s->action), "%s", action);
    snprintf(s->sandbox, sizeof(s->sandbox), "%s", sandbox);
    snprintf(s->process, sizeof(s->process), "%s", process);
    snprintf(s->via, sizeof(s->via), "%s", via);
    s->calls = s->bytes = 0;
    s->timer = loop_timer_add(w->loop, AUDIT_INPUT_WINDOW_MS, on_window_end, s);
    return true; /* the window's first: its own entry, with what was sent */
}
