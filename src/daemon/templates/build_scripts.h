/* The build steps' shell scripts (build_scripts.c). */
#ifndef SBX_TEMPLATES_BUILD_SCRIPTS_H
#define SBX_TEMPLATES_BUILD_SCRIPTS_H

#include "build.h"

/* Where the build's inputs wait in the build sandbox's workspace (host-written before any
 * step of the recipe runs; the workspace is not part of the tree). */
#define INPUTS TEMPLATE_INPUTS_DIR

/* "$@": packages. Replaces the apt sources with INPUTS/sources.list when there is one. */
extern const char TEMPLATE_APT_SCRIPT[];
/* $0: the registry, "$@": packages. */
extern const char TEMPLATE_NPM_SCRIPT[];
/* Triplets: input name, octal mode, path. */
extern const char TEMPLATE_FILES_SCRIPT[];
/* $1 start command, $2 ready check (either may be ""), $3 the parent's name, $4 tries, $5
 * the template's name (each template's start command has a file of its own, since its
 * children run its start too). */
extern const char TEMPLATE_READY_SCRIPT[];
/* Cleans up; prints dpkg's list, "--npm--", the global npm packages. */
extern const char TEMPLATE_FINISH_SCRIPT[];

#endif
