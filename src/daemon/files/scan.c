#include "scan.h"

#include <clamav.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../../common/util.h"

/* Every parser on, and the heuristics: what a file handed to an agent deserves. */
static const struct cl_scan_options scan_options = {.parse = ~0u,
                                                    .general = CL_SCAN_GENERAL_HEURISTICS};

struct scanner {
    pthread_mutex_t mu;
    bool tried;
    struct cl_engine *engine;
    char *system_db, *own_set;
    char *scratch; /* the engine's tmpdir when sbx made one, removed with the scanner */
    json_t *databases;
    unsigned signatures;
    char error[256];
};

struct scanner *scanner_new(const char *system_db, const char *own_set)
{
    struct scanner *s = sbx_xcalloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->system_db = sbx_xstrdup(system_db);
    s->own_set = sbx_xstrdup(own_set);
    s->databases = json_array();
    return s;
}

void scanner_free(struct scanner *s)
{
    if (!s)
        return;
    if (s->engine)
        cl_engine_free(s->engine);
    if (s->scratch)
        (void)rmdir(s->scratch); /* each scan removed its own directory in it */
    free(s->scratch);
    json_decref(s->databases);
    free(s->system_db);
    free(s->own_set);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static bool has_system_db(const char *dir)
{
    static const char *const names[] = {"main.cvd", "main.cld", "daily.cvd", "daily.cld"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *p = sbx_xasprintf("%s/%s", dir, names[i]);
        if (access(p, R_OK) == 0)
            return true;
    }
    return false;
}

/* What a killed sbxd left there (its pid gone) would stay until the host reboots. */
static void sweep_scratch(void)
{
    DIR *d = opendir(SCAN_SCRATCH_PARENT);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        int end = 0;
        struct stat st;
        if (sscanf(de->d_name, "sbx-scan-%ld-%*6[A-Za-z0-9]%n", &pid, &end) != 1 ||
            de->d_name[end] || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid())
            continue; /* a live sbxd's, or not one an sbxd of this user made */
        _cleanup_free_ char *path = sbx_xasprintf("%s/%s", SCAN_SCRATCH_PARENT, de->d_name);
        (void)sbx_rm_rf(path); /* another sbxd may be sweeping it too */
    }
    closedir(d);
}

/* Every scan makes and removes a directory of its own in the engine's tmpdir, a text file's
 * too: on a disk filesystem that is two inodes written per artifact (on ext4 without a
 * journal far more, as each new inode skips every one freed in the last minutes); a cold
 * listing of 1 000 small files took 0.64-1.09 s here with them in /tmp, 0.49-0.81 s in
 * /dev/shm. Unless TMPDIR names a place, scans get a directory of sbxd's own in /dev/shm
 * when that is a tmpfs (named for its pid); what they extract there stays within the
 * engine's size limits and is removed as each scan ends. */
static int use_scratch(struct scanner *s, struct cl_engine *e)
{
    struct statfs fs;
    if (getenv("TMPDIR") || statfs(SCAN_SCRATCH_PARENT, &fs) < 0 || fs.f_type != TMPFS_MAGIC)
        return 0;
    sweep_scratch();
    char tmpl[sizeof(SCAN_SCRATCH_PARENT) + 48];
    snprintf(tmpl, sizeof(tmpl), "%s/sbx-scan-%ld-XXXXXX", SCAN_SCRATCH_PARENT, (long)getpid());
    if (!mkdtemp(tmpl))
        return 0; /* the engine's default stays */
    cl_error_t rc = cl_engine_set_str(e, CL_ENGINE_TMPDIR, tmpl);
    if (rc != CL_SUCCESS) {
        (void)rmdir(tmpl);
        snprintf(s->error, sizeof(s->error), "setting the engine's tmpdir: %s", cl_strerror(rc));
        return -1;
    }
    s->scratch = sbx_xstrdup(tmpl);
    return 0;
}

/* Under s->mu. */
static void build(struct scanner *s)
{
    s->tried = true;
    cl_error_t rc = cl_init(CL_INIT_DEFAULT);
    if (rc != CL_SUCCESS) {
        snprintf(s->error, sizeof(s->error), "cl_init: %s", cl_strerror(rc));
        return;
    }
    struct cl_engine *e = cl_engine_new();
    if (!e) {
        snprintf(s->error, sizeof(s->error), "cl_engine_new failed");
        return;
    }
    if (use_scratch(s, e) < 0) {
        cl_engine_free(e);
        return;
    }
    const char *sets[2] = {has_system_db(s->system_db) ? s->system_db : NULL, s->own_set};
    for (size_t i = 0; i < 2; i++) {
        if (!sets[i])
            continue;
        unsigned n = 0;
        rc = cl_load(sets[i], e, &n, CL_DB_STDOPT);
        if (rc != CL_SUCCESS) {
            snprintf(s->error, sizeof(s->error), "loading %.180s: %s", sets[i], cl_strerror(rc));
            cl_engine_free(e);
            return;
        }
        s->signatures += n;
        json_array_append_new(s->databases, json_string(sets[i]));
    }
    rc = cl_engine_compile(e);
    if (rc != CL_SUCCESS) {
        snprintf(s->error, sizeof(s->error), "compiling the engine: %s", cl_strerror(rc));
        cl_engine_free(e);
        return;
    }
    s->engine = e;
}

/* The compiled engine, built by the first scan; NULL with the reason in virus. */
static const struct cl_engine *engine(struct scanner *s, char *virus, size_t virus_len)
{
    pthread_mutex_lock(&s->mu);
    if (!s->tried)
        build(s);
    pthread_mutex_unlock(&s->mu);
    if (!s->engine)
        snprintf(virus, virus_len, "%s", s->error);
    return s->engine;
}

static enum scan_verdict verdict(cl_error_t rc, const char *name, char *virus, size_t virus_len)
{
    if (rc == CL_VIRUS) {
        snprintf(virus, virus_len, "%s", name ? name : "unknown");
        return SCAN_INFECTED;
    }
    if (rc == CL_CLEAN)
        return SCAN_CLEAN;
    snprintf(virus, virus_len, "%s", cl_strerror(rc));
    return SCAN_ERROR;
}

enum scan_verdict scanner_scan_fd(struct scanner *s, int fd, char *virus, size_t virus_len)
{
    const struct cl_engine *e = engine(s, virus, virus_len);
    if (!e)
        return SCAN_ERROR;
    if (lseek(fd, 0, SEEK_SET) < 0) {
        snprintf(virus, virus_len, "seek: %s", strerror(errno));
        return SCAN_ERROR;
    }
    struct cl_scan_options opts = scan_options;
    const char *name = NULL;
    unsigned long scanned = 0;
    return verdict(cl_scandesc(fd, NULL, &name, &scanned, e, &opts), name, virus, virus_len);
}

enum scan_verdict scanner_scan_mem(struct scanner *s, const void *buf, size_t len, char *virus,
                                   size_t virus_len)
{
    const struct cl_engine *e = engine(s, virus, virus_len);
    if (!e)
        return SCAN_ERROR;
    cl_fmap_t *map = cl_fmap_open_memory(buf, len);
    if (!map) {
        snprintf(virus, virus_len, "mapping %zu bytes to scan failed", len);
        return SCAN_ERROR;
    }
    struct cl_scan_options opts = scan_options;
    const char *name = NULL;
    unsigned long scanned = 0;
    cl_error_t rc = cl_scanmap_callback(map, NULL, &name, &scanned, e, &opts, NULL);
    cl_fmap_close(map);
    return verdict(rc, name, virus, virus_len);
}

const char *scan_verdict_name(enum scan_verdict v)
{
    return v == SCAN_CLEAN ? "clean" : v == SCAN_INFECTED ? "infected" : "error";
}

json_t *scanner_describe(struct scanner *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *o = json_pack("{s:s,s:s}", "engine", "clamav", "version", cl_retver());
    if (s->engine) {
        json_object_set(o, "databases", s->databases);
        json_object_set_new(o, "signatures", json_integer(s->signatures));
    } else if (s->tried) {
        json_object_set_new(o, "error", json_string(s->error));
    }
    pthread_mutex_unlock(&s->mu);
    return o;
}
