#include "mounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "util.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

static int by_length_desc(const void *a, const void *b)
{
    size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
    return la < lb ? 1 : la > lb ? -1 : 0;
}

int sbx_umount_beneath(const char *dir)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    char **found = NULL;
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        /* id parent major:minor root mountpoint ... */
        char *save = NULL, *mp = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            mp = tok = strtok_r(NULL, " ", &save);
        if (!mp)
            continue;
        unescape_octal(mp);
        if (strncmp(mp, dir, dlen) || (mp[dlen] != '\0' && mp[dlen] != '/'))
            continue;
        found = sbx_xrealloc(found, (n + 1) * sizeof(*found));
        found[n++] = sbx_xstrdup(mp);
    }
    free(line);
    if (n)
        qsort(found, n, sizeof(*found), by_length_desc);
    int done = 0;
    for (size_t i = 0; i < n; i++) {
        if (umount2(found[i], MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
            done++;
        free(found[i]);
    }
    free(found);
    return done;
}
