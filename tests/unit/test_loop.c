/* src/common: loop_fd_park/unpark (a watch taken out of the epoll set and put back, its
 * owner none the wiser), sbx_copy_sparse (holes stay holes) and jobs_submit without a
 * pool. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/jobs.h"
#include "../../src/common/loop.h"
#include "../../src/common/util.h"
#include "check.h"

static int fired;

static void on_read(struct loop *l, int fd, uint32_t events, void *data)
{
    char c;
    if (read(fd, &c, 1) == 1)
        fired++;
}

static void on_stop(struct loop *l, void *data)
{
    loop_stop(l);
}

/* Run the loop for ms milliseconds. */
static void spin(struct loop *l, long long ms)
{
    (void)loop_timer_add(l, ms, on_stop, NULL);
    (void)loop_run(l);
}

static void test_park(void)
{
    struct loop *l;
    CHECK(loop_new(&l) == 0, "loop_new");
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe");
    struct loop_watch *w;
    CHECK(loop_watch_add(l, p[0], EPOLLIN, on_read, NULL, &w) == 0, "watch the read end");
    CHECK(write(p[1], "a", 1) == 1, "write");
    spin(l, 20);
    CHECK(fired == 1, "a watched fd fires");

    CHECK(loop_fd_park(l, p[0]) == 1, "park finds the one watch");
    CHECK(loop_fd_park(l, p[0]) == 0, "parking twice finds nothing more");
    CHECK(write(p[1], "b", 1) == 1, "write while parked");
    spin(l, 30);
    CHECK(fired == 1, "a parked fd does not fire");
    CHECK(loop_watch_mod(l, w, 0) == 0, "mod while parked only records");
    CHECK(loop_fd_unpark(l, p[0]) == 1, "unpark");
    spin(l, 30);
    CHECK(fired == 1, "unparked with the events recorded while parked (none)");
    CHECK(loop_watch_mod(l, w, EPOLLIN) == 0, "mod after unpark");
    spin(l, 30);
    CHECK(fired == 2, "the byte written while parked is read after unpark");
    CHECK(loop_fd_unpark(l, p[0]) == 0, "unparking what is not parked finds nothing");
    CHECK(loop_fd_park(l, 12345) == 0, "an fd without a watch");
    /* A parked watch can still be deleted, as an owner closing its socket does. */
    CHECK(loop_fd_park(l, p[0]) == 1, "park again");
    loop_watch_del(l, w);
    close(p[0]);
    close(p[1]);
    loop_free(l);
}

static void test_copy_sparse(void)
{
    char in_path[] = "/tmp/sbx-test-sparse-XXXXXX";
    int in = mkstemp(in_path);
    CHECK(in >= 0, "mkstemp");
    const off_t size = 64 << 20, at = 32 << 20;
    CHECK(ftruncate(in, size) == 0, "a 64 MiB sparse file");
    CHECK(pwrite(in, "head", 4, 0) == 4 && pwrite(in, "mid", 3, at) == 3, "two bits of data");
    char out_path[] = "/tmp/sbx-test-sparse-XXXXXX";
    int out = mkstemp(out_path);
    CHECK(out >= 0, "mkstemp");
    CHECK(sbx_copy_sparse(in, out) == 0, "sbx_copy_sparse");
    struct stat st;
    CHECK(fstat(out, &st) == 0 && st.st_size == size, "same size");
    CHECK(st.st_blocks * 512 < (1 << 20), "the copy is sparse (%lld bytes allocated)",
          (long long)st.st_blocks * 512);
    char buf[4] = {0};
    CHECK(pread(out, buf, 4, 0) == 4 && !memcmp(buf, "head", 4), "data at 0");
    CHECK(pread(out, buf, 3, at) == 3 && !memcmp(buf, "mid", 3), "data in the middle");
    CHECK(pread(out, buf, 1, 1 << 20) == 1 && buf[0] == 0, "a hole reads zero");
    CHECK(sbx_copy_sparse(-1, out) == -EBADF, "a bad fd is -EBADF");
    close(in);
    close(out);
    unlink(in_path);
    unlink(out_path);
}

static void job_run(void *data)
{
    ((int *)data)[0]++;
}

static void job_done(void *data, bool ran)
{
    int *v = data;
    v[1] += ran && v[0] == 1;
}

/* No pool: the job runs, then its done, before jobs_submit returns. */
static void test_jobs_without_pool(void)
{
    int v[2] = {0, 0};
    jobs_submit(NULL, job_run, job_done, v);
    CHECK(v[0] == 1 && v[1] == 1, "run once, then done with ran, in the call");
}

int main(void)
{
    test_park();
    test_copy_sparse();
    test_jobs_without_pool();
    return CHECK_DONE();
}
