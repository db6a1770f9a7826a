/* case_load: HDF5 or torch.save, by signature (case_load.h). */
#include "case_load.h"

#include <stdio.h>
#include <string.h>

#include "case_io.h"
#include "isolate.h"
#include "kr_string.h"

#include <stdlib.h>
#include <unistd.h>

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

typedef struct {
    const char *path;
    const char *tmp;
    const case_load_options_t *o;
} safe_ctx_t;

static int load_and_rewrite(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out;
    (void)out_bytes;
    safe_ctx_t *sc = ctx;
    case_t c;
    if (case_load(sc->path, &c, sc->o, err))
        return -1;
    /* The parent reads back a file kreplay wrote, named like the source. */
    int st = case_write(sc->tmp, &c, err);
    case_free(&c);
    return st;
}

int case_load_safe(const char *path, case_t *c, const case_load_options_t *o, double timeout_s,
                   kr_error_t *err)
{
    if (c)
        memset(c, 0, sizeof *c);
    const char *in_process = getenv("KREPLAY_READ_IN_PROCESS");
    if (in_process && !strcmp(in_process, "1"))
        return case_load(path, c, o, err);
    const char *tmpdir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/kreplay-case-%d.h5", tmpdir && *tmpdir ? tmpdir : "/tmp", (int)getpid());
    safe_ctx_t sc = {.path = path, .tmp = tmp, .o = o};
    isolate_result_t ir;
    char dummy[8];
    const char *env_timeout = getenv("KREPLAY_READ_TIMEOUT");
    if (timeout_s <= 0)
        timeout_s = env_timeout && atof(env_timeout) > 0 ? atof(env_timeout) : 120.0;
    if (isolate_run(load_and_rewrite, &sc, dummy, sizeof dummy, timeout_s, &ir, err)) {
        unlink(tmp);
        return -1;
    }
    int st;
    switch (ir.status) {
    case ISOLATE_OK: {
        kr_error_t rerr = {{0}};
        st = case_read(tmp, c, &rerr);
        if (st)
            kr_fail(err, "%s: re-reading it failed: %s", path, rerr.msg);
        else {
            free(c->path);
            c->path = strdup(path);
        }
        break;
    }
    case ISOLATE_FAILED:
        kr_strlcpy(err->msg, ir.message, sizeof err->msg);
        st = -1;
        break;
    case ISOLATE_CRASHED:
        st = kr_fail(err, "%s: the HDF5 library crashed reading it (%s): the file is corrupt; expected a "
                          "readable case file", path, ir.message);
        break;
    default:
        st = kr_fail(err, "%s: reading it did not finish (%s): the file is corrupt or unreadable", path,
                     ir.message);
        break;
    }
    unlink(tmp);
    return st;
}
