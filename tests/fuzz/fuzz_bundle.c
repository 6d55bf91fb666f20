/* libFuzzer target for skill bundles (src/daemon/skills/bundle.c): an uploaded zip or tar
 * unpacked with libarchive beneath a fresh directory.
 *
 * Input: the archive. It is unpacked into an empty directory on a tmpfs (fast; removed
 * after each input). Invariants: whatever the archive says, the tree left behind holds
 * only regular files and directories, all beneath the directory (nftw from it sees
 * everything that was made), no temporary upload file survives (a name with its prefix
 * that the archive itself does not hold), and when the unpacking
 * succeeded there are at most BUNDLE_ENTRIES_MAX files of at most BUNDLE_FILE_MAX bytes,
 * BUNDLE_TOTAL_MAX and BUNDLE_RATIO_MAX times the archive in all. A refusal is
 * invalid_bundle or bundle_too_large.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/daemon/files/workspace.h"
#include "../../src/daemon/skills/bundle.h"
#include "fuzz.h"

static char base[64];
static uint64_t files, bytes;
static const uint8_t *input;
static size_t input_len;

static int look(const char *path, const struct stat *st, int type, struct FTW *f)
{
    REQUIRE(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode));
    /* A name of the writer's own making, not one the archive gave. */
    const char *name = path + f->base;
    REQUIRE(strncmp(name, WS_TMP_PREFIX, strlen(WS_TMP_PREFIX)) ||
            memmem(input, input_len, name, strlen(name)));
    if (S_ISREG(st->st_mode)) {
        files++;
        bytes += (uint64_t)st->st_size;
        REQUIRE((uint64_t)st->st_size <= BUNDLE_FILE_MAX);
    }
    return 0;
}

static int drop(const char *path, const struct stat *st, int type, struct FTW *f)
{
    if (f->level > 0)
        REQUIRE(remove(path) == 0);
    return 0;
}

static void cleanup(void)
{
    (void)nftw(base, drop, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0]) {
        snprintf(base, sizeof(base), "/dev/shm/sbx-fuzz-bundle-XXXXXX");
        if (!mkdtemp(base)) {
            snprintf(base, sizeof(base), "/tmp/sbx-fuzz-bundle-XXXXXX");
            REQUIRE(mkdtemp(base));
        }
        atexit(cleanup);
    }
    int fd = memfd_create("bundle", MFD_CLOEXEC);
    REQUIRE(fd >= 0 && write(fd, data, size) == (ssize_t)size);
    int dest = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(dest >= 0);
    struct sbx_err err = {0};
    int r = bundle_unpack(fd, dest, &err);
    close(dest);
    close(fd);
    files = bytes = 0;
    input = data;
    input_len = size;
    REQUIRE(nftw(base, look, 16, FTW_PHYS) == 0);
    if (r == 0) {
        REQUIRE(files <= BUNDLE_ENTRIES_MAX);
        REQUIRE(bytes <= BUNDLE_TOTAL_MAX && bytes <= (uint64_t)size * BUNDLE_RATIO_MAX);
    } else {

        REQUIRE(!strcmp(err.code, "invalid_bundle") || !strcmp(err.code, "bundle_too_large"));
    }
    REQUIRE(nftw(base, drop, 16, FTW_DEPTH | FTW_PHYS) == 0);
    return 0;
}
