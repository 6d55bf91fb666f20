/* envd's EntryInfo (e2b_entry_json, envd.h): the one shape filesystem answers (e2b_fs.c)
 * and WatchDir events (e2b_watch.c) share, apart from both so neither calls the other. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../../common/util.h"
#include "e2b.h"
#include "envd.h"

static const char *type_name(mode_t m)
{
    if (S_ISDIR(m))
        return "FILE_TYPE_DIRECTORY";
    if (S_ISLNK(m))
        return "FILE_TYPE_SYMLINK";
    if (S_ISREG(m))
        return "FILE_TYPE_FILE";
    return "FILE_TYPE_UNSPECIFIED";
}

/* Go's FileMode.String(). */
static void permissions(mode_t m, char out[11])
{
    out[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'L' : '-';
    static const char rwx[] = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        out[1 + i] = (m & (1u << (8 - i))) ? rwx[i] : '-';
    out[10] = '\0';
}

json_t *e2b_entry_at(const char *path, const struct stat *st, const char *target,
                     const char *owner)
{
    char perms[11], when[64], sz[24];
    permissions(st->st_mode, perms);
    struct tm tm;
    gmtime_r(&st->st_mtim.tv_sec, &tm);
    size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof(when) - n, ".%09ldZ", st->st_mtim.tv_nsec);
    snprintf(sz, sizeof(sz), "%lld", (long long)st->st_size);
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s}", "name", name, "type",
                          type_name(st->st_mode), "path", path, "size", sz, "mode",
                          (int)(st->st_mode & 0777), "permissions", perms, "owner", owner,
                          "group", owner, "modifiedTime", when);
    if (target && *target)
        json_object_set_new(o, "symlinkTarget", json_string(target));
    return o;
}

json_t *e2b_entry_json(const char *rel, const struct stat *st, const char *target)
{
    _cleanup_free_ char *path = e2b_ws_to_path(rel);
    return e2b_entry_at(path, st, target, "user");
}
