/* sbx templates as Docker images (docs/runtime.md "Docker"): a built template's root
 * filesystem imported into the engine, so the docker backend runs the same userland as
 * the others. Blocks for the whole transfer: call it on a worker thread. */
#ifndef SBX_RUNTIME_DOCKER_IMAGE_H
#define SBX_RUNTIME_DOCKER_IMAGE_H

#include <jansson.h>
#include <stdbool.h>

#include "../common/err.h"
#include "docker_api.h"

/* The image name a template gets: "sbx-<template>" (tag latest), the docker backend's
 * default image for a sandbox of that template. */
#define DOCKER_IMAGE_PREFIX "sbx-"
/* How long an import may take (a 1.3 GB tree takes about 30 s on a loaded host). */
#define DOCKER_IMPORT_TIMEOUT_MS (30L * 60 * 1000)

/* Stream rootfs as a tar (libarchive) into the engine e (POST /images/create
 * ?fromSrc=-) as <image>:latest. *id is the engine's image id. */
int docker_image_import(const struct docker_engine *e, const char *rootfs, const char *image, char **id,
                        struct sbx_err *err);

/* The engine's version and whether it has runtime (NULL: not asked) registered, asked
 * within timeout_ms (0 or more than DOCKER_INFO_TIMEOUT_MS: that). */
#define DOCKER_INFO_TIMEOUT_MS 10000L
int docker_engine_info(const struct docker_engine *e, long timeout_ms, char **version, bool *has_runtime,
                       const char *runtime, struct sbx_err *err);

/* The engine's containers that carry label (GET /containers/json?all=1 filtered on it), as
 * the engine lists them (an array of {Id, Names, Labels, State, ...}), within timeout_ms
 * (0: DOCKER_INFO_TIMEOUT_MS). */
int docker_engine_containers(const struct docker_engine *e, long timeout_ms, const char *label,
                             json_t **out, struct sbx_err *err);

/* Remove a container (by its id, forced: running or not) and, when volume is not NULL,
 * that volume after it; within timeout_ms each (0: DOCKER_INFO_TIMEOUT_MS). 404s count as
 * done. */
int docker_engine_remove(const struct docker_engine *e, long timeout_ms, const char *container,
                         const char *volume, struct sbx_err *err);

#endif
