/* case_load_safe (harness/case/case_load.h), which reads a case in another
 * process and hands it back as a case image: it gives what an in-process
 * read gives, names the right file when one crashes libhdf5 among good
 * ones, refuses a case file changed since it was read, and checks the
 * arrays' ranges in the file before mapping them.  The image itself:
 * test_case_image.c. */
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

/* ------------------------------------------------ the safe read (case_load.h) */

/* The reading process hands back exactly what an in-process read gives,
 * for HDF5 cases and a torch dump (whose ref_recorded and weight_ref only
 * the image carries back unchanged). */
static void test_safe_read_matches_in_process(void **state)
{
    (void)state;
    static const char *files[] = {
        KREPLAY_SOURCE_DIR "/cases/samples/gdn_in_proj_ba_N48_K5120_M17.h5",
        KREPLAY_SOURCE_DIR "/cases/samples/gdn_out_proj_slice_N512_K3072_M17_nanhead.h5",
        KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5",
        KREPLAY_SOURCE_DIR "/cases/samples/prefill_N256_K2048_M300_kn_wperm.h5",
        KREPLAY_SOURCE_DIR "/tests/fixtures/pt/dump.pt",
        KREPLAY_SOURCE_DIR "/tests/fixtures/pt/dump_noncontig.pt",
    };
    for (int round = 0; round < 2; round++) {     /* a fresh worker, then a warm one */
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            case_t direct, safe;
            kr_error_t err = {{0}};
            if (case_load(files[i], &direct, NULL, &err))
                fail_msg("%s", err.msg);
            if (case_load_safe(files[i], &safe, NULL, 10.0, &err))
                fail_msg("%s", err.msg);
            assert_cases_equal(&direct, &safe);
            case_free(&direct);
            case_free(&safe);
        }
    }
    /* The .pt options travel to the reading process too. */
    case_load_options_t o = {.weight_order_set = 1, .weight_order = WEIGHT_ORDER_FRAGMENT};
    case_t c;
    kr_error_t err = {{0}};
    if (case_load_safe(KREPLAY_SOURCE_DIR "/tests/fixtures/pt/dump.pt", &c, &o, 10.0, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.weight_order, WEIGHT_ORDER_FRAGMENT);
    case_free(&c);
}

/* A file that crashes libhdf5 between good ones: one line naming it, and
 * the reads after it are unaffected.  So is a file that is merely invalid. */
static void test_safe_read_blames_the_right_file(void **state)
{
    (void)state;
    const char *good = KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5";
    const char *segv = KREPLAY_SOURCE_DIR "/tests/fixtures/corrupt_h5/segv_global_heap.h5";
    char junk[512];
    test_tmp_path(junk, sizeof junk, "not-a-case.h5");
    assert_int_equal(test_write_text(junk, "not an HDF5 file\n"), 0);
    for (int i = 0; i < 2; i++) {
        case_t c;
        kr_error_t err = {{0}};
        if (case_load_safe(good, &c, NULL, 10.0, &err))
            fail_msg("%s", err.msg);
        case_free(&c);
        assert_int_equal(case_load_safe(segv, &c, NULL, 10.0, &err), -1);
        assert_non_null(strstr(err.msg, segv));
        /* libhdf5 crashes on it, unless the reader's checks refuse it first (which one
         * comes first depends on which attributes the reader looks up before the data) */
        assert_true(strstr(err.msg, "crashed") || strstr(err.msg, "corrupt"));
        assert_null(strchr(err.msg, '\n'));
        assert_null(c.x);
        if (case_load_safe(good, &c, NULL, 10.0, &err))
            fail_msg("after the crash: %s", err.msg);
        case_free(&c);
        assert_int_equal(case_load_safe(junk, &c, NULL, 10.0, &err), -1);
        assert_non_null(strstr(err.msg, junk));
        assert_null(strstr(err.msg, "crashed"));
    }
    unlink(junk);
}

/* An image whose arrays are in the case file is read only from that same
 * file unchanged: not after it was replaced by another file (renamed over
 * it), cut short, or given another modification time (what a write in place
 * leaves, at the file system's timestamp granularity); nor without the
 * file's path. */
static void test_changed_source_file_is_refused(void **state)
{
    (void)state;
    const char *sample = KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5";
    size_t n;
    char *bytes = test_read_file(sample, &n);
    assert_non_null(bytes);
    char path[512], other[512];
    test_tmp_path(path, sizeof path, "image-source");
    test_tmp_path(other, sizeof other, "image-source-new");
    enum { REPLACED, TRUNCATED, TOUCHED, NO_PATH, UNCHANGED, HOW_COUNT };
    for (int how = 0; how < HOW_COUNT; how++) {
        FILE *fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(bytes, 1, n, fp), n);
        fclose(fp);
        case_t c, back;
        kr_error_t err = {{0}};
        if (case_load(path, &c, NULL, &err))
            fail_msg("%s", err.msg);
        assert_false(case_owns(&c, c.weight));
        int fd = image_fd();
        assert_int_equal(case_image_write(fd, &c, CASE_IMAGE_KEEP_SOURCE, &err), 0);
        case_free(&c);
        if (how == REPLACED) {
            fp = fopen(other, "wb");
            assert_non_null(fp);
            assert_int_equal(fwrite(bytes, 1, n, fp), n);
            fclose(fp);
            assert_int_equal(rename(other, path), 0);
        } else if (how == TRUNCATED) {
            assert_int_equal(truncate(path, (off_t)(n / 2)), 0);
        } else if (how == TOUCHED) {
            struct timespec t[2] = {{0, UTIME_OMIT}, {12345, 0}};
            assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
        }
        const int st = case_image_read(fd, &back, CASE_IMAGE_KEEP_SOURCE, path,
                                       how == NO_PATH ? NULL : path, &err);
        close(fd);
        if (how == UNCHANGED) {
            if (st != 0)
                fail_msg("%s", err.msg);
            case_free(&back);
            continue;
        }
        if (st != -1)
            fail_msg("case %d: an image of a changed file was read", how);
        const char *phrase = how == NO_PATH ? "no file named to map" : "changed while it was being read";
        if (!strstr(err.msg, phrase))
            fail_msg("case %d: \"%s\" does not say \"%s\"", how, err.msg, phrase);
    }
    unlink(path);
    free(bytes);
}

/* The arrays' places in the case file come from the reading process and are
 * checked like the rest: a range past the file's end, or misaligned for its
 * elements, is refused before anything is mapped. */
static void test_source_ranges_are_checked(void **state)
{
    (void)state;
    const char *path = KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5";
    case_t c;
    kr_error_t err = {{0}};
    if (case_read_for_image(path, &c, &err))
        fail_msg("%s", err.msg);
    int fd = image_fd();
    assert_int_equal(case_image_write(fd, &c, CASE_IMAGE_KEEP_SOURCE, &err), 0);
    case_free(&c);
    size_t n;
    uint8_t *good = image_bytes(fd, &n);
    close(fd);
    enum { F_WEIGHT = 4, PRESENT = 1, OFFSET = 2 };
    assert_int_equal(get_u64(good, entry_at(F_WEIGHT, PRESENT)), 2);
    const uint64_t size = get_u64(good, H_SOURCE_SIZE);
    const struct { uint64_t offset; const char *phrase; } bad[] = {
        {size - 8, "weight: 262144 bytes at offset"},
        {UINT64_MAX - 7, "of the case file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *b = malloc(n);
        assert_non_null(b);
        memcpy(b, good, n);
        set_u64(b, entry_at(F_WEIGHT, OFFSET), bad[i].offset);
        int bfd = fd_with(b, n);
        case_t back;
        assert_int_equal(case_image_read(bfd, &back, CASE_IMAGE_KEEP_SOURCE, path, path, &err), -1);
        close(bfd);
        if (!strstr(err.msg, bad[i].phrase))
            fail_msg("\"%s\" does not say \"%s\"", err.msg, bad[i].phrase);
        free(b);
    }
    /* x_scale (float32) at an odd offset: misaligned for its elements. */
    enum { F_X_SCALE = 3 };
    uint8_t *b = malloc(n);
    assert_non_null(b);
    memcpy(b, good, n);
    assert_int_equal(get_u64(b, entry_at(F_X_SCALE, PRESENT)), 2);
    set_u64(b, entry_at(F_X_SCALE, OFFSET), get_u64(b, entry_at(F_X_SCALE, OFFSET)) + 2);
    int bfd = fd_with(b, n);
    case_t back;
    assert_int_equal(case_image_read(bfd, &back, CASE_IMAGE_KEEP_SOURCE, path, path, &err), -1);
    close(bfd);
    assert_non_null(strstr(err.msg, "aligned to its 4-byte elements"));
    free(b);
    free(good);
}

KR_TEST_MAIN(
    test_safe_read_matches_in_process, test_safe_read_blames_the_right_file,
    test_changed_source_file_is_refused, test_source_ranges_are_checked);
