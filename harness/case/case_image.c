/* case_image: a case_t as a flat binary image in a file descriptor
 * (case_image.h). */
/* memfd_create and fallocate's FALLOC_FL_* are Linux extensions. */
#define _GNU_SOURCE

#include "case_image.h"
#include "anon_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_io.h"
#include "kr_alloc.h"

/* ------------------------------------------------------------ the fields */

/* Every field of case_t that owns memory, in case.h's order.  The scalars
 * (M, N, K, weight_ref_len and the enums) live in the header. */
typedef enum {
    F_PATH,
    F_X,
    F_X_FP8,
    F_X_SCALE,
    F_WEIGHT,
    F_WEIGHT_SCALE,
    F_WEIGHT_REF,
    F_OUT,
    F_OUT_RERUN,
    F_AITER,
    F_KERNEL_PATH,
    F_LAYER,
    F_MODEL,
    F_CAPTURE_TIME,
    F_ENV_FLAGS,
    F_WEIGHT_BF16,
    F_REF_RECORDED,
    F_ROUTE,
    F_TP_RANK,
    F_VERSIONS,
    F_GPU_ARCH,
    F_EXTENSION_PATH,
    F_CAPTURE_TIME_SOURCE,
    F_COUNT
} field_t;

/* How many elements an array holds, from the case's dimensions. */
typedef enum {
    COUNT_STRING,       /* not an array: a NUL-free string of any length */
    COUNT_M,
    COUNT_MK,
    COUNT_MN,
    COUNT_NK,
    COUNT_NK_HALF,      /* packed e2m1: two per byte */
    COUNT_NK_BLOCKS,    /* one e8m0 scale per 32-block */
    COUNT_WEIGHT_REF,   /* weight_ref_len */
} count_rule_t;

typedef struct {
    const char *name;       /* the dataset's name in cases/SCHEMA.md, for messages */
    count_rule_t count;
    size_t elem_bytes;
} field_desc_t;

static const field_desc_t FIELDS[F_COUNT] = {
    [F_PATH] = {"path", COUNT_STRING, 1},
    [F_X] = {"x", COUNT_MK, sizeof(float)},
    [F_X_FP8] = {"x_fp8", COUNT_MK, sizeof(uint8_t)},
    [F_X_SCALE] = {"x_scale", COUNT_M, sizeof(float)},
    [F_WEIGHT] = {"weight", COUNT_NK_HALF, sizeof(uint8_t)},
    [F_WEIGHT_SCALE] = {"weight_scale", COUNT_NK_BLOCKS, sizeof(uint8_t)},
    [F_WEIGHT_REF] = {"weight_ref", COUNT_WEIGHT_REF, sizeof(uint8_t)},
    [F_OUT] = {"out", COUNT_MN, sizeof(uint16_t)},
    [F_OUT_RERUN] = {"out_rerun", COUNT_MN, sizeof(uint16_t)},
    [F_AITER] = {"aiter", COUNT_MN, sizeof(uint16_t)},
    [F_KERNEL_PATH] = {"kernel_path", COUNT_STRING, 1},
    [F_LAYER] = {"layer", COUNT_STRING, 1},
    [F_MODEL] = {"model", COUNT_STRING, 1},
    [F_CAPTURE_TIME] = {"capture_time", COUNT_STRING, 1},
    [F_ENV_FLAGS] = {"env_flags", COUNT_STRING, 1},
    [F_WEIGHT_BF16] = {"weight_bf16", COUNT_NK, sizeof(uint16_t)},
    [F_REF_RECORDED] = {"ref_recorded", COUNT_MN, sizeof(float)},
    [F_ROUTE] = {"route", COUNT_STRING, 1},
    [F_TP_RANK] = {"tp_rank", COUNT_STRING, 1},
    [F_VERSIONS] = {"versions", COUNT_STRING, 1},
    [F_GPU_ARCH] = {"gpu_arch", COUNT_STRING, 1},
    [F_EXTENSION_PATH] = {"extension_path", COUNT_STRING, 1},
    [F_CAPTURE_TIME_SOURCE] = {"capture_time_source", COUNT_STRING, 1},
};

/* The field's data pointer.  A switch, not an offset table, so each field
 * is read and written through its own type. */
static void *field_get(const case_t *c, field_t f)
{
    switch (f) {
    case F_PATH: return c->path;
    case F_X: return c->x;
    case F_X_FP8: return c->x_fp8;
    case F_X_SCALE: return c->x_scale;
    case F_WEIGHT: return c->weight;
    case F_WEIGHT_SCALE: return c->weight_scale;
    case F_WEIGHT_REF: return c->weight_ref;
    case F_OUT: return c->out;
    case F_OUT_RERUN: return c->out_rerun;
    case F_AITER: return c->aiter;
    case F_KERNEL_PATH: return c->kernel_path;
    case F_LAYER: return c->layer;
    case F_MODEL: return c->model;
    case F_CAPTURE_TIME: return c->capture_time;
    case F_ENV_FLAGS: return c->env_flags;
    case F_WEIGHT_BF16: return c->weight_bf16;
    case F_REF_RECORDED: return c->ref_recorded;
    case F_ROUTE: return c->route;
    case F_TP_RANK: return c->tp_rank;
    case F_VERSIONS: return c->versions;
    case F_GPU_ARCH: return c->gpu_arch;
    case F_EXTENSION_PATH: return c->extension_path;
    case F_CAPTURE_TIME_SOURCE: return c->capture_time_source;
    case F_COUNT: break;
    }
    return NULL;
}

static void field_set(case_t *c, field_t f, void *p)
{
    switch (f) {
    case F_PATH: c->path = p; break;
    case F_X: c->x = p; break;
    case F_X_FP8: c->x_fp8 = p; break;
    case F_X_SCALE: c->x_scale = p; break;
    case F_WEIGHT: c->weight = p; break;
    case F_WEIGHT_SCALE: c->weight_scale = p; break;
    case F_WEIGHT_REF: c->weight_ref = p; break;
    case F_OUT: c->out = p; break;
    case F_OUT_RERUN: c->out_rerun = p; break;
    case F_AITER: c->aiter = p; break;
    case F_KERNEL_PATH: c->kernel_path = p; break;
    case F_LAYER: c->layer = p; break;
    case F_MODEL: c->model = p; break;
    case F_CAPTURE_TIME: c->capture_time = p; break;
    case F_ENV_FLAGS: c->env_flags = p; break;
    case F_WEIGHT_BF16: c->weight_bf16 = p; break;
    case F_REF_RECORDED: c->ref_recorded = p; break;
    case F_ROUTE: c->route = p; break;
    case F_TP_RANK: c->tp_rank = p; break;
    case F_VERSIONS: c->versions = p; break;
    case F_GPU_ARCH: c->gpu_arch = p; break;
    case F_EXTENSION_PATH: c->extension_path = p; break;
    case F_CAPTURE_TIME_SOURCE: c->capture_time_source = p; break;
    case F_COUNT: break;
    }
}

/* An array field's element count, or -1 if it cannot be one (the
 * dimensions are already known to pass case_check_dims, so the products
 * cannot overflow; weight_ref_len is checked by the caller). */
static int64_t field_elements(const case_t *c, field_t f)
{
    switch (FIELDS[f].count) {
    case COUNT_STRING: return -1;
    case COUNT_M: return c->M;
    case COUNT_MK: return c->M * c->K;
    case COUNT_MN: return c->M * c->N;
    case COUNT_NK: return c->N * c->K;
    case COUNT_NK_HALF: return c->N * (c->K / 2);
    case COUNT_NK_BLOCKS: return c->N * (c->K / 32);
    case COUNT_WEIGHT_REF: return c->weight_ref_len;
    }
    return -1;
}

/* ------------------------------------------------------------ the layout */

/* Every member 64-bit, so neither struct has padding: the bytes written
 * are exactly the members. */
typedef struct {
    char magic[8];              /* CASE_IMAGE_MAGIC, no NUL */
    uint64_t version;           /* CASE_IMAGE_VERSION */
    uint64_t header_bytes;      /* this header plus the table */
    uint64_t image_bytes;       /* the whole image */
    uint64_t field_count;       /* F_COUNT */
    int64_t M, N, K;
    int64_t weight_ref_len;
    uint64_t x_storage, x_fp8_format, weight_order, scale_layout;
    /* The case file the IN_SOURCE arrays are in, as the writer found it
     * (all zero when none is). */
    uint64_t source_dev, source_ino, source_size;
    int64_t source_mtime_ns, source_ctime_ns;
} image_header_t;

typedef enum {
    ENTRY_ABSENT = 0,           /* NULL in the case */
    ENTRY_IN_IMAGE = 1,         /* its bytes follow in the image */
    ENTRY_IN_SOURCE = 2,        /* an array the case file holds as it is, at offset */
    ENTRY_IN_SOURCE_BF16 = 3,   /* x only: its bf16 bits in the case file, at offset,
                                   for the reader to decode to fp32 */
} entry_presence_t;

typedef struct {
    uint64_t field;             /* its field_t, which must equal its index */
    uint64_t present;           /* an entry_presence_t */
    uint64_t offset;            /* of its data in the image, or in the case file when
                                   IN_SOURCE (0 when absent) */
    uint64_t bytes;
} image_entry_t;

#define IMAGE_TABLE_BYTES (sizeof(image_header_t) + F_COUNT * sizeof(image_entry_t))
#define IMAGE_ALIGN 8

/* Reads and discards go in pieces of this size, so that with
 * CASE_IMAGE_CONSUME_SOURCE the image shrinks as the case grows. */
#define IMAGE_CHUNK_BYTES ((size_t)8 << 20)

static uint64_t align_up(uint64_t n)
{
    return (n + IMAGE_ALIGN - 1) / IMAGE_ALIGN * IMAGE_ALIGN;
}

/* ------------------------------------------------------------ plain I/O */

/* Moves exactly n bytes between buf and the file at off, whatever a single
 * call moves, retrying EINTR; 0 bytes moved (a short file: the size was
 * checked first, so it shrank under us) is EIO. */
static int transfer_all(int fd, char *p, size_t n, uint64_t off, int writing)
{
    while (n > 0) {
        ssize_t r = writing ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    return transfer_all(fd, (char *)(uintptr_t)buf, n, off, 1);   /* pwrite only reads buf */
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    return transfer_all(fd, buf, n, off, 0);
}

/* Gives [off, off + n) of the file back to the system.  Best effort: a
 * file system without hole punching keeps the pages, which for a disk file
 * are reclaimable page cache anyway. */
static void discard_range(int fd, uint64_t off, uint64_t n)
{
#if defined(FALLOC_FL_PUNCH_HOLE) && defined(FALLOC_FL_KEEP_SIZE)
    if (n > 0)
        (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)n);
#else
    (void)fd, (void)off, (void)n;
#endif
}

/* ------------------------------------------------------------ writing */

int case_image_write(int fd, case_t *c, case_image_mode_t mode, kr_error_t *err)
{
    const int consume = mode == CASE_IMAGE_CONSUME_SOURCE;
    int st = 0;
    image_header_t h;
    image_entry_t table[F_COUNT];
    memset(&h, 0, sizeof h);
    memset(table, 0, sizeof table);
    /* Only a valid case has well-defined array sizes. */
    if (case_validate(c, NULL, err)) {
        st = -1;
        goto done;
    }
    memcpy(h.magic, CASE_IMAGE_MAGIC, sizeof h.magic);
    h.version = CASE_IMAGE_VERSION;
    h.header_bytes = IMAGE_TABLE_BYTES;
    h.field_count = F_COUNT;
    h.M = c->M;
    h.N = c->N;
    h.K = c->K;
    h.weight_ref_len = c->weight_ref_len;
    h.x_storage = (uint64_t)c->x_storage;
    h.x_fp8_format = (uint64_t)c->x_fp8_format;
    h.weight_order = (uint64_t)c->weight_order;
    h.scale_layout = (uint64_t)c->scale_layout;

    /* The image ends where its last field's data does. */
    uint64_t end = IMAGE_TABLE_BYTES;
    for (int f = 0; f < F_COUNT; f++) {
        const void *p = field_get(c, (field_t)f);
        table[f].field = (uint64_t)f;
        if (f == F_X && !p && c->x_bf16_in_file) {
            table[f].present = ENTRY_IN_SOURCE_BF16;
            table[f].offset = (uint64_t)((const char *)c->x_bf16_in_file -
                                         (const char *)c->mapping.base);
            table[f].bytes = (uint64_t)field_elements(c, F_X) * sizeof(uint16_t);
            continue;
        }
        if (!p)
            continue;
        const uint64_t bytes = FIELDS[f].count == COUNT_STRING
                                   ? (uint64_t)strlen(p)
                                   : (uint64_t)field_elements(c, (field_t)f) * FIELDS[f].elem_bytes;
        if (FIELDS[f].count != COUNT_STRING && !case_owns(c, p)) {
            /* Left where the case file has it: the reader maps it from there. */
            table[f].present = ENTRY_IN_SOURCE;
            table[f].offset = (uint64_t)((const char *)p - (const char *)c->mapping.base);
            table[f].bytes = bytes;
            continue;
        }
        table[f].present = ENTRY_IN_IMAGE;
        table[f].offset = align_up(end);
        table[f].bytes = bytes;
        end = table[f].offset + table[f].bytes;
    }
    h.image_bytes = end;
    if (c->mapping.base) {
        h.source_dev = c->mapping.id.dev;
        h.source_ino = c->mapping.id.ino;
        h.source_size = c->mapping.id.size;
        h.source_mtime_ns = c->mapping.id.mtime_ns;
        h.source_ctime_ns = c->mapping.id.ctime_ns;
    }

    if (pwrite_all(fd, &h, sizeof h, 0) ||
        pwrite_all(fd, table, sizeof table, sizeof h)) {
        st = kr_fail(err, "case image: writing the header: %s", strerror(errno));
        goto done;
    }
    for (int f = 0; f < F_COUNT; f++) {
        void *p = field_get(c, (field_t)f);
        if (!p || table[f].present != ENTRY_IN_IMAGE)
            continue;
        if (pwrite_all(fd, p, (size_t)table[f].bytes, table[f].offset)) {
            st = kr_fail(err, "case image: writing %s (%llu bytes): %s", FIELDS[f].name,
                         (unsigned long long)table[f].bytes, strerror(errno));
            goto done;
        }
        if (consume) {
            free(p);
            field_set(c, (field_t)f, NULL);
        }
    }
    /* An empty last field (an empty string) writes nothing, yet the image
     * ends at its aligned offset: the file must reach that far. */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || ((uint64_t)sb.st_size < end && ftruncate(fd, (off_t)end) != 0)) {
        st = kr_fail(err, "case image: extending it to %llu bytes: %s", (unsigned long long)end,
                     strerror(errno));
        goto done;
    }
done:
    if (consume)
        case_free(c);
    return st;
}

/* ------------------------------------------------------------ reading */

/* "<what>: case image: <problem>" */
#define image_fail(err, what, ...) kr_fail_at(err, what, "case image", __VA_ARGS__)

/* The header's own consistency and the scalars' ranges, and the case's
 * dimensions (c gets M, N, K and weight_ref_len). */
static int check_header(const image_header_t *h, uint64_t file_bytes, case_t *c, const char *what,
                        kr_error_t *err)
{
    if (memcmp(h->magic, CASE_IMAGE_MAGIC, sizeof h->magic) != 0)
        return image_fail(err, what, "bad magic; expected \"%s\"", CASE_IMAGE_MAGIC);
    if (h->version != CASE_IMAGE_VERSION)
        return image_fail(err, what, "version %llu; expected %d", (unsigned long long)h->version,
                          CASE_IMAGE_VERSION);
    if (h->header_bytes != IMAGE_TABLE_BYTES || h->field_count != F_COUNT)
        return image_fail(err, what, "a header of %llu bytes with %llu fields; expected %zu bytes "
                          "with %d fields", (unsigned long long)h->header_bytes,
                          (unsigned long long)h->field_count, (size_t)IMAGE_TABLE_BYTES, F_COUNT);
    if (h->image_bytes < IMAGE_TABLE_BYTES || h->image_bytes > file_bytes)
        return image_fail(err, what, "the header says %llu bytes but the file holds %llu; "
                          "expected at least the %zu-byte header and at most the file's size",
                          (unsigned long long)h->image_bytes, (unsigned long long)file_bytes,
                          (size_t)IMAGE_TABLE_BYTES);
    char dims_what[KR_ERROR_MSG_MAX / 2];
    snprintf(dims_what, sizeof dims_what, "%s: case image", what);
    if (case_check_dims(h->M, h->N, h->K, dims_what, err))
        return -1;
    if (h->x_storage > X_STORED_F32 || h->x_fp8_format > FP8_E4M3FNUZ ||
        h->weight_order > WEIGHT_ORDER_FRAGMENT || h->scale_layout > SCALE_LAYOUT_KN)
        return image_fail(err, what, "enums x_storage=%llu, x_fp8_format=%llu, weight_order=%llu, "
                          "scale_layout=%llu; expected each a known value",
                          (unsigned long long)h->x_storage, (unsigned long long)h->x_fp8_format,
                          (unsigned long long)h->weight_order, (unsigned long long)h->scale_layout);
    /* weight_ref_len decides weight_ref's size, so it is checked before the
     * table (case_validate checks it again against the rest of the case). */
    if (h->weight_ref_len != 0 && h->weight_ref_len != 1 && h->weight_ref_len != 2 &&
        h->weight_ref_len != h->N)
        return image_fail(err, what, "weight_ref_len %lld; expected 0, 1, 2 or N=%lld",
                          (long long)h->weight_ref_len, (long long)h->N);
    c->M = h->M;
    c->N = h->N;
    c->K = h->K;
    c->weight_ref_len = h->weight_ref_len;
    c->x_storage = (x_storage_t)h->x_storage;
    c->x_fp8_format = (fp8_format_t)h->x_fp8_format;
    c->weight_order = (weight_order_t)h->weight_order;
    c->scale_layout = (scale_layout_t)h->scale_layout;
    return 0;
}

/* Every entry against its field, the dimensions and the image's size:
 * sizes exact for arrays, data inside the image, after the table, aligned,
 * in order and not overlapping. */
static int check_table(const image_entry_t *table, const case_t *c, uint64_t image_bytes,
                       uint64_t source_bytes, const char *what, kr_error_t *err)
{
    uint64_t next_free = IMAGE_TABLE_BYTES;
    for (int f = 0; f < F_COUNT; f++) {
        const image_entry_t *e = &table[f];
        const char *name = FIELDS[f].name;
        if (e->field != (uint64_t)f)
            return image_fail(err, what, "table entry %d is field %llu; expected field %d (%s)", f,
                              (unsigned long long)e->field, f, name);
        if (e->present > ENTRY_IN_SOURCE_BF16)
            return image_fail(err, what, "%s: present=%llu; expected 0, 1, 2 or 3", name,
                              (unsigned long long)e->present);
        if (e->present == ENTRY_IN_SOURCE_BF16 &&
            (f != F_X || c->x_storage != X_STORED_BF16))
            return image_fail(err, what, "%s: present=3 (bf16 bits to decode) with x_storage=%d; "
                              "expected it on x stored as bf16 only", name, (int)c->x_storage);
        if (e->present == ENTRY_IN_SOURCE && FIELDS[f].count == COUNT_STRING)
            return image_fail(err, what, "%s: a string said to be in the case file; expected "
                              "strings in the image", name);
        if (!e->present) {
            if (e->offset != 0 || e->bytes != 0)
                return image_fail(err, what, "%s: absent but with offset %llu and %llu bytes; "
                                  "expected 0 and 0", name, (unsigned long long)e->offset,
                                  (unsigned long long)e->bytes);
            continue;
        }
        if (FIELDS[f].count == COUNT_STRING) {
            /* Bounded by the image below; the NUL added on read must fit too. */
        } else {
            const int64_t n = field_elements(c, (field_t)f);
            if (n <= 0)
                return image_fail(err, what, "%s: present with %lld elements; expected at least "
                                  "one", name, (long long)n);
            /* n <= 2^40 (case_check_dims), elem_bytes <= 4: no overflow. */
            const size_t elem_bytes = e->present == ENTRY_IN_SOURCE_BF16 ? sizeof(uint16_t)
                                                                         : FIELDS[f].elem_bytes;
            const uint64_t want = (uint64_t)n * elem_bytes;
            if (e->bytes != want)
                return image_fail(err, what, "%s: %llu bytes; expected %llu (%lld elements of %zu "
                                  "bytes, M=%lld N=%lld K=%lld)", name,
                                  (unsigned long long)e->bytes, (unsigned long long)want,
                                  (long long)n, elem_bytes, (long long)c->M,
                                  (long long)c->N, (long long)c->K);
        }
        if (e->present == ENTRY_IN_SOURCE || e->present == ENTRY_IN_SOURCE_BF16) {
            if (e->offset % FIELDS[f].elem_bytes != 0 || e->offset > source_bytes ||
                e->bytes > source_bytes - e->offset)
                return image_fail(err, what, "%s: %llu bytes at offset %llu of the case file; "
                                  "expected a range aligned to its %zu-byte elements inside the "
                                  "file's %llu bytes", name, (unsigned long long)e->bytes,
                                  (unsigned long long)e->offset, FIELDS[f].elem_bytes,
                                  (unsigned long long)source_bytes);
            continue;
        }
        if (e->offset < next_free || e->offset % IMAGE_ALIGN != 0 || e->offset > image_bytes ||
            e->bytes > image_bytes - e->offset)
            return image_fail(err, what, "%s: %llu bytes at offset %llu; expected an aligned "
                              "range after byte %llu inside the image's %llu bytes", name,
                              (unsigned long long)e->bytes, (unsigned long long)e->offset,
                              (unsigned long long)next_free, (unsigned long long)image_bytes);
        next_free = e->offset + e->bytes;
    }
    if (next_free != image_bytes)
        return image_fail(err, what, "the data ends at byte %llu but the header says %llu; "
                          "expected them equal", (unsigned long long)next_free,
                          (unsigned long long)image_bytes);
    return 0;
}

/* Reads the image's data in ascending order and, when consuming, gives
 * back what has been read behind it in whole pages: a hole punched per few
 * MiB, not a syscall per small field. */
typedef struct {
    int fd;
    int consume;
    uint64_t discarded_to;      /* [0, discarded_to) is already given back */
} image_reader_t;

#define IMAGE_DISCARD_MIN_BYTES ((uint64_t)1 << 20)

static void reader_release_to(image_reader_t *r, uint64_t read_to)
{
    if (!r->consume)
        return;
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t page_bytes = page > 0 ? (uint64_t)page : 4096;
    const uint64_t upto = read_to / page_bytes * page_bytes;
    if (upto > r->discarded_to && upto - r->discarded_to >= IMAGE_DISCARD_MIN_BYTES) {
        discard_range(r->fd, r->discarded_to, upto - r->discarded_to);
        r->discarded_to = upto;
    }
}

/* Reads n bytes at off into dst, in pieces of IMAGE_CHUNK_BYTES. */
static int read_range(image_reader_t *r, void *dst, uint64_t n, uint64_t off)
{
    char *p = dst;
    while (n > 0) {
        const size_t piece = n < IMAGE_CHUNK_BYTES ? (size_t)n : IMAGE_CHUNK_BYTES;
        if (pread_all(r->fd, p, piece, off))
            return -1;
        p += piece;
        off += piece;
        n -= piece;
        reader_release_to(r, off);
    }
    return 0;
}

/* bf16 bits as a fresh fp32 array, or NULL when out of
 * memory.  Exact: a bf16 is the top half of its fp32. */
static float *decode_bf16(const char *bits, uint64_t n)
{
    float *x = kr_alloc_array((size_t)n * sizeof *x);
    if (!x)
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t b;
        memcpy(&b, bits + 2 * i, sizeof b);
        const uint32_t u = (uint32_t)b << 16;
        memcpy(&x[i], &u, sizeof u);
    }
    return x;
}

/* Points the IN_SOURCE arrays into the case file, mapped afresh here and
 * refused unless it is the file the writer read (h's identity). */
static int map_source_arrays(const image_header_t *h, const image_entry_t *table,
                             const char *source_path, case_t *c, const char *what,
                             kr_error_t *err)
{
    int any = 0;
    for (int f = 0; f < F_COUNT; f++)
        any |= table[f].present == ENTRY_IN_SOURCE || table[f].present == ENTRY_IN_SOURCE_BF16;
    if (!any)
        return 0;
    if (!source_path)
        return image_fail(err, what, "arrays in a case file, but no file named to map; expected "
                          "the path the image was made from");
    const case_file_identity_t id = {h->source_dev, h->source_ino, h->source_size,
                                     h->source_mtime_ns, h->source_ctime_ns};
    /* The part of the file the arrays lie in, not the whole file. */
    uint64_t used = 0;
    for (int f = 0; f < F_COUNT; f++)
        if ((table[f].present == ENTRY_IN_SOURCE || table[f].present == ENTRY_IN_SOURCE_BF16) &&
            table[f].offset + table[f].bytes > used)
            used = table[f].offset + table[f].bytes;
    if (case_mapping_open_expecting(source_path, &id, used, &c->mapping, err))
        return -1;
    for (int f = 0; f < F_COUNT; f++) {
        const image_entry_t *e = &table[f];
        if (e->present != ENTRY_IN_SOURCE && e->present != ENTRY_IN_SOURCE_BF16)
            continue;
        /* check_table bounded the range by the size the identity just matched. */
        case_mapping_prefault(&c->mapping, e->offset, e->bytes);
        char *at = (char *)c->mapping.base + e->offset;
        if (e->present == ENTRY_IN_SOURCE) {
            field_set(c, (field_t)f, at);
            continue;
        }
        float *x = decode_bf16(at, e->bytes / sizeof(uint16_t));
        if (!x)
            return image_fail(err, what, "x: out of memory decoding %llu bf16 elements",
                              (unsigned long long)(e->bytes / sizeof(uint16_t)));
        c->x = x;
    }
    return 0;
}

int case_image_read(int fd, case_t *c, case_image_mode_t mode, const char *what,
                    const char *source_path, kr_error_t *err)
{
    if (!what)
        what = "(case image)";
    memset(c, 0, sizeof *c);
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return image_fail(err, what, "fstat: %s", strerror(errno));
    const uint64_t file_bytes = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    if (file_bytes < IMAGE_TABLE_BYTES)
        return image_fail(err, what, "%llu bytes; expected at least a %zu-byte header",
                          (unsigned long long)file_bytes, (size_t)IMAGE_TABLE_BYTES);
    image_header_t h;
    image_entry_t table[F_COUNT];
    if (pread_all(fd, &h, sizeof h, 0) || pread_all(fd, table, sizeof table, sizeof h))
        return image_fail(err, what, "reading the header: %s", strerror(errno));
    if (check_header(&h, file_bytes, c, what, err) ||
        check_table(table, c, h.image_bytes, h.source_size, what, err)) {
        memset(c, 0, sizeof *c);
        return -1;
    }
    image_reader_t reader = {.fd = fd, .consume = mode == CASE_IMAGE_CONSUME_SOURCE};

    /* Every size is now known good: the allocations add up to at most the
     * image's own size (plus a NUL per string). */
    for (int f = 0; f < F_COUNT; f++) {
        const image_entry_t *e = &table[f];
        if (e->present != ENTRY_IN_IMAGE)
            continue;
        const int is_string = FIELDS[f].count == COUNT_STRING;
        const size_t alloc = (size_t)e->bytes + (is_string ? 1 : 0);
        char *p = malloc(alloc > 0 ? alloc : 1);
        if (!p) {
            case_free(c);
            return image_fail(err, what, "%s: out of memory for %zu bytes", FIELDS[f].name, alloc);
        }
        field_set(c, (field_t)f, p);
        if (read_range(&reader, p, e->bytes, e->offset)) {
            const int e_no = errno;
            case_free(c);
            return image_fail(err, what, "%s: reading %llu bytes at %llu: %s", FIELDS[f].name,
                              (unsigned long long)e->bytes, (unsigned long long)e->offset,
                              strerror(e_no));
        }
        if (is_string) {
            p[e->bytes] = '\0';
            if (memchr(p, '\0', (size_t)e->bytes)) {
                case_free(c);
                return image_fail(err, what, "%s: a NUL inside the string; expected text",
                                  FIELDS[f].name);
            }
        }
    }
    if (map_source_arrays(&h, table, source_path, c, what, err)) {
        case_free(c);
        return -1;
    }
    /* The schema's rules (one of x / x_fp8, x_fp8 with x_scale, a weight,
     * ...) on the case as built. */
    char rules_what[KR_ERROR_MSG_MAX / 2];
    snprintf(rules_what, sizeof rules_what, "%s: case image", what);
    if (case_validate(c, rules_what, err)) {
        case_free(c);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the descriptor */

int case_image_open_anonymous(kr_error_t *err)
{
    return anon_file_open("kreplay-case-image", err);
}
