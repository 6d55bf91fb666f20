/* Preloaded into every process of the template (/etc/ld.so.preload), see recipe.conf.
 *
 * gVisor 20221219 (Debian bookworm's runsc) rejects statx(2) with AT_NO_AUTOMOUNT with EINVAL,
 * and coreutils 9.1 passes that flag on every statx: inside a sandbox `ls -l`, `ls /` and `stat`
 * all fail with "Invalid argument". AT_NO_AUTOMOUNT only matters on automount points, which a
 * sandbox has none of, so dropping it changes nothing else. Static binaries are not affected
 * (and do not need it: Python and Node do not pass the flag). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
	return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}
