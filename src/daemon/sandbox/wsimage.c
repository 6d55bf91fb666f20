#include "wsimage.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <spawn.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/util.h"

/* Other processes (other daemons, losetup) race us for free loop devices. */
#define WSIMAGE_LOOP_TRIES 16

extern char **environ;

static int run_mkfs(const char *path, struct sbx_err *err)
{
    /* lazy_itable_init + the noinit_itable mount option: nothing but metadata is ever
     * written up front, so the image stays sparse. No reserved blocks: the quota is
     * the user's. */
    char *argv[] = {"mkfs.ext4",
                    "-q",
                    "-F",
                    "-m",
                    "0",
                    "-E",
                    "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                    (char *)path,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int r = posix_spawnp(&pid, "mkfs.ext4", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return sbx_err_sys(err, r, "running mkfs.ext4 (e2fsprogs)");
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return sbx_err_sys(err, errno, "waiting for mkfs.ext4");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return sbx_err_set(err, EIO, "internal", "mkfs.ext4 %s failed (status %d)", path, status);
    return 0;
}

int wsimage_prepare(const char *data_dir, long long mb, char **template_out, struct sbx_err *err)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/workspace-%lldm.ext4", data_dir, mb);
    if (access(path, F_OK) == 0) {
        *template_out = TAKE_PTR(path);
        return 0;
    }
    _cleanup_free_ char *tmp = sbx_xasprintf("%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_err_sys(err, errno, "creating %s", tmp);
    int r = ftruncate(fd, (off_t)mb << 20) < 0 ? -errno : 0;
    close(fd);
    if (r < 0) {
        unlink(tmp);
        return sbx_err_sys(err, -r, "sizing %s", tmp);
    }
    if ((r = run_mkfs(tmp, err)) < 0 || (rename(tmp, path) < 0 && (r = -errno) < 0)) {
        if (r != -EIO && err && !err->msg[0])
            sbx_err_sys(err, -r, "installing %s", path);
        unlink(tmp);
        return r;
    }
    *template_out = TAKE_PTR(path);
    return 0;
}

static int attach_loop(int image_fd, int *loop_fd, char dev[32], struct sbx_err *err)
{
    _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return sbx_err_sys(err, errno, "opening /dev/loop-control");
    for (int i = 0; i < WSIMAGE_LOOP_TRIES; i++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            return sbx_err_sys(err, errno, "finding a free loop device");
        snprintf(dev, 32, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* Auto-clear: the device goes away by itself once the filesystem is unmounted. */
        struct loop_config cfg = {.fd = (unsigned)image_fd,
                                  .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
            *loop_fd = fd;
            return 0;
        }
        int e = errno;
        close(fd);
        if (e != EBUSY)
            return sbx_err_sys(err, e, "attaching %s", dev);
    }
    return sbx_err_set(err, EBUSY, "internal", "no free loop device after %d tries",
                       WSIMAGE_LOOP_TRIES);
}

static int attach_mount(int image_fd, const char *mountpoint, struct sbx_err *err)
{
    _cleanup_close_ int loop = -1;
    char dev[32];
    int r = attach_loop(image_fd, &loop, dev, err);
    if (r < 0)
        return r;
    if (mount(dev, mountpoint, "ext4", MS_NOSUID | MS_NODEV, "noinit_itable") < 0)
        return sbx_err_sys(err, errno, "mounting %s on %s", dev, mountpoint);
    return 0;
}

int wsimage_mount(const char *template_path, const char *image, const char *mountpoint,
                  struct sbx_err *err)
{
    _cleanup_close_ int in = open(template_path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return sbx_err_sys(err, errno, "opening %s", template_path);
    _cleanup_close_ int out = open(image, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        return sbx_err_sys(err, errno, "creating %s", image);
    int r = sbx_copy_sparse(in, out);
    if (r < 0)
        return sbx_err_sys(err, -r, "cloning %s", template_path);
    if ((r = attach_mount(out, mountpoint, err)) < 0)
        return r;
    /* mkfs's lost+found would show up in every listing; the workspace starts empty. */
    _cleanup_free_ char *lf = sbx_xasprintf("%s/lost+found", mountpoint);
    (void)rmdir(lf);
    return 0;
}

int wsimage_attach(const char *image, const char *mountpoint, struct sbx_err *err)
{
    _cleanup_close_ int fd = open(image, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return sbx_err_sys(err, errno, "opening %s", image);
    return attach_mount(fd, mountpoint, err);
}

int wsimage_copy_tree(const char *from, const char *to, struct sbx_err *err)
{
    _cleanup_free_ char *src = sbx_xasprintf("%s/.", from);
    char *argv[] = {"cp", "-a", "--reflink=auto", src, (char *)to, NULL};
    pid_t pid;
    int r = posix_spawnp(&pid, "cp", NULL, NULL, argv, environ);
    if (r != 0)
        return sbx_err_sys(err, r, "copying a workspace");
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return sbx_err_sys(err, errno, "copying a workspace");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return sbx_err_set(err, EIO, "internal", "copying a workspace failed (status %d)", st);
    return 0;
}

int wsimage_freeze(const char *mountpoint)
{
    int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (ioctl(fd, FIFREEZE, 0) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

void wsimage_thaw(int fd)
{
    if (fd < 0)
        return;
    (void)ioctl(fd, FITHAW, 0); /* nothing to do if it fails: it was not frozen */
    close(fd);
}

int wsimage_thaw_left(const char *mountpoint)
{
    int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = ioctl(fd, FITHAW, 0) == 0 ? 1 : errno == EINVAL ? 0 : -errno;
    close(fd);
    return r;
}
