#include "result.h"

#include "array_grow.h"
#include "kr_string.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[VERDICT_COUNT] = {
    [VERDICT_PASS] = "PASS",
    [VERDICT_WRONG] = "WRONG",
    [VERDICT_MAGNITUDE] = "MAGNITUDE",
    [VERDICT_NONFINITE_OUT] = "NONFINITE_OUT",
    [VERDICT_POISONED_INPUT] = "POISONED_INPUT",
    [VERDICT_NONDETERMINISTIC] = "NONDETERMINISTIC",
    [VERDICT_MODEL_MISMATCH] = "MODEL_MISMATCH",
    [VERDICT_OOB_WRITE] = "OOB_WRITE",
    [VERDICT_CRASHED] = "CRASHED",
    [VERDICT_TIMEOUT] = "TIMEOUT",
    [VERDICT_UNSUPPORTED] = "UNSUPPORTED",
    [VERDICT_REGRESSED] = "REGRESSED",
    [VERDICT_ERROR] = "ERROR",
};

const char *verdict_name(verdict_t v)
{
    return (v >= 0 && v < VERDICT_COUNT) ? verdict_names[v] : "?";
}

int verdict_is_failure(verdict_t v)
{
    /* POISONED_INPUT is a finding about the input, not the kernel, and
     * UNSUPPORTED is a fact about the shape: neither fails a replay. */
    return !(v == VERDICT_PASS || v == VERDICT_POISONED_INPUT || v == VERDICT_UNSUPPORTED);
}

static const char *const party_names[PARTY_COUNT] = {"", "kernel", "input", "reference"};

const char *party_name(party_t p)
{
    return p >= 0 && p < PARTY_COUNT ? party_names[p] : "";
}

party_t party_from_name(const char *name)
{
    for (int p = 1; name && p < PARTY_COUNT; p++)
        if (!strcmp(name, party_names[p]))
            return (party_t)p;
    return PARTY_NONE;
}

const char *m_band_name(int64_t M)
{
    if (M <= 64)
        return "decode";
    if (M <= 255)
        return "mid";
    if (M <= 2047)
        return "prefill";
    return "tiled";
}

result_t *result_list_add(result_list_t *l)
{
    result_t *r = ARRAY_APPEND_ZEROED(l->rows, l->count, l->cap, 16);
    if (!r)
        return NULL;
    r->metrics.max_abs_index = -1;
    r->metrics.worst_row = -1;
    r->ref_f32_vs_f64 = NAN;
    r->canary_ok = -1;
    r->time_ms = NAN;
    r->tflops = NAN;
    r->gbps = NAN;
    r->regressed_base = NAN;
    r->regressed_run = NAN;
    kr_strlcpy(r->device, "cpu", sizeof r->device);
    return r;
}

void result_list_free(result_list_t *l)
{
    free(l->rows);
    memset(l, 0, sizeof *l);
}

uint64_t bf16_digest_update(uint64_t h, const uint16_t *bits, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        /* NaN compares as NaN: its sign and payload depend on operand order
         * the C code does not fix, so every NaN hashes as one value. */
        uint16_t b = ((bits[i] & 0x7F80) == 0x7F80 && (bits[i] & 0x007F)) ? 0x7FC0 : bits[i];
        h = (h ^ (uint64_t)(b & 0xFF)) * 0x100000001b3ull;
        h = (h ^ (uint64_t)(b >> 8)) * 0x100000001b3ull;
    }
    return h;
}

void bf16_digest_format(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void bf16_digest(const uint16_t *bits, int64_t n, char out[17])
{
    bf16_digest_format(bf16_digest_update(BF16_DIGEST_SEED, bits, n), out);
}
