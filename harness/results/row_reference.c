/* row_reference: the references a row may be compared against
 * (row_reference.h). */
#include "row_reference.h"

#include <string.h>

#include "registry.h"

const char *row_reference_name(int i)
{
    static const ref_kind_t kinds[] = {REF_EXACT, REF_SOURCE};
    static const char *const fixed[] = {ROW_REF_SANITIZED, ROW_REF_RERUN, ROW_REF_INPUT, ROW_REF_NONE};
    const int n_kinds = (int)(sizeof kinds / sizeof kinds[0]);
    if (i < 0)
        return NULL;
    if (i < n_kinds)
        return ref_kind_name(kinds[i]);
    i -= n_kinds;
    return i < (int)(sizeof fixed / sizeof fixed[0]) ? fixed[i] : NULL;
}

int row_reference_known(const char *reference)
{
    for (int i = 0; row_reference_name(i); i++)
        if (!strcmp(reference, row_reference_name(i)))
            return 1;
    return !strncmp(reference, ROW_REF_MODEL_PREFIX, strlen(ROW_REF_MODEL_PREFIX));
}
