/* A byte ring that keeps the last `max` bytes written to it, addressed by
 * absolute offsets (bytes ever written), so a reader can tell what it missed.
 * Memory grows with use up to max. */
#ifndef SBX_AGENT_RING_H
#define SBX_AGENT_RING_H

#include <stddef.h>
#include <stdint.h>

struct ring {
    uint8_t *buf;
    size_t cap, max;
    size_t head; /* index of the oldest byte kept */
    size_t len;
    uint64_t total; /* bytes ever written */
};

void ring_init(struct ring *r, size_t max);
void ring_free(struct ring *r);
void ring_write(struct ring *r, const void *p, size_t n);
/* Offset of the oldest byte still kept. */
uint64_t ring_start(const struct ring *r);
/* The contiguous bytes from off (ring_start <= off <= total), at most max of them. */
size_t ring_peek(const struct ring *r, uint64_t off, const uint8_t **p, size_t max);

#endif
