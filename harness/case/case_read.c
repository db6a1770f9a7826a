/* case_read: schema-v1 case file -> case_t (cases/SCHEMA.md).
 *
 * Case files come from production dumps, converters and hand edits, so the
 * reader trusts nothing: every dataset's rank, dims and dtype (class, size,
 * sign) are checked against M/N/K before a byte is allocated, and every
 * failure becomes one line "<path>: <object>: <problem>; expected <what>".
 * Data is read with explicit native memory types so HDF5 converts the file's
 * byte order (a big-endian file reads the same as a little-endian one).
 *
 * This file opens the file (a regular file, HDF5, nothing pointing outside
 * it), maps it, and reads the root attributes: schema, M, N, K and the
 * provenance strings.  The datasets are case_read_datasets.c's, over
 * case_read_array.c and case_read_attr.c (case_read_internal.h). */
#include "case_io.h"
#include "case_mapping.h"
#include "case_read_internal.h"
#include "file_kind.h"
#include "h5_file.h"
#include "h5_safety.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

static int read_all(rd_t *rd, case_t *c)
{
    char *schema = NULL;
    int r = case_rd_read_str_attr(rd, rd->root, "schema", "schema", &schema);
    if (r < 0)
        return -1;
    if (r == 0)
        return fail(rd, "schema", "root attribute missing; expected schema = \"%s\"",
                    CASE_SCHEMA_V1);
    if (strcmp(schema, CASE_SCHEMA_V1) != 0) {
        fail(rd, "schema", "\"%.64s\" is not a supported schema; expected \"%s\"", schema,
             CASE_SCHEMA_V1);
        free(schema);
        return -1;
    }
    free(schema);

    if (case_rd_read_int_attr(rd, "M", &c->M) || case_rd_read_int_attr(rd, "N", &c->N) ||
        case_rd_read_int_attr(rd, "K", &c->K))
        return -1;
    /* Every product below (M*K, N*K/2, M*N) is bounded by this. */
    if (case_check_dims(c->M, c->N, c->K, rd->path, rd->err) != 0)
        return -1;

    struct { const char *name; char **dst; } prov[] = {
        {"kernel_path", &c->kernel_path}, {"layer", &c->layer}, {"model", &c->model},
        {"capture_time", &c->capture_time}, {"env_flags", &c->env_flags},
        {"route", &c->route}, {"tp_rank", &c->tp_rank}, {"versions", &c->versions},
        {"gpu_arch", &c->gpu_arch}, {"extension_path", &c->extension_path},
        {"capture_time_source", &c->capture_time_source},
    };
    for (size_t i = 0; i < sizeof prov / sizeof prov[0]; i++)
        if (case_rd_read_str_attr(rd, rd->root, prov[i].name, prov[i].name, prov[i].dst) < 0)
            return -1;
    if (c->route && strcmp(c->route, "w4a8") && strcmp(c->route, "w4a4"))
        return fail(rd, "route", "attribute is '%.40s'; expected \"w4a8\" or \"w4a4\"", c->route);

    return case_rd_read_datasets(rd, c);
}

/* Maps the file HDF5 has open for map_ds (case_read_array.c); without a
 * mapping (an empty or unmappable file) every array is copied, so a failure
 * here is no error. */
static void map_file(rd_t *rd, case_mapping_t *m)
{
    const int fd = open(rd->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    kr_error_t ignored = {{0}};
    if (case_mapping_map_fd(fd, rd->path, h5_used_bytes(rd->file), m, &ignored) == 0) {
        /* Replaced since HDF5 opened it: copy every array, from HDF5's file. */
        if (m->id.size != (uint64_t)rd->file_size) {
            case_mapping_unmap(m);
            close(fd);
            return;
        }
        rd->map = m;
    }
    close(fd);
}

static int case_maps_any_array(const case_t *c)
{
    const void *arrays[] = {c->x, c->x_bf16_in_file, c->x_fp8, c->x_scale, c->weight,
                            c->weight_scale, c->weight_ref, c->out, c->out_rerun, c->aiter,
                            c->weight_bf16, c->ref_recorded};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (case_mapping_holds(&c->mapping, arrays[i], 1))
            return 1;
    return 0;
}

static int read_case(const char *path, case_t *c, int defer_bf16_x, kr_error_t *err)
{
    if (!c)
        return kr_fail(err, "%s: case: NULL output; expected a case_t to fill",
                       path ? path : "(null)");
    memset(c, 0, sizeof *c);
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected a case file path");

    struct stat st;
    if (file_stat_regular(path, "an existing HDF5 case file", &st, err))
        return -1;

    h5_quiet_t quiet;
    h5_quiet(&quiet);

    rd_t rd = {.path = path, .file = -1, .root = -1, .file_size = (int64_t)st.st_size,
               .err = err, .defer_bf16_x = defer_bf16_x};
    case_t tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = -1;

    static const h5_expect_t expect = {
        .not_hdf5 = "an HDF5 case file (schema " CASE_SCHEMA_V1 ")",
        .unreadable = "an HDF5 case file",
        .complete = "a complete HDF5 file",
    };
    rd.file = h5_open_readonly(path, &expect, err);
    if (rd.file < 0)
        goto done;
    rd.root = H5Gopen2(rd.file, "/", H5P_DEFAULT);
    if (rd.root < 0) {
        kr_fail(err, "%s: /: cannot open the root group (corrupt file?); expected a readable "
                     "root group", path);
        goto done;
    }
    /* Before any data is read: nothing may come from outside the file.  A
     * walk that a corrupt group stops is not a refusal: open_ds checks each
     * dataset it opens, and the reader names the corruption precisely. */
    if (h5_safety_check(rd.file, path, err) < 0)
        goto done;
    map_file(&rd, &tmp.mapping);
    if (read_all(&rd, &tmp) != 0)
        goto done;
    if (!case_maps_any_array(&tmp))
        case_mapping_unmap(&tmp.mapping);
    tmp.path = strdup(path);
    if (!tmp.path) {
        kr_fail(err, "%s: file: out of memory; expected to fit in memory", path);
        goto done;
    }
    *c = tmp;
    memset(&tmp, 0, sizeof tmp);
    rc = 0;
done:
    case_free(&tmp);
    H5_CLOSE_ALL(rd.root, rd.file);
    h5_restore(&quiet);
    return rc;
}

int case_read(const char *path, case_t *c, kr_error_t *err)
{
    return read_case(path, c, 0, err);
}

int case_read_for_image(const char *path, case_t *c, kr_error_t *err)
{
    return read_case(path, c, 1, err);
}
