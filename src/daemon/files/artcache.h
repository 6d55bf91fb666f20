/* What the last collection of a sandbox's artifacts learnt, so that an unchanged out/ is
 * neither copied, hashed, typed nor scanned again.
 *
 * A file is identified by a stamp: device, inode, size, mtime and ctime (nanoseconds)
 * and the inode generation where the filesystem has one (FS_IOC_GETVERSION). The sandbox
 * can set mtime but not ctime: every change of the bytes or of the name's inode moves
 * one of them. An entry is "settled" only when that holds for the bytes that were read
 * (see art_settled_begin): then the stamp alone proves the digest. An unsettled entry
 * still saves everything but the read: the file is hashed again, and when the digest is
 * the one remembered, its blob, type and verdict are reused (they depend on the bytes
 * only).
 *
 * One set per sandbox, for the last ART_CACHE_SANDBOXES sandboxes that collected;
 * a set is taken out while a collection runs and replaced when it ends. */
#ifndef SBX_ARTCACHE_H
#define SBX_ARTCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "artifacts.h"

#define ART_CACHE_SANDBOXES 32

struct art_stamp {
    uint64_t dev, ino, size, gen;
    int64_t mtime_ns, ctime_ns;
};

struct art_cached {
    struct artifact art;
    struct art_stamp stamp;
    bool settled;
};

struct art_set;
struct art_cache;

struct art_cache *art_cache_new(void);
void art_cache_free(struct art_cache *c);
/* The sandbox's set, now the caller's (NULL when there is none). */
struct art_set *art_cache_take(struct art_cache *c, const char *sandbox_id);
/* Install s (taken over) as the sandbox's set, dropping the least recently used one
 * when all slots are in use. */
void art_cache_put(struct art_cache *c, const char *sandbox_id, struct art_set *s);

struct art_set *art_set_new(void);
void art_set_free(struct art_set *s);
/* A copy of a (its path too). Call art_set_seal once all are added. */
void art_set_add(struct art_set *s, const struct artifact *a, const struct art_stamp *st,
                 bool settled);
void art_set_seal(struct art_set *s);
const struct art_cached *art_set_find(const struct art_set *s, const char *path);

/* The stamp of the regular file open on fd. */
int art_stamp_fd(int fd, struct art_stamp *st);
bool art_stamp_eq(const struct art_stamp *a, const struct art_stamp *b);

/* Settling, around the one read of a file:
 *   art_settled_begin(fd, &t)    before: the time, and whether the page cache holds no
 *                                dirty page of it (a write through a shared mapping to a
 *                                page already dirty moves no time stamp; to a clean page
 *                                it does)
 *   stamp before the read, read, stamp after
 *   art_settled_end(t, &before, &after)   true when nothing can have changed unseen.
 * A file found dirty gets its write-back started, so that the next collection can
 * settle it. */
struct art_settle {
    int64_t t0_ns;
    bool clean;
};
void art_settled_begin(int fd, struct art_settle *t);
bool art_settled_end(const struct art_settle *t, const struct art_stamp *before,
                     const struct art_stamp *after);

#endif
