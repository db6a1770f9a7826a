/* case_load: HDF5 or torch.save, by signature (case_load.h). */
#include "case_load.h"

#include <stdio.h>
#include <string.h>

#include "case_io.h"

int case_load_is_torch(const char *path)
{
    if (!path)
        return 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    unsigned char sig[4] = {0};
    size_t n = fread(sig, 1, sizeof sig, fp);
    fclose(fp);
    /* A local file header, or the end-of-central-directory record of an
     * empty archive. */
    return n == 4 && sig[0] == 'P' && sig[1] == 'K' &&
           ((sig[2] == 3 && sig[3] == 4) || (sig[2] == 5 && sig[3] == 6));
}

int case_load(const char *path, case_t *c, const case_load_options_t *o, kr_error_t *err)
{
    if (c)
        memset(c, 0, sizeof *c);
    if (path && case_load_is_torch(path))
        return pt_import_case(path, c, o, err);
    /* Everything else, unreadable files included, gets case_read's messages. */
    return case_read(path, c, err);
}
