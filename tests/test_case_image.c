/* Case images (harness/case/case_image.h), the form in which a case comes back
 * from the reading process: every field of case_t survives the round trip
 * (a case with every optional field set to distinctive values, compared
 * field by field, and a byte-level check that case_t holds no field the
 * image does not know); consuming the source frees the case as it is
 * written and the image as it is read; and the reader refuses damaged
 * images -- truncated, every header and table field corrupted, random
 * bytes flipped -- with one line, never a crash or an allocation the image
 * cannot back.  case_load_safe, which reads in another process:
 * test_case_image_safe_read.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_image.h"
#include "case_images.h"
#include "case_io.h"
#include "case_load.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

/* ---------------------------------------------------------------- helpers */

static float *rand_floats(test_rng_t *r, size_t n)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)test_rng_normal(r) + 0.001f * (float)(i + 1);
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

/* A case with every field set, none to its zero value: every array
 * present, every enum at its non-default value, every string distinct.
 * The struct is first filled with 0x5A so that a field this function does
 * not know about (one added to case.h later) is non-zero too. */
static void full_case(case_t *c, int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    memset(c, 0x5A, sizeof *c);
    /* Its arrays are its own: nothing is mapped. */
    memset(&c->mapping, 0, sizeof c->mapping);
    c->x_bf16_in_file = NULL;
    test_rng_t r = {seed};
    c->path = xstrdup("/captures/run 7/layer17.h5");
    c->M = M;
    c->N = N;
    c->K = K;
    c->x = rand_floats(&r, (size_t)(M * K));
    c->x_storage = X_STORED_BF16;
    c->x_fp8 = test_rand_bytes(&r, (size_t)(M * K));
    c->x_fp8_format = FP8_E4M3FNUZ;
    c->x_scale = rand_floats(&r, (size_t)M);
    c->weight = test_rand_bytes(&r, (size_t)(N * K / 2));
    c->weight_order = WEIGHT_ORDER_FRAGMENT;
    c->weight_scale = test_rand_bytes(&r, (size_t)(N * K / 32));
    c->scale_layout = SCALE_LAYOUT_KN;
    c->weight_ref_len = N;
    c->weight_ref = test_rand_bytes(&r, (size_t)N);
    c->out = test_rand_bytes(&r, (size_t)(M * N) * 2);
    c->out_rerun = test_rand_bytes(&r, (size_t)(M * N) * 2);
    c->aiter = test_rand_bytes(&r, (size_t)(M * N) * 2);
    c->kernel_path = xstrdup("radiance::mxfp4_linear");
    c->layer = xstrdup("model.layers.17.mlp.down_proj");
    c->model = xstrdup("Qwen3-Next-80B (é, UTF-8)");
    c->capture_time = xstrdup("2025-03-14T15:09:26Z");
    c->env_flags = xstrdup("WPERM=1\nSANITIZE_X=0\n");
    c->route = xstrdup("w4a4");
    c->tp_rank = xstrdup("3");
    c->versions = xstrdup("torch=2.5.1\nvllm=0.27.0\nrocm=6.3.1");
    c->gpu_arch = xstrdup("gfx1201");
    c->extension_path = xstrdup("/opt/radiance/radiance_mxfp4_fp8.so");
    c->capture_time_source = xstrdup("recorded");
    c->weight_bf16 = test_rand_bytes(&r, (size_t)(N * K) * 2);
    c->ref_recorded = rand_floats(&r, (size_t)(M * N));
}


/* Every field the tests know, set to zero. */
static void zero_known_fields(case_t *c)
{
    c->path = NULL;
    c->M = c->N = c->K = 0;
    c->x = NULL;
    c->x_storage = X_STORED_NONE;
    c->x_fp8 = NULL;
    c->x_fp8_format = FP8_E4M3FN;
    c->x_scale = NULL;
    c->weight = NULL;
    c->weight_order = WEIGHT_ORDER_CHECKPOINT;
    c->weight_scale = NULL;
    c->scale_layout = SCALE_LAYOUT_NK;
    c->weight_ref = NULL;
    c->weight_ref_len = 0;
    c->out = c->out_rerun = c->aiter = NULL;
    c->kernel_path = c->layer = c->model = c->capture_time = c->env_flags = NULL;
    c->route = c->tp_rank = c->versions = c->gpu_arch = c->extension_path = NULL;
    c->capture_time_source = NULL;
    c->weight_bf16 = NULL;
    c->ref_recorded = NULL;
    /* Not fields the image carries as such: where the arrays lie, not what
     * they hold (test_sample_file_round_trips has them). */
    memset(&c->mapping, 0, sizeof c->mapping);
    c->x_bf16_in_file = NULL;
}

/* Frees a case from full_case.  case_free alone would free the 0x5A filler
 * of a pointer field these tests do not know: every byte that
 * zero_known_fields leaves non-zero is filler (or padding) and is cleared
 * first, so only the fields full_case set are freed. */
static void free_full_case(case_t *c)
{
    case_t filler = *c;
    zero_known_fields(&filler);
    const unsigned char *f = (const unsigned char *)&filler;
    unsigned char *bytes = (unsigned char *)c;
    for (size_t i = 0; i < sizeof *c; i++)
        if (f[i])
            bytes[i] = 0;
    case_free(c);
}

#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
#define HAVE_CLEAR_PADDING 1
#endif
#endif

/* case_t holds nothing but the fields above.  The original was filled with
 * 0x5A before its known fields were set, the copy read back starts from
 * zeros: once the known fields are zeroed on both sides (and the padding
 * cleared), any byte that still differs belongs to a field the image does
 * not carry. */
static void assert_no_unknown_fields(const case_t *orig, const case_t *back)
{
#ifdef HAVE_CLEAR_PADDING
    case_t a, b;
    memcpy(&a, orig, sizeof a);
    memcpy(&b, back, sizeof b);
    zero_known_fields(&a);
    zero_known_fields(&b);
    __builtin_clear_padding(&a);
    __builtin_clear_padding(&b);
    if (memcmp(&a, &b, sizeof a) != 0)
        fail_msg("case_t has a field that case_image does not carry (or that these tests do "
                 "not know): add it to harness/case/case_image.c, to full_case and "
                 "zero_known_fields here and to assert_cases_equal (support/case_images.c)");
#else
    (void)orig, (void)back;
    /* Without the compiler's help to tell padding from fields, case_t's
     * size on LP64 as these tests know it stands in. */
    if (sizeof(void *) == 8 && sizeof(case_t) != 248)
        fail_msg("case_t is %zu bytes, not the 248 these tests know: a field was added; carry "
                 "it in harness/case/case_image.c and round-trip it here", sizeof(case_t));
#endif
}

/* Reads an image that must be refused: -1, one line naming `what` and
 * "case image", the case left empty. */
static void expect_refused(const uint8_t *bytes, size_t n, const char *phrase)
{
    int fd = fd_with(bytes, n);
    case_t c;
    memset(&c, 0x77, sizeof c);
    kr_error_t err = {{0}};
    int st = case_image_read(fd, &c, CASE_IMAGE_KEEP_SOURCE, "cases/x.h5", NULL, &err);
    close(fd);
    if (st != -1)
        fail_msg("a damaged image was accepted (expected \"%s\")", phrase ? phrase : "refused");
    case_t zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&c, &zero, sizeof c);
    assert_non_null(strstr(err.msg, "cases/x.h5: case image"));
    assert_null(strchr(err.msg, '\n'));
    if (phrase && !strstr(err.msg, phrase))
        fail_msg("message \"%s\" does not say \"%s\"", err.msg, phrase);
}

/* GOOD (n bytes) with the 64-bit word at OFF set to V must be refused, naming PHRASE. */
static void expect_patch_refused(const uint8_t *good, size_t n, size_t off, uint64_t v, const char *phrase)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    memcpy(b, good, n);
    set_u64(b, off, v);
    expect_refused(b, n, phrase);
    free(b);
}

/* C written to a fresh image (KEEP_SOURCE) and read back into *back under
 * the name `what`, failing the test if either refuses; the image's fd,
 * still open for another read. */
static int image_round_trip(case_t *c, const char *what, case_t *back)
{
    kr_error_t err = {{0}};
    int fd = image_fd();
    assert_int_equal(case_image_write(fd, c, CASE_IMAGE_KEEP_SOURCE, &err), 0);
    if (case_image_read(fd, back, CASE_IMAGE_KEEP_SOURCE, what, NULL, &err))
        fail_msg("%s", err.msg);
    return fd;
}

/* ------------------------------------------------------------------ tests */

static void test_every_field_round_trips(void **state)
{
    (void)state;
    case_t orig;
    full_case(&orig, 3, 32, 64, 11);
    case_t back;
    int fd = image_round_trip(&orig, "full", &back);
    assert_cases_equal(&orig, &back);
    assert_no_unknown_fields(&orig, &back);
    /* KEEP_SOURCE: the image is still there, and reads the same again. */
    case_t again;
    kr_error_t err = {{0}};
    if (case_image_read(fd, &again, CASE_IMAGE_KEEP_SOURCE, "full", NULL, &err))
        fail_msg("%s", err.msg);
    assert_cases_equal(&orig, &again);
    case_free(&again);
    case_free(&back);
    free_full_case(&orig);
    close(fd);
}

/* The other values of every enum, every optional field absent, strings
 * empty rather than absent where that is a difference to keep. */
static void test_minimal_case_round_trips(void **state)
{
    (void)state;
    test_rng_t r = {5};
    case_t c;
    memset(&c, 0, sizeof c);
    c.M = 1;
    c.N = 3;
    c.K = 32;
    c.x_fp8 = test_rand_bytes(&r, 32);
    c.x_scale = rand_floats(&r, 1);
    c.x_fp8_format = FP8_E4M3FN;
    c.weight_bf16 = test_rand_bytes(&r, 3 * 32 * 2);
    c.layer = xstrdup("");
    c.weight_ref = test_rand_bytes(&r, 2);
    c.weight_ref_len = 2;
    case_t back;
    int fd = image_round_trip(&c, "minimal", &back);
    assert_cases_equal(&c, &back);
    assert_null(back.path);
    assert_null(back.x);
    assert_null(back.weight);
    assert_null(back.out);
    assert_null(back.ref_recorded);
    assert_null(back.model);
    assert_non_null(back.layer);
    assert_string_equal(back.layer, "");
    case_free(&back);

    /* An empty string as the last field: its data is nothing, at an
     * aligned offset past the end of what was written before it. */
    free(c.weight_bf16);
    c.weight_bf16 = NULL;
    c.weight = test_rand_bytes(&r, 3 * 32 / 2);
    c.weight_scale = test_rand_bytes(&r, 3 * 32 / 32);
    c.env_flags = xstrdup("");
    c.x_scale[0] = 3.0f;            /* x_scale's 4 bytes leave the next offset unaligned */
    close(fd);
    fd = image_round_trip(&c, "empty last", &back);
    assert_cases_equal(&c, &back);
    assert_string_equal(back.env_flags, "");
    case_free(&back);
    case_free(&c);
    close(fd);
}

/* A case read from a file (the reader's own choices: x decoded from bf16,
 * the default enums) comes back as it was read, whether the image was made
 * from the case as read in process (its decoded x in the image) or as the
 * reading process reads it (case_read_for_image: x's bf16 bits left in the
 * file, decoded by the image's reader).  Either way the plain arrays stay
 * in the file, mapped on both sides. */
static void test_sample_file_round_trips(void **state)
{
    (void)state;
    const char *path = KREPLAY_SOURCE_DIR "/cases/samples/prefill_N256_K2048_M300_kn_wperm.h5";
    case_t c;
    kr_error_t err = {{0}};
    if (case_load(path, &c, NULL, &err))
        fail_msg("%s", err.msg);
    assert_true(!case_owns(&c, c.weight) && !case_owns(&c, c.x_scale) && case_owns(&c, c.x));
    for (int deferred = 0; deferred < 2; deferred++) {
        case_t src;
        if (deferred ? case_read_for_image(path, &src, &err) : case_load(path, &src, NULL, &err))
            fail_msg("%s", err.msg);
        assert_true(deferred ? !src.x && src.x_bf16_in_file : src.x && !src.x_bf16_in_file);
        int fd = image_fd();
        assert_int_equal(case_image_write(fd, &src, CASE_IMAGE_KEEP_SOURCE, &err), 0);
        const int64_t x_bytes = c.M * c.K * (int64_t)sizeof(float);
        /* The image: strings and nothing else when deferred, plus x's fp32 when not. */
        assert_true(file_size(fd) < 65536 + (deferred ? 0 : x_bytes));
        assert_true(file_size(fd) >= (deferred ? 0 : x_bytes));
        case_t back;
        if (case_image_read(fd, &back, CASE_IMAGE_CONSUME_SOURCE, path, path, &err))
            fail_msg("%s", err.msg);
        assert_cases_equal(&c, &back);
        assert_true(!case_owns(&back, back.weight) && !case_owns(&back, back.x_scale));
        assert_true(case_owns(&back, back.x) && !back.x_bf16_in_file);
        case_free(&back);
        case_free(&src);
        close(fd);
    }
    case_free(&c);
}

/* CONSUME_SOURCE: the writer leaves the case empty (each array freed once
 * written: ASan/LSan see no leak and no double free), and the reader gives
 * the image's pages back as it goes, so a large image leaves no more than a
 * few MiB allocated in its file. */
static void test_consuming_frees_both_sides(void **state)
{
    (void)state;
    case_t orig, moved;
    full_case(&orig, 64, 2048, 4096, 23);     /* ~23 MiB: several read pieces */
    full_case(&moved, 64, 2048, 4096, 23);
    kr_error_t err = {{0}};
    int fd = image_fd();
    assert_int_equal(case_image_write(fd, &moved, CASE_IMAGE_CONSUME_SOURCE, &err), 0);
    case_t zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&moved, &zero, sizeof moved);
    struct stat before;
    assert_int_equal(fstat(fd, &before), 0);
    assert_true(before.st_size > (20 << 20));
    case_t back;
    if (case_image_read(fd, &back, CASE_IMAGE_CONSUME_SOURCE, "big", NULL, &err))
        fail_msg("%s", err.msg);
    assert_cases_equal(&orig, &back);
    struct stat after;
    assert_int_equal(fstat(fd, &after), 0);
    /* A file system without hole punching keeps the blocks: only where
     * they were given back is the bound checked. */
    if (after.st_blocks < before.st_blocks)
        assert_true((long long)after.st_blocks * 512 <= (10LL << 20));
    case_free(&back);
    free_full_case(&orig);
    close(fd);
}

/* An invalid case is not written: its array sizes would be undefined. */
static void test_writer_refuses_an_invalid_case(void **state)
{
    (void)state;
    case_t c;
    full_case(&c, 2, 32, 64, 3);
    const int64_t K = c.K;
    c.K = 48;                   /* not a multiple of 32 */
    kr_error_t err = {{0}};
    int fd = image_fd();
    assert_int_equal(case_image_write(fd, &c, CASE_IMAGE_KEEP_SOURCE, &err), -1);
    assert_non_null(strstr(err.msg, "K"));
    assert_int_equal(file_size(fd), 0);
    c.K = K;
    free_full_case(&c);
    close(fd);
}

/* A valid image of the full case, as bytes. */
static uint8_t *valid_image(size_t *n)
{
    case_t c;
    full_case(&c, 3, 32, 64, 31);
    kr_error_t err = {{0}};
    int fd = image_fd();
    assert_int_equal(case_image_write(fd, &c, CASE_IMAGE_KEEP_SOURCE, &err), 0);
    free_full_case(&c);
    uint8_t *b = image_bytes(fd, n);
    close(fd);
    /* The layout the corruptions below assume. */
    assert_memory_equal(b + H_MAGIC, CASE_IMAGE_MAGIC, 8);
    assert_int_equal(get_u64(b, H_FIELD_COUNT), FIELD_COUNT);
    assert_int_equal(get_u64(b, H_HEADER_BYTES), H_END + FIELD_COUNT * 32);
    assert_int_equal(get_u64(b, H_M), 3);
    return b;
}

typedef struct {
    size_t offset;
    uint64_t value;
    const char *phrase;
} corruption_t;

static void test_damaged_headers_are_refused(void **state)
{
    (void)state;
    size_t n;
    uint8_t *good = valid_image(&n);
    const uint64_t image_bytes = get_u64(good, H_IMAGE_BYTES);
    const corruption_t cases[] = {
        {H_MAGIC, 0x4D49455341435251ull, "magic"},
        {H_VERSION, 2, "version 2"},
        {H_VERSION, 4, "version 4"},
        {H_VERSION, 0, "version 0"},
        {H_HEADER_BYTES, 100, "header of 100 bytes"},
        {H_FIELD_COUNT, 24, "24 fields"},
        {H_IMAGE_BYTES, image_bytes + 1, "the file holds"},
        {H_IMAGE_BYTES, 8, "the file holds"},
        {H_IMAGE_BYTES, UINT64_MAX, "the file holds"},
        {H_IMAGE_BYTES, image_bytes - 1, "capture_time_source"},  /* the last field overruns it */
        {H_M, 0, "M=0 is not positive"},
        {H_M, (uint64_t)-5, "M=-5"},
        {H_N, (uint64_t)1 << 40, "2^40"},
        {H_K, 48, "not a multiple of 32"},
        {H_K, (uint64_t)1 << 62, "2^40"},
        {H_M, 4, "x: 768 bytes; expected 1024"},    /* every array's size follows M */
        {H_N, 64, "weight"},
        {H_WEIGHT_REF_LEN, 3, "weight_ref_len 3"},
        {H_WEIGHT_REF_LEN, 2, "weight_ref: 32 bytes; expected 2"},
        {H_X_STORAGE, 3, "x_storage=3"},
        {H_X_FP8_FORMAT, 2, "x_fp8_format=2"},
        {H_WEIGHT_ORDER, 7, "weight_order=7"},
        {H_SCALE_LAYOUT, (uint64_t)-1, "scale_layout"},
        {H_X_STORAGE, 0, "x: storage 0 is unknown"},   /* in range, but not with x present */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_patch_refused(good, n, cases[i].offset, cases[i].value, cases[i].phrase);
    free(good);
}

static void test_damaged_tables_are_refused(void **state)
{
    (void)state;
    size_t n;
    uint8_t *good = valid_image(&n);
    enum { FIELD = 0, PRESENT = 1, OFFSET = 2, BYTES = 3 };
    /* Field indices in case_image.c's order. */
    enum { F_PATH = 0, F_X = 1, F_X_FP8 = 2, F_WEIGHT = 4, F_OUT = 7, F_MODEL = 12,
           F_REF_RECORDED = 16 };
    const uint64_t x_off = get_u64(good, entry_at(F_X, OFFSET));
    const uint64_t fp8_off = get_u64(good, entry_at(F_X_FP8, OFFSET));
    const corruption_t cases[] = {
        {entry_at(F_X, FIELD), F_X_FP8, "table entry 1 is field 2"},
        {entry_at(F_X, PRESENT), 4, "x: present=4"},
        /* bf16 bits to decode: x's fp32 byte count is not theirs; on another field, refused. */
        {entry_at(F_X, PRESENT), 3, "x: 768 bytes; expected 384"},
        {entry_at(F_X_FP8, PRESENT), 3, "x_fp8: present=3 (bf16 bits to decode)"},
        /* In the case file, but the header names no file that holds it. */
        {entry_at(F_X, PRESENT), 2, "x: 768 bytes at offset"},
        {entry_at(F_PATH, PRESENT), 2, "path: a string said to be in the case file"},
        {entry_at(F_X, BYTES), 4, "x: 4 bytes; expected 768"},
        {entry_at(F_X, BYTES), UINT64_MAX, "x:"},
        {entry_at(F_X, OFFSET), x_off + 1, "aligned"},
        {entry_at(F_X_FP8, OFFSET), x_off, "x_fp8"},            /* overlaps x */
        {entry_at(F_X_FP8, OFFSET), fp8_off - 8, "x_fp8"},      /* overlaps x's end */
        {entry_at(F_PATH, OFFSET), 8, "path"},                  /* inside the header */
        {entry_at(F_REF_RECORDED, OFFSET), UINT64_MAX - 7, "ref_recorded"},
        {entry_at(F_MODEL, BYTES), UINT64_MAX, "model"},
        {entry_at(F_MODEL, BYTES), (uint64_t)1 << 40, "model"},
        {entry_at(F_WEIGHT, BYTES), 0, "weight: 0 bytes"},
        {entry_at(F_OUT, PRESENT), 0, "out: absent but"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_patch_refused(good, n, cases[i].offset, cases[i].value, cases[i].phrase);

    /* A NUL inside a string. */
    uint8_t *b = malloc(n);
    assert_non_null(b);
    memcpy(b, good, n);
    b[get_u64(good, entry_at(F_MODEL, OFFSET)) + 2] = 0;
    expect_refused(b, n, "model: a NUL inside");

    /* An absent field the schema requires: no x, no x_fp8. */
    memcpy(b, good, n);
    for (int f = F_X; f <= F_X_FP8; f++) {
        set_u64(b, entry_at(f, PRESENT), 0);
        set_u64(b, entry_at(f, OFFSET), 0);
        set_u64(b, entry_at(f, BYTES), 0);
    }
    expect_refused(b, n, NULL);
    free(b);
    free(good);
}

/* Cut short anywhere, the image is refused; nothing is allocated that the
 * file could not back (ASan would see a huge allocation fail). */
static void test_truncated_images_are_refused(void **state)
{
    (void)state;
    size_t n;
    uint8_t *good = valid_image(&n);
    for (size_t len = 0; len < n; len += (len < 1024 ? 1 : 97))
        expect_refused(good, len, NULL);
    free(good);
}

/* Random damage: refused cleanly, or read as a case that passes the
 * schema's rules.  Never a crash (run under the sanitizers in CI). */
static void test_random_damage_never_crashes(void **state)
{
    (void)state;
    size_t n;
    uint8_t *good = valid_image(&n);
    uint8_t *b = malloc(n);
    assert_non_null(b);
    test_rng_t r = {97};
    int refused = 0, accepted = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(b, good, n);
        /* Mostly the header and table, where the damage matters. */
        const size_t region = iter % 3 ? (size_t)H_END + FIELD_COUNT * 32 : n;
        const int flips = 1 + (int)(test_rng_u64(&r) % 4);
        for (int k = 0; k < flips; k++) {
            const size_t at = (size_t)(test_rng_u64(&r) % region);
            if (test_rng_u64(&r) % 2)
                b[at] ^= (uint8_t)(1u << (test_rng_u64(&r) % 8));
            else
                b[at] = (uint8_t)test_rng_u64(&r);
        }
        int fd = fd_with(b, n);
        case_t c;
        kr_error_t err = {{0}};
        if (case_image_read(fd, &c, CASE_IMAGE_KEEP_SOURCE, "fuzz", NULL, &err) == 0) {
            accepted++;
            assert_int_equal(case_validate(&c, "fuzz", &err), 0);
            case_free(&c);
        } else {
            refused++;
            assert_non_null(strstr(err.msg, "fuzz: case image"));
        }
        close(fd);
    }
    assert_true(refused > 1000);
    (void)accepted;     /* flips in the data, or in bits no check reads (padding of enums) */
    free(b);
    free(good);
}

static void test_anonymous_file(void **state)
{
    (void)state;
    int fd = image_fd();
    assert_true(fd > 2);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(file_size(fd), 0);
    close(fd);
}

KR_TEST_MAIN(
    test_every_field_round_trips, test_minimal_case_round_trips, test_sample_file_round_trips,
    test_consuming_frees_both_sides, test_writer_refuses_an_invalid_case,
    test_damaged_headers_are_refused, test_damaged_tables_are_refused,
    test_truncated_images_are_refused, test_random_damage_never_crashes, test_anonymous_file);
