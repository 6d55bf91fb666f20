#include "artcache.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../store/store.h"

/* Linux 6.5; older headers do not name it. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct cachestat_range_ {
    uint64_t off, len;
};
struct cachestat_ {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

struct art_set {
    struct art_cached *v;
    size_t n, cap;
};

struct slot {
    char id[STORE_ID_MAX + 1];
    struct art_set *set;
    unsigned long long used;
};

struct art_cache {
    pthread_mutex_t mu;
    unsigned long long clock;
    struct slot slots[ART_CACHE_SANDBOXES];
};

struct art_cache *art_cache_new(void)
{
    struct art_cache *c = sbx_xcalloc(1, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void art_cache_free(struct art_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < ART_CACHE_SANDBOXES; i++)
        art_set_free(c->slots[i].set);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

struct art_set *art_cache_take(struct art_cache *c, const char *sandbox_id)
{
    struct art_set *s = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ART_CACHE_SANDBOXES; i++)
        if (c->slots[i].set && !strcmp(c->slots[i].id, sandbox_id)) {
            s = TAKE_PTR(c->slots[i].set);
            break;
        }
    pthread_mutex_unlock(&c->mu);
    return s;
}

void art_cache_put(struct art_cache *c, const char *sandbox_id, struct art_set *s)
{
    pthread_mutex_lock(&c->mu);
    struct slot *to = NULL;
    for (size_t i = 0; i < ART_CACHE_SANDBOXES && !to; i++)
        if (c->slots[i].set && !strcmp(c->slots[i].id, sandbox_id))
            to = &c->slots[i];
    for (size_t i = 0; i < ART_CACHE_SANDBOXES && !to; i++)
        if (!c->slots[i].set)
            to = &c->slots[i];
    if (!to) {
        to = &c->slots[0];
        for (size_t i = 1; i < ART_CACHE_SANDBOXES; i++)
            if (c->slots[i].used < to->used)
                to = &c->slots[i];
    }
    art_set_free(to->set);
    snprintf(to->id, sizeof(to->id), "%s", sandbox_id);
    to->set = s;
    to->used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
}

struct art_set *art_set_new(void)
{
    return sbx_xcalloc(1, sizeof(struct art_set));
}

void art_set_free(struct art_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].art.path);
    free(s->v);
    free(s);
}

void art_set_add(struct art_set *s, const struct artifact *a, const struct art_stamp *st,
                 bool settled)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = sbx_xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    struct art_cached *e = &s->v[s->n++];
    e->art = *a;
    e->art.path = sbx_xstrdup(a->path);
    e->stamp = *st;
    e->settled = settled;
}

static int cmp_cached(const void *a, const void *b)
{
    return strcmp(((const struct art_cached *)a)->art.path,
                  ((const struct art_cached *)b)->art.path);
}

void art_set_seal(struct art_set *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof(*s->v), cmp_cached);
}

const struct art_cached *art_set_find(const struct art_set *s, const char *path)
{
    if (!s || !s->n)
        return NULL;
    struct art_cached key = {.art.path = (char *)path};
    return bsearch(&key, s->v, s->n, sizeof(*s->v), cmp_cached);
}

int art_stamp_fd(int fd, struct art_stamp *st)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return -errno;
    /* The generation tells a reused inode number apart; 0 where the filesystem has none. */
    long gen = 0;
    if (ioctl(fd, FS_IOC_GETVERSION, &gen) < 0)
        gen = 0;
    *st = (struct art_stamp){
        .dev = (uint64_t)sb.st_dev,
        .ino = (uint64_t)sb.st_ino,
        .size = (uint64_t)sb.st_size,
        .gen = (uint64_t)(unsigned long)gen,
        .mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec,
        .ctime_ns = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec,
    };
    return 0;
}

bool art_stamp_eq(const struct art_stamp *a, const struct art_stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->gen == b->gen &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

void art_settled_begin(int fd, struct art_settle *t)
{
    /* The coarse clock is the one the kernel stamps ctime with: a change made after this
     * moment gets a ctime at or after it. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    t->t0_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    struct cachestat_range_ range = {0, 0};
    struct cachestat_ cs = {0};
    t->clean =
        syscall(SYS_cachestat, fd, &range, &cs, 0) == 0 && cs.nr_dirty == 0 && cs.nr_writeback == 0;
    if (!t->clean)
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

bool art_settled_end(const struct art_settle *t, const struct art_stamp *before,
                     const struct art_stamp *after)
{
    /* A ctime in the same tick as t0 could be followed by a change with the same ctime. */
    return t->clean && before->ctime_ns < t->t0_ns && art_stamp_eq(before, after);
}
