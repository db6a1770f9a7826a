#include "diag_party.h"

#include <string.h>

static int is_recorded(const diag_input_t *d)
{
    return d->kernel && strncmp(d->kernel, "recorded.", 9) == 0;
}

/* Does the case say which order its weight is in, the way the WPERM
 * hypotheses read it (diagnose.c, try_wperm: the case side)? */
static int case_states_order(const diag_input_t *d, diag_hypothesis_t h)
{
    const case_t *c = d->c;
    if (!c)
        return 0;
    if (h == DIAG_WPERM_UNDONE)
        return c->weight_order == WEIGHT_ORDER_CHECKPOINT && c->env_flags &&
               strstr(c->env_flags, "RADIANCE_MXFP4_WPERM=1") != NULL;
    return h == DIAG_WPERM_APPLIED && c->weight_order == WEIGHT_ORDER_FRAGMENT;
}

static party_t party_by_hypothesis(const diag_input_t *d, const diag_result_t *r)
{
    const int own_operands =
        d->ref_name && (!strcmp(d->ref_name, "R_exact") || !strncmp(d->ref_name, "model:", 6));
    switch (r->hypothesis) {
    case DIAG_ROWS_POISONED:
        return PARTY_INPUT;
    case DIAG_REF_ROWS_POISONED:
        return own_operands ? PARTY_KERNEL : PARTY_INPUT;
    case DIAG_WPERM_UNDONE:
    case DIAG_WPERM_APPLIED:
        return is_recorded(d) || case_states_order(d, r->hypothesis) ? PARTY_INPUT : PARTY_KERNEL;
    case DIAG_SCALE_LAYOUT:
        return is_recorded(d) ? PARTY_INPUT : PARTY_KERNEL;
    case DIAG_UNSANITIZED:
    case DIAG_QUANT_VARIANT:
        return is_recorded(d) ? PARTY_REFERENCE : PARTY_KERNEL;
    default:
        return PARTY_KERNEL;
    }
}

party_t diag_party_of(const diag_input_t *d, const diag_result_t *r)
{
    if (!r->matched || r->hypothesis == DIAG_NONE || r->hypothesis == DIAG_CLEAN)
        return PARTY_NONE;
    const party_t p = party_by_hypothesis(d, r);
    /* A reference's own computation is the reference's fault. */
    return p == PARTY_KERNEL && d->kernel && strncmp(d->kernel, "recorded.ref", 12) == 0 ? PARTY_REFERENCE : p;
}
