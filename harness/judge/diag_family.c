#include "diag_family.h"

#include <string.h>

const char *diag_family(const diag_result_t *r)
{
    if (!r->matched)
        return "none";
    switch (r->hypothesis) {
    case DIAG_SCALE_POW2:
    case DIAG_SCALE_CONST:
        return "magnitude";
    case DIAG_ROWS:
        /* Isolated elements are reported under the rows' hypothesis; they
         * are another kind of place (a lost update, not a row's fault). */
        return strstr(r->line, "isolated elements") ? "place:elements" : "place:rows";
    case DIAG_COLUMNS:
        return "place:columns";
    case DIAG_TILES:
        /* diagnose() itself tells a transposed tile set from a bare place
         * by this word (it explains every element); the token follows it. */
        return strstr(r->line, "transposed") ? "tiles_transposed" : "place:tiles";
    case DIAG_K_BLOCKS:
        return "k_blocks";
    case DIAG_WPERM_UNDONE:
    case DIAG_WPERM_APPLIED:
        return "wperm";
    case DIAG_SCALE_LAYOUT:
        return "scale_layout";
    case DIAG_MISREAD:
        return "misread";
    case DIAG_ACC_PRECISION:
        return "acc_precision";
    case DIAG_GRAMMAR:
        /* a composition of the grammar's primitives, checked bit for bit */
        return "grammar";
    case DIAG_ROWS_POISONED:
        return "poison";
    case DIAG_REF_ROWS_POISONED:
        return "poison_masked";
    case DIAG_SANITIZED:
    case DIAG_UNSANITIZED:
        return "sanitize";
    case DIAG_QUANT_VARIANT:
        return "quant_variant";
    case DIAG_NONE:
    case DIAG_CLEAN:
    case DIAG_COUNT:
        break;
    }
    return "none";
}
