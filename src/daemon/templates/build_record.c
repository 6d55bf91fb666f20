/* Build records (custom and operator builds alike): their events, which watchers follow
 * live and late ones replay, and the list of each name's last build. docs/templates.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "build_internal.h"

void build_emit(struct template_build *tb, json_t *ev)
{
    if (!ev)
        return;
    json_array_append(tb->events, ev);
    for (size_t i = 0; i < tb->nwatchers; i++)
        tb->watchers[i].ops->on_event(json_incref(ev), tb->watchers[i].data);
    json_decref(ev);
}

void build_end_watchers(struct template_build *tb)
{
    while (tb->nwatchers) {
        struct watcher w = tb->watchers[--tb->nwatchers];
        w.ops->on_end(w.data);
    }
}

int build_percent(const struct template_build *tb)
{
    if (tb->status == TB_READY)
        return 100;
    return tb->nsteps ? (int)(tb->cur * 100 / tb->nsteps) : 0;
}

json_t *build_text_json(const char *s, size_t n)
{
    json_t *j = json_stringn(s, sbx_utf8_prefix(s, n));
    return j ? j : json_string("");
}

static void log_line(struct template_build *tb, unsigned ch, const char *s, size_t n)
{
    if (tb->log_truncated)
        return;
    if (tb->log_bytes + n > TEMPLATE_BUILD_LOG_MAX) {
        tb->log_truncated = true;
        build_emit(tb, json_pack("{s:s,s:I}", "type", "log_truncated", "kept_bytes",
                                 (json_int_t)tb->log_bytes));
        return;
    }
    tb->log_bytes += n;
    build_emit(tb, json_pack("{s:s,s:s,s:s,s:o}", "type", "log", "step", tb->steps[tb->cur].label,
                             "stream", ch ? "stderr" : "stdout", "line", build_text_json(s, n)));
}

void build_flush_lines(struct template_build *tb)
{
    for (unsigned ch = 0; ch < 2; ch++) {
        if (tb->lines[ch].len)
            log_line(tb, ch, tb->lines[ch].buf, tb->lines[ch].len);
        tb->lines[ch].len = 0;
    }
}

void build_output(struct template_build *tb, unsigned ch, const uint8_t *buf, size_t len)
{
    if (ch > 1)
        return;
    struct line_buf *lb = &tb->lines[ch];
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\n' || lb->len == sizeof(lb->buf)) {
            log_line(tb, ch, lb->buf, lb->len);
            lb->len = 0;
            if (buf[i] == '\n')
                continue;
        }
        lb->buf[lb->len++] = (char)buf[i];
    }
}

void build_step_event(struct template_build *tb)
{
    const struct step *s = &tb->steps[tb->cur];
    build_emit(tb,
               json_pack("{s:s,s:s,s:I,s:I,s:i,s:I}", "type", "step", "step", s->label, "index",
                         (json_int_t)tb->cur + 1, "total", (json_int_t)tb->nsteps, "percent",
                         build_percent(tb), "elapsed_ms", (json_int_t)(sbx_now_ms() - tb->t0_ms)));
}

void build_free(struct template_build *tb)
{
    if (!tb)
        return;
    recipe_clear(&tb->recipe);
    json_decref(tb->parent);
    json_decref(tb->events);
    json_decref(tb->installed);
    json_decref(tb->npm_list);
    json_decref(tb->error);
    json_decref(tb->manifest);
    json_decref(tb->inputs);
    free(tb->tmp);
    free(tb->rootfs);
    free(tb);
}

static const char *status_name(enum tb_status s)
{
    return s == TB_READY ? "ready" : s == TB_FAILED ? "failed" : "building";
}

json_t *template_build_json(const struct template_build *tb)
{
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:b,s:s?,s:i,s:s?,s:I}", "object", "template_build", "id", tb->id,
        "name", tb->name, "status", status_name(tb->status), "owner", tb->owner, "public",
        tb->shared, "from", tb->recipe.from, "percent", build_percent(tb), "recipe_digest",
        tb->digest[0] ? tb->digest : NULL, "started_at", (json_int_t)tb->started_at);
    if (!j)
        return NULL;
    if (tb->status == TB_BUILDING && tb->cur < tb->nsteps)
        json_object_set_new(j, "step", json_string(tb->steps[tb->cur].label));
    if (tb->status == TB_BUILDING && tb->sandbox_id[0])
        json_object_set_new(j, "sandbox_id", json_string(tb->sandbox_id));
    json_t *steps = json_array();
    for (size_t i = 0; i < tb->nsteps; i++)
        json_array_append_new(steps, json_string(tb->steps[i].label));
    json_object_set_new(j, "steps", steps);
    json_object_set_new(j, "finished_at",
                        tb->finished_at ? json_integer(tb->finished_at) : json_null());
    if (tb->error)
        json_object_set(j, "error", tb->error);
    if (tb->manifest) {
        const char *cd = json_string_value(json_object_get(tb->manifest, "content_digest"));
        json_object_set_new(j, "digest", json_sprintf("sha256:%s", cd));
        json_object_set(j, "size_bytes", json_object_get(tb->manifest, "bytes"));
    }
    json_object_set_new(j, "events_url", json_sprintf("/v1/templates/%s/build-events", tb->name));
    return j;
}

size_t build_running(const struct template_builds *b)
{
    size_t n = 0;
    for (const struct template_build *tb = b->list; tb; tb = tb->next)
        n += tb->status == TB_BUILDING;
    return n;
}

struct template_build *build_by_name(struct template_builds *b, const char *name)
{
    for (struct template_build *tb = b->list; tb; tb = tb->next)
        if (!strcmp(tb->name, name))
            return tb;
    return NULL;
}

void template_build_forget(struct template_builds *b, const char *name)
{
    for (struct template_build **p = &b->list; *p;) {
        struct template_build *tb = *p;
        if (!strcmp(tb->name, name) && tb->status != TB_BUILDING) {
            *p = tb->next;
            build_free(tb);
        } else {
            p = &tb->next;
        }
    }
}

/* Every name's last build is remembered, failed ones too: at most
 * TEMPLATE_BUILD_RECORDS_MAX, the oldest finished ones forgotten first. */
void build_remember(struct template_builds *b, struct template_build *tb)
{
    tb->next = b->list;
    b->list = tb;
    size_t n = 0;
    struct template_build **oldest = NULL;
    for (struct template_build **p = &b->list; *p; p = &(*p)->next) {
        n++;
        if ((*p)->status != TB_BUILDING)
            oldest = p;
    }
    if (n > TEMPLATE_BUILD_RECORDS_MAX && oldest) {
        struct template_build *old = *oldest;
        *oldest = old->next;
        build_free(old);
    }
}

struct template_build *template_build_find(struct template_builds *b, const char *name,
                                           const char *user)
{
    struct template_build *tb = build_by_name(b, name);
    if (!tb || !template_usable(tb->owner, tb->shared, user))
        return NULL;
    return tb;
}

struct template_build *template_build_by_id(struct template_builds *b, const char *id)
{
    for (struct template_build *tb = b->list; tb; tb = tb->next)
        if (!strcmp(tb->id, id))
            return tb;
    return NULL;
}

json_t *template_build_events(const struct template_build *tb)
{
    return tb->events;
}

const char *template_build_status(const struct template_build *tb)
{
    return status_name(tb->status);
}

bool template_build_running(struct template_builds *b, const char *name)
{
    for (struct template_build *tb = b->list; tb; tb = tb->next)
        if (tb->status == TB_BUILDING &&
            (!strcmp(tb->name, name) || (tb->recipe.from && !strcmp(tb->recipe.from, name))))
            return true;
    return false;
}

int template_build_watch(struct template_build *tb, const struct template_watch_ops *ops,
                         void *data)
{
    if (tb->status == TB_BUILDING && tb->nwatchers == TEMPLATE_BUILD_WATCHERS_MAX)
        return -EBUSY;
    size_t i;
    json_t *ev;
    json_array_foreach(tb->events, i, ev) ops->on_event(json_incref(ev), data);
    if (tb->status != TB_BUILDING) {
        ops->on_end(data);
        return 0;
    }
    tb->watchers[tb->nwatchers++] = (struct watcher){ops, data};
    return 0;
}

void template_build_unwatch(struct template_build *tb, void *data)
{
    for (size_t i = 0; i < tb->nwatchers; i++) {
        if (tb->watchers[i].data == data) {
            tb->watchers[i] = tb->watchers[--tb->nwatchers];
            return;
        }
    }
}

const char *template_build_id(const struct template_build *tb)
{
    return tb->id;
}
