/* rt_driver: a thin command-line front to the rt_* calls, for tests/e2e/test_runtime.py.
 *
 *   rt_driver [--runsc-root R] [--shim S] [--agent A] [--cgroup-parent P] [--runsc PATH]
 *             [--timeout-ms N] [--debug] [--runtime NAME] COMMAND ...
 *   start ID ROOTFS STATE_DIR WORKSPACE MEM_BYTES PIDS MILLICORES TMP_BYTES
 *   oci   ID ROOTFS STATE_DIR WORKSPACE MEM_BYTES PIDS MILLICORES TMP_BYTES   (prints config.json)
 *   alive STATE_DIR          destroy ID STATE_DIR [REMOVE_DIR]     list
 *   memlimit ID              cgmode                                connect STATE_DIR
 *
 * Prints "ok ..." and exits 0, or "error <code> <errno> <message>" and exits 1. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/runtime/oci.h"
#include "../../src/runtime/rt.h"

static int fail(const struct sbx_err *e)
{
    printf("error %s %d %s\n", e->code, e->errnum, e->msg);
    return 1;
}

static int spec_from(char **a, struct rt_spec *sp)
{
    sp->id = a[0];
    sp->rootfs = a[1];
    sp->state_dir = a[2];
    sp->workspace = a[3];
    sp->memory_bytes = strtoull(a[4], NULL, 10);
    sp->pids_max = strtoull(a[5], NULL, 10);
    sp->cpu_millicores = strtoull(a[6], NULL, 10);
    sp->tmp_bytes = strtoull(a[7], NULL, 10);
    sp->hostname = "sbx";
    return 0;
}

int main(int argc, char **argv)
{
    struct rt_config cfg = {
        .runsc_path = "runsc",
        .runsc_platform = "systrap", /* as sbxd's default, SBX_RUNSC_PLATFORM */
        .runsc_root = "/run/sbx-test/runsc",
        .shim_path = "/usr/local/bin/sbx-shim",
        .agent_path = "/usr/local/bin/sbx-agent",
        .cgroup_parent = "sbx-test",
    };
    static const struct option opts[] = {
        {"runsc-root", required_argument, NULL, 'R'}, {"shim", required_argument, NULL, 's'},
        {"agent", required_argument, NULL, 'a'},      {"cgroup-parent", required_argument, NULL, 'c'},
        {"runsc", required_argument, NULL, 'r'},      {"timeout-ms", required_argument, NULL, 't'},
        {"debug", no_argument, NULL, 'd'},            {"runtime", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    const char *runtime = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case 'R': cfg.runsc_root = optarg; break;
        case 's': cfg.shim_path = optarg; break;
        case 'a': cfg.agent_path = optarg; break;
        case 'c': cfg.cgroup_parent = optarg; break;
        case 'r': cfg.runsc_path = optarg; break;
        case 't': cfg.start_timeout_ms = (unsigned)atoi(optarg); break;
        case 'd': cfg.debug = true; break;
        case 'T': runtime = optarg; break;
        default: return 2;
        }
    }
    argc -= optind;
    argv += optind;
    if (argc < 1)
        return 2;
    const char *cmd = argv[0];
    struct sbx_err e = {0};

    if ((!strcmp(cmd, "start") || !strcmp(cmd, "oci")) && argc == 9) {
        struct rt_spec sp = {0};
        spec_from(argv + 1, &sp);
        sp.runtime = runtime;
        if (!strcmp(cmd, "oci")) {
            _cleanup_free_ char *json = NULL;
            if (oci_build_config(&cfg, &sp, &json, &e) < 0)
                return fail(&e);
            printf("%s\n", json);
            return 0;
        }
        long long t0 = sbx_now_ms();
        int ready_fd;
        if (rt_start(&cfg, &sp, &ready_fd, &e) < 0)
            return fail(&e);
        int r = rt_start_wait(&cfg, &sp, ready_fd, &e);
        close(ready_fd);
        if (r < 0)
            return fail(&e);
        printf("ok %lld\n", sbx_now_ms() - t0);
        return 0;
    }
    if (!strcmp(cmd, "alive") && argc == 2) {
        printf("ok %d\n", rt_alive(argv[1]) ? 1 : 0);
        return 0;
    }
    if (!strcmp(cmd, "destroy") && (argc == 3 || argc == 4)) {
        long long t0 = sbx_now_ms();
        if (rt_destroy(&cfg, argv[1], argv[2], argc == 4 ? argv[3] : NULL, NULL, &e) < 0)
            return fail(&e);
        printf("ok %lld\n", sbx_now_ms() - t0);
        return 0;
    }
    if (!strcmp(cmd, "list") && argc == 1) {
        char **v = NULL;
        if (rt_list(&cfg, &v, &e) < 0)
            return fail(&e);
        printf("ok");
        for (char **p = v; *p; p++)
            printf(" %s", *p);
        printf("\n");
        rt_strv_free(v);
        return 0;
    }
    if (!strcmp(cmd, "memlimit") && argc == 2) {
        uint64_t lim = 0;
        if (rt_cgroup_memory_limit(&cfg, argv[1], &lim, &e) < 0)
            return fail(&e);
        printf("ok %llu\n", (unsigned long long)lim);
        return 0;
    }
    if (!strcmp(cmd, "cgmode") && argc == 1) {
        printf("ok %s\n", rt_cgroup_mode_name(rt_cgroup_detect()));
        return 0;
    }
    if (!strcmp(cmd, "connect") && argc == 2) {
        int fd = -1;
        if (rt_connect(argv[1], &fd, &e) < 0)
            return fail(&e);
        printf("ok %d\n", fd);
        close(fd);
        return 0;
    }
    fprintf(stderr, "rt_driver: bad command\n");
    return 2;
}
