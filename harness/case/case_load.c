/* case_load: HDF5 or torch.save, by signature (case_load.h). */
#include "case_load.h"

#include <errno.h>
#include <hdf5.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_image.h"
#include "case_io.h"
#include "file_kind.h"
#include "isolate_reader.h"
#include "pt_records.h"
#include "kr_string.h"

int case_load_is_torch(const char *path)
{
    if (!path)
        return 0;
    /* Never an open that blocks (a FIFO): the readers say what it is. */
    FILE *fp = file_fopen_regular(path, "a case file", NULL);
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

/* case_load for the reading process, whose case travels on as an image:
 * a bf16 x stays in the file for the image's reader to decode. */
static int case_load_for_image(const char *path, case_t *c, const case_load_options_t *o,
                               kr_error_t *err)
{
    memset(c, 0, sizeof *c);
    if (case_load_is_torch(path))
        return pt_import_case(path, c, o, err);
    return case_read_for_image(path, c, err);
}

/* ---- case_load_safe: the reader process ----
 *
 * One worker process (isolate_worker_t) reads cases for the whole run: a
 * fork per case would cost more than the read, in page-table copies and the
 * copy-on-write faults both processes take after it.  A case comes back as
 * an image in one anonymous memory file shared by the two processes; the
 * parent reads it into the case's own buffers and empties the file. */

/* A request: the options, then the path and its NUL. */
typedef struct {
    int has_options;
    case_load_options_t options;
} load_request_head_t;

/* Cases this large are given back to the system by the worker once sent,
 * rather than kept in its heap for the next read. */
#define WORKER_TRIM_BYTES ((size_t)32 << 20)

/* An image up to this size stays in the image file after it is read, its
 * pages reused by the next one: taking and returning them costs as much as
 * the copies.  A larger one is discarded as it is read and the file
 * emptied, so the case and its image never both exist in full. */
#define IMAGE_KEEP_BYTES ((off_t)8 << 20)

/* In the worker: reads the case (libhdf5 or libzip on an untrusted file)
 * and writes it as an image, freeing each array once written so the case
 * and its image exist in full only one array deep.  ctx: the reader, whose
 * out_fd is the image file. */
static int serve_load(void *ctx, const void *request, size_t request_bytes, kr_error_t *err)
{
    const int image_fd = ((const isolate_reader_t *)ctx)->out_fd;
    load_request_head_t head;
    const char *path = (const char *)request + sizeof head;
    if (request_bytes <= sizeof head || memchr(path, '\0', request_bytes - sizeof head) == NULL)
        return kr_fail(err, "case reader: a malformed request of %zu bytes", request_bytes);
    memcpy(&head, request, sizeof head);
    case_t c;
    if (case_load_for_image(path, &c, head.has_options ? &head.options : NULL, err))
        return -1;
    const int st = case_image_write(image_fd, &c, CASE_IMAGE_CONSUME_SOURCE, err);
#ifdef __GLIBC__
    struct stat sb;
    if (st == 0 && fstat(image_fd, &sb) == 0 && (size_t)sb.st_size >= WORKER_TRIM_BYTES)
        malloc_trim(0);
#endif
    return st;
}

static isolate_reader_t g_reader = ISOLATE_READER_INIT(serve_load, "kreplay-case-reader");

/* At exit the worker is ended and reaped rather than left to die with us:
 * so its resource use is counted with ours (time -v's peak RSS, say) and
 * no process outlives the run even briefly. */
static void reader_shutdown(void)
{
    isolate_reader_shutdown(&g_reader);
}

static pthread_once_t reader_shutdown_once = PTHREAD_ONCE_INIT;

static void reader_register_shutdown(void)
{
    (void)atexit(reader_shutdown);
    /* Initialize libhdf5 here, where no file is touched, so every worker
     * starts with it ready. */
    (void)H5open();
}

static int load_safe_locked(const char *path, case_t *c, const case_load_options_t *o,
                            double timeout_s, kr_error_t *err)
{
    const size_t path_bytes = strlen(path) + 1;
    if (path_bytes > ISOLATE_WORKER_REQUEST_MAX - sizeof(load_request_head_t))
        return kr_fail(err, "%.200s...: case file: a path of %zu bytes; expected a shorter path",
                       path, path_bytes - 1);
    load_request_head_t head;
    memset(&head, 0, sizeof head);
    head.has_options = o != NULL;
    if (o)
        head.options = *o;
    char *request = malloc(sizeof head + path_bytes);
    if (!request)
        return kr_fail(err, "%s: out of memory", path);
    memcpy(request, &head, sizeof head);
    memcpy(request + sizeof head, path, path_bytes);

    isolate_result_t ir;
    int keep_image = 0;
    int st = isolate_reader_call(&g_reader, request, sizeof head + path_bytes, timeout_s, &ir, err);
    free(request);
    if (st == 0) {
        switch (ir.status) {
        case ISOLATE_OK: {
            /* The image is read as untrusted bytes too: checked against M, N,
             * K and its own size before anything is allocated, then
             * validated. */
            kr_error_t rerr = {{0}};
            struct stat sb;
            keep_image = fstat(g_reader.out_fd, &sb) == 0 && sb.st_size <= IMAGE_KEEP_BYTES;
            st = case_image_read(g_reader.out_fd, c,
                                 keep_image ? CASE_IMAGE_KEEP_SOURCE : CASE_IMAGE_CONSUME_SOURCE,
                                 path, path, &rerr);
            if (st) {
                /* Not a worker to trust with the next file either. */
                isolate_reader_retire(&g_reader);
                kr_fail(err, "%s: the case came back from the reading process damaged: %s", path,
                        rerr.msg);
            } else {
                free(c->path);
                c->path = strdup(path);
                if (!c->path) {
                    case_free(c);
                    st = kr_fail(err, "%s: out of memory", path);
                }
            }
            break;
        }
        default: {
            char note[512] = "";
            if (ir.status == ISOLATE_TIMEOUT && case_load_is_torch(path))
                pt_records_timeout_note(path, note, sizeof note);
            st = isolate_reader_failure(&g_reader, &ir, path, "a readable case file", note, err);
            break;
        }
        }
    }
    /* Whatever is left of a large image (or of one a failed read left). */
    if ((!keep_image || st != 0) && ftruncate(g_reader.out_fd, 0) != 0 && st == 0) {
        case_free(c);
        st = kr_fail(err, "%s: emptying the case image: %s", path, strerror(errno));
    }
    return st;
}

int case_load_safe(const char *path, case_t *c, const case_load_options_t *o, double timeout_s,
                   kr_error_t *err)
{
    if (c)
        memset(c, 0, sizeof *c);
    if (isolate_reader_in_process())
        return case_load(path, c, o, err);
    /* No path, no file: case_read says so without touching libhdf5. */
    if (!path)
        return case_load(path, c, o, err);
    /* What is not a regular file (a FIFO would block the reader until its
     * time limit) is refused here, by name and kind. */
    if (file_check_regular(path, "an existing HDF5 case file or torch.save .pt", err))
        return -1;
    timeout_s = isolate_reader_timeout(timeout_s);
    pthread_once(&reader_shutdown_once, reader_register_shutdown);
    if (isolate_reader_lock(&g_reader, err))
        return -1;
    int st = load_safe_locked(path, c, o, timeout_s, err);
    isolate_reader_unlock(&g_reader);
    return st;
}
