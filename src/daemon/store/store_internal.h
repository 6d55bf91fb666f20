/* Shared by the store's parts; not for anything outside src/daemon/store/. */
#ifndef SBX_STORE_INTERNAL_H
#define SBX_STORE_INTERNAL_H

#include "db.h"
#include "store.h"

struct store {
    struct db *conn; /* the store: SQLite or PostgreSQL (db.h) */
    /* The node this process runs as (store_claim_node): new sandboxes' rows carry it. */
    char node_id[STORE_NODE_ID_MAX + 1];
};

#endif
