#include "spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

int sbx_spawn(pid_t *pid, char *const argv[], char *const envp[], const struct sbx_spawn_opts *o)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    short flags = 0;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, o->out >= 0 ? o->out : 0, 1);
    posix_spawn_file_actions_adddup2(&fa, o->err >= 0 ? o->err : 0, 2);
    if (o->keep_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, o->keep_fd, o->keep_fd); /* clears FD_CLOEXEC */
    if (o->in > 0)
        posix_spawn_file_actions_adddup2(&fa, o->in, 0);
    if (o->own_session)
        flags |= POSIX_SPAWN_SETSID;
    if (o->own_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&at, 0);
    }
    if (o->clean_signals) {
        flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
    }
    posix_spawnattr_setflags(&at, flags);
    int r = posix_spawn(pid, argv[0], &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return -r;
}
