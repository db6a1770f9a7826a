#include "scratch.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "kr_alloc.h"

/* A slot is claimed by flipping `busy` from 0 to 1; only its claimer
 * touches data and capacity until it flips it back.  The buffers stay
 * reachable from here for the life of the process. */
#define SCRATCH_SLOTS 6

typedef struct {
    atomic_int busy;
    void *data;
    size_t capacity;
} scratch_slot_t;

static scratch_slot_t slots[SCRATCH_SLOTS];

/* 64-byte aligned; large blocks on huge pages (kr_alloc.h), whose 2 MiB
 * alignment covers the 64. */
static void *aligned_block(size_t bytes)
{
    const size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded >= REF_ALLOC_ARRAY_HUGE_BYTES)
        return kr_alloc_array(rounded);
    return aligned_alloc(64, rounded);
}

void *scratch_get(scratch_t *s, size_t bytes)
{
    s->data = NULL;
    s->slot = -1;
    if (bytes == 0)
        bytes = 1;
    if (bytes <= SCRATCH_MAX_CACHED) {
        /* A free slot big enough, else the first free one, grown. */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < SCRATCH_SLOTS; i++) {
                scratch_slot_t *slot = &slots[i];
                int expected = 0;
                if (!atomic_compare_exchange_strong(&slot->busy, &expected, 1))
                    continue;
                if (slot->capacity < bytes) {
                    if (pass == 0) {
                        atomic_store(&slot->busy, 0);
                        continue;
                    }
                    free(slot->data);
                    slot->data = aligned_block(bytes);
                    slot->capacity = slot->data ? bytes : 0;
                }
                if (slot->data) {
                    s->data = slot->data;
                    s->slot = i;
                    return s->data;
                }
                atomic_store(&slot->busy, 0);
                pass = 2;       /* out of memory: fall through to a plain malloc */
                break;
            }
    }
    s->data = aligned_block(bytes);
    return s->data;
}

void scratch_put(scratch_t *s)
{
    if (s->slot >= 0)
        atomic_store(&slots[s->slot].busy, 0);
    else
        free(s->data);
    s->data = NULL;
    s->slot = -1;
}
