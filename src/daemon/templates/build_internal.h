/* The builder's state, shared by build.c and template_delete.c only. */
#ifndef SBX_TEMPLATES_BUILD_INTERNAL_H
#define SBX_TEMPLATES_BUILD_INTERNAL_H

#include "../egress/policy.h"
#include "build.h"

struct template_build;

struct template_builds {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct manager *mgr;
    struct jobs *jobs;
    struct egress_policy egress; /* SBX_TEMPLATE_REGISTRIES */
    struct template_build *list; /* newest first; one per name */
};

/* rm -rf path on a worker thread (a failed build's tree, a deleted template's). */
void build_remove_later(struct template_builds *b, const char *path);

#endif
