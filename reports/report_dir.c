#include <errno.h>
#include <string.h>

#include "atomic_file.h"
#include "report.h"

int report_write_dir(const char *dir, const result_list_t *rows, const run_info_t *info,
                     kr_error_t *err)
{
    if (make_dirs(dir, err))
        return -1;
    char path[4096];
    atomic_file_t f;

    snprintf(path, sizeof path, "%s/results.json", dir);
    if (atomic_file_open(&f, path, err))
        return -1;
    errno = 0;
    if (report_json_write(f.fp, rows, info) != 0) {
        /* jansson reports a failed write the same way as a failed encoding. */
        int e = ferror(f.fp) ? errno : 0;
        atomic_file_abort(&f);
        if (e)
            return kr_fail(err, "%s: write failed: %s", path, strerror(e));
        return kr_fail(err, "%s: JSON encoding failed", path);
    }
    if (atomic_file_commit(&f, err))
        return -1;

    snprintf(path, sizeof path, "%s/results.csv", dir);
    if (atomic_file_open(&f, path, err))
        return -1;
    report_csv_write(f.fp, rows);
    if (atomic_file_commit(&f, err))
        return -1;

    snprintf(path, sizeof path, "%s/report.md", dir);
    if (atomic_file_open(&f, path, err))
        return -1;
    report_markdown_write(f.fp, rows, info);
    return atomic_file_commit(&f, err);
}
