/* Case files for the case reader's and writer's tests (test_case_io.c,
 * test_case_io_refusals.c): a case with random non-zero contents in every
 * array a spec asks for, compared field by field after a round trip; a
 * file's bytes read and written whole; the writer's temporaries counted;
 * and the reader's refusal of a file, which must leave the case empty and
 * say one line naming the file. */
#ifndef KR_CASE_FILES_H
#define KR_CASE_FILES_H
#include <stddef.h>
#include <stdint.h>

#include "case_io.h"

typedef struct {
    int64_t M, N, K;
    scale_layout_t layout;
    x_storage_t x_storage;      /* X_STORED_NONE: no x */
    int with_fp8;
    fp8_format_t fp8_format;
    weight_order_t order;
    int64_t ref_len;            /* 0: no weight_ref */
    int with_outputs;
    int with_prov;
    int with_bf16_weight;       /* weight_bf16 [N, K] */
    int no_mxfp4;               /* no weight / weight_scale (needs with_bf16_weight) */
} case_spec_t;

/* A case with random non-zero contents in every array the spec asks for. */
void make_case(case_t *c, const case_spec_t *s, uint64_t seed);

/* Every field of a equals that of b, arrays bit for bit. */
void assert_case_equal(const case_t *a, const case_t *b);

/* Every byte of *c is zero (what case_free and a refused read leave). */
void assert_case_empty(const case_t *c);

/* The whole of path (malloc'd, one byte more than *len). */
char *slurp(const char *path, size_t *len);

/* LEN bytes of BUF written as path, replacing it. */
void spit(const char *path, const void *buf, size_t len);

/* Number of entries in path's directory whose name starts with
 * "<basename(path)>.tmp." (the writer's temporary files). */
int count_tmp_files(const char *path);

/* Reads path, expects failure: -1, *c left empty, one line that names the
 * file and contains each non-NULL needle. */
void expect_read_fail(const char *path, const char *n1, const char *n2, const char *n3);

/* LEN bytes of BUF written as PATH, which case_read must then refuse
 * (expect_read_fail). */
void expect_bytes_refused(const char *path, const void *buf, size_t len, const char *n1,
                          const char *n2, const char *n3);

/* The case of spec s (seed) written to a fresh file named after tag, read
 * back equal, no temporary left, and freed to empty. */
void round_trip(const case_spec_t *s, uint64_t seed, const char *tag);

/* A valid case written by the writer, big enough that half of it cuts data. */
void write_valid(const char *path, uint64_t seed);

#endif
