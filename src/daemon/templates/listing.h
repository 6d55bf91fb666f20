/* The templates this host has built that a user may start (GET /v1/templates), for the
 * routes that show them: the operator's, the user's own custom ones and the shared ones,
 * sorted by name, each as GET /v1/templates/{name} describes it. */
#ifndef SBX_TEMPLATES_LISTING_H
#define SBX_TEMPLATES_LISTING_H

#include <jansson.h>

struct sbxd;

json_t *templates_list(struct sbxd *d, const char *user);

#endif
