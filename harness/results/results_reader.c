/* results_reader: results files read in a separate process
 * (results_reader.h), and results_store_read / results_store_read_meta,
 * the reads every caller of results_store.h makes through it. */
#include "results_reader.h"

#include <errno.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate_reader.h"
#include "kr_string.h"
#include "result_fields.h"

#define ANSWER_MAGIC 0x315352524b52ull   /* "RKRRS1" */

/* A request: what to read, then the path and its NUL. */
typedef struct {
    int want_key;
    int count_only;
} request_head_t;

/* The answer file: this head, then n_rows result_t records. */
typedef struct {
    uint64_t magic;
    uint64_t row_bytes;         /* sizeof(result_t) of the writer: the same binary */
    int64_t n_rows;
    int64_t counted;            /* count_only: /rows' length */
    results_meta_t meta;
    char case_key[4096];
} answer_head_t;

/* Room for what libhdf5 may need over the reader's own size: the whole
 * table in its staging records and strings, many times the file. */
#define READ_MEMORY_BASE ((uint64_t)1 << 30)
#define READ_MEMORY_PER_FILE_BYTE 16

/* n bytes at offset `at` of fd, read into p (or, writing, written from
 * it): 0, or -1 (errno set). */
static int transfer(int fd, void *p, size_t n, off_t at, int writing)
{
    size_t done = 0;
    while (done < n) {
        char *c = (char *)p + done;
        const ssize_t k = writing ? pwrite(fd, c, n - done, at + (off_t)done)
                                  : pread(fd, c, n - done, at + (off_t)done);
        if (k > 0)
            done += (size_t)k;
        else if (k == 0 || errno != EINTR)
            return -1;
    }
    return 0;
}

/* In the worker: reads the file and writes the answer. */
static int serve_read(void *ctx, const void *request, size_t request_bytes, kr_error_t *err)
{
    const isolate_reader_t *r = ctx;
    request_head_t req;
    const char *path = (const char *)request + sizeof req;
    if (request_bytes <= sizeof req || memchr(path, '\0', request_bytes - sizeof req) == NULL)
        return kr_fail(err, "results reader: a malformed request of %zu bytes", request_bytes);
    memcpy(&req, request, sizeof req);
    struct stat sb;
    const uint64_t file_bytes = stat(path, &sb) == 0 && sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    isolate_reader_bound_memory(r, READ_MEMORY_BASE + READ_MEMORY_PER_FILE_BYTE * file_bytes);

    answer_head_t *h = calloc(1, sizeof *h);
    if (!h)
        return kr_fail(err, "%s: out of memory", path);
    result_list_t rows = {0};
    int st = results_read_direct(path, req.count_only ? NULL : &rows, &h->meta,
                                 req.want_key ? h->case_key : NULL, sizeof h->case_key,
                                 req.count_only ? &h->counted : NULL, err);
    if (st == 0) {
        h->magic = ANSWER_MAGIC;
        h->row_bytes = sizeof(result_t);
        h->n_rows = rows.count;
        if (ftruncate(r->out_fd, 0) != 0 || transfer(r->out_fd, h, sizeof *h, 0, 1) ||
            (rows.count > 0 &&
             transfer(r->out_fd, rows.rows, (size_t)rows.count * sizeof(result_t), sizeof *h, 1)))
            st = kr_fail(err, "%s: results reader: cannot hand the rows back: %s", path,
                         strerror(errno));
    }
    result_list_free(&rows);
    free(h);
    return st;
}

static isolate_reader_t g_reader = ISOLATE_READER_INIT(serve_read, "kreplay-results-reader");

static void reader_shutdown(void)
{
    isolate_reader_shutdown(&g_reader);
}

static pthread_once_t reader_once = PTHREAD_ONCE_INIT;

static void reader_first_use(void)
{
    (void)atexit(reader_shutdown);
    /* libhdf5 ready before the first fork, so no worker initializes it. */
    (void)H5open();
}

/* Rows from another process: every string terminated, every verdict one
 * this binary knows.  0, or -1 naming the first bad row. */
static int check_rows(const char *path, result_t *rows, int64_t n, kr_error_t *err)
{
    for (int64_t i = 0; i < n; i++) {
        for (int f = 0; f < result_field_count; f++) {
            const result_field_t *fd = &result_fields[f];
            char *at = (char *)&rows[i] + fd->offset;
            if (fd->type == RF_STR) {
                at[fd->size - 1] = '\0';
            } else if (fd->type == RF_VERDICT) {
                verdict_t v;
                memcpy(&v, at, sizeof v);
                if ((int)v < 0 || (int)v >= VERDICT_COUNT)
                    return kr_fail(err, "%s: row %lld came back from the reading process with "
                                        "verdict %d; expected one of %d verdicts", path,
                                   (long long)i, (int)v, (int)VERDICT_COUNT);
            }
        }
    }
    return 0;
}

/* The answer's rows into rows (empty on failure). */
static int take_rows(const char *path, const answer_head_t *h, result_list_t *rows,
                     kr_error_t *err)
{
    rows->rows = malloc((size_t)h->n_rows * sizeof(result_t));
    if (!rows->rows)
        return kr_fail(err, "%s: out of memory for %lld rows; expected to fit in memory", path,
                       (long long)h->n_rows);
    rows->count = rows->cap = h->n_rows;
    int st = 0;
    if (transfer(g_reader.out_fd, rows->rows, (size_t)h->n_rows * sizeof(result_t),
                 (off_t)sizeof *h, 0))
        st = kr_fail(err, "%s: the rows came back from the reading process unreadable; "
                          "expected %lld rows", path, (long long)h->n_rows);
    else
        st = check_rows(path, rows->rows, rows->count, err);
    if (st)
        result_list_free(rows);
    return st;
}

/* The answer file into rows / meta / case_key; -1 when it is not a
 * well-formed answer. */
static int take_answer(const char *path, result_list_t *rows, results_meta_t *meta,
                       char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err)
{
    struct stat sb;
    answer_head_t *h = calloc(1, sizeof *h);
    if (!h)
        return kr_fail(err, "%s: out of memory", path);
    int st = -1;
    const uint64_t size = fstat(g_reader.out_fd, &sb) == 0 && sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    if (size < sizeof *h || transfer(g_reader.out_fd, h, sizeof *h, 0, 0) || h->magic != ANSWER_MAGIC ||
        h->row_bytes != sizeof(result_t) || h->n_rows < 0 ||
        (uint64_t)h->n_rows > (size - sizeof *h) / sizeof(result_t) ||
        size != sizeof *h + (uint64_t)h->n_rows * sizeof(result_t)) {
        kr_fail(err, "%s: the rows came back from the reading process damaged (%llu bytes); "
                     "expected a complete answer", path, (unsigned long long)size);
        goto done;
    }
    if (rows && h->n_rows > 0 && take_rows(path, h, rows, err))
        goto done;
    results_meta_terminate(&h->meta);
    if (meta)
        *meta = h->meta;
    if (case_key) {
        h->case_key[sizeof h->case_key - 1] = '\0';
        kr_strlcpy(case_key, h->case_key, key_cap);
    }
    if (count_only)
        *count_only = h->counted;
    st = 0;
done:
    free(h);
    return st;
}

static int read_locked(const char *path, result_list_t *rows, results_meta_t *meta,
                       char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err)
{
    const size_t path_bytes = strlen(path) + 1;
    if (path_bytes > ISOLATE_WORKER_REQUEST_MAX - sizeof(request_head_t))
        return kr_fail(err, "%.200s...: results file: a path of %zu bytes; expected a shorter path",
                       path, path_bytes - 1);
    char *request = malloc(sizeof(request_head_t) + path_bytes);
    if (!request)
        return kr_fail(err, "%s: out of memory", path);
    const request_head_t head = {.want_key = case_key != NULL, .count_only = count_only != NULL};
    memcpy(request, &head, sizeof head);
    memcpy(request + sizeof head, path, path_bytes);
    isolate_result_t ir;
    int st = isolate_reader_call(&g_reader, request, sizeof head + path_bytes,
                                 isolate_reader_timeout(0), &ir, err);
    free(request);
    if (st != 0)
        return -1;
    if (ir.status == ISOLATE_OK)
        st = take_answer(path, rows, meta, case_key, key_cap, count_only, err);
    else
        st = isolate_reader_failure(&g_reader, &ir, path, "a readable results file", NULL, err);
    /* The rows' bytes are not kept between reads. */
    if (ftruncate(g_reader.out_fd, 0) != 0 && st == 0) {
        if (rows)
            result_list_free(rows);
        st = kr_fail(err, "%s: emptying the results reader's file: %s", path, strerror(errno));
    }
    return st;
}

int results_read_isolated(const char *path, result_list_t *rows, results_meta_t *meta,
                          char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err)
{
    /* Without a path or a place for the rows, the direct reader says so. */
    if (!path || (!rows && !count_only) || isolate_reader_in_process())
        return results_read_direct(path, rows, meta, case_key, key_cap, count_only, err);
    if (rows)
        *rows = (result_list_t){0};
    if (meta)
        memset(meta, 0, sizeof *meta);
    pthread_once(&reader_once, reader_first_use);
    if (isolate_reader_lock(&g_reader, err))
        return -1;
    kr_error_t local = {{0}};
    const int st = read_locked(path, rows, meta, case_key, key_cap, count_only,
                               err ? err : &local);
    isolate_reader_unlock(&g_reader);
    return st;
}

int results_store_read(const char *path, result_list_t *rows, results_meta_t *meta,
                       kr_error_t *err)
{
    return results_read_isolated(path, rows, meta, NULL, 0, NULL, err);
}

int results_store_read_meta(const char *path, results_meta_t *meta, int64_t *n_rows,
                            kr_error_t *err)
{
    int64_t n = 0;
    const int rc = results_read_isolated(path, NULL, meta, NULL, 0, &n, err);
    if (n_rows)
        *n_rows = rc == 0 ? n : 0;
    return rc;
}
