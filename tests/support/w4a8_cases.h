/* W4A8 test cases for the W4A8 model tests (test_models_w4a8.c,
 * test_models_w4a8_variants.c): the models under test, a case of e2m1
 * codes, e8m0 scales and fp8 activations (random, or set by hand), a
 * model run on it, and the oracles both use -- the e4m3 rounding of the
 * pre-shifted weight and the split-K order in plain scalar C, written from
 * the spec apart from the models' code. */
#ifndef KR_W4A8_CASES_H
#define KR_W4A8_CASES_H
#include <stdint.h>

#include "registry.h"

extern const kernel_desc_t kernel_w4a8_folded;
extern const kernel_desc_t kernel_w4a8_folded_wperm;
extern const kernel_desc_t kernel_w4a8_atiled;
extern const kernel_desc_t kernel_w4a8_decode;
extern const kernel_desc_t kernel_w4a8_r4d;
extern const kernel_desc_t kernel_w4a8_partitioned;
extern const kernel_desc_t kernel_w4a8_perblock;

/* RNE of v onto the e4m3fn grid (subnormal step 2^-9, 3 fraction bits),
 * saturating at +-448: the folded pre-shift, computed in double. */
double spec_e4m3_round(double v);

typedef struct {
    int64_t M, N, K;
    uint8_t *wcodes;        /* [N][K] e2m1 codes, one per byte */
    uint8_t *packed;        /* [N][K/2] */
    uint8_t *scales;        /* [N][K/32] e8m0 */
    uint8_t *x;             /* [M][K] e4m3fn codes */
    float *xs;              /* [M] */
    uint8_t *wref;          /* [N] or NULL */
    uint8_t *parts;         /* [3][M][K] or NULL */
    float *parts_scale;     /* [3][M] */
} tcase_t;

/* A case of M x N x K with every array zeroed (no wref, no parts). */
void tcase_alloc(tcase_t *c, int64_t M, int64_t N, int64_t K);

/* packed from wcodes, two codes a byte, the lower K index in the low nibble. */
void tcase_pack(tcase_t *c);

/* Frees every array and zeroes *c. */
void tcase_free(tcase_t *c);

/* Random case: per row a top exponent in [110, 140]; every block's exponent is
 * top - U{0..spread}, block 0 pinned to top so the row max is known. */
void tcase_random(tcase_t *c, uint64_t seed, int64_t M, int64_t N, int64_t K, int spread);

/* Adds 3 different activation copies (copy 0 is also the recorded x_fp8). */
void tcase_add_parts(tcase_t *c, uint64_t seed);

/* The kernel inputs of c (its parts when it has them). */
kernel_inputs_t tcase_inputs(const tcase_t *c);

/* Runs a model; returns its rc.  note (256 bytes) gets the note, or the error. */
int run_model_in(const kernel_desc_t *k, const kernel_inputs_t *in, int decode_splits,
                 const int64_t bounds[2], uint16_t *out, char *note);

/* The output of k on c (malloc'd); fails the test when k fails.  note as
 * run_model_in's, or NULL. */
uint16_t *run_model(const kernel_desc_t *k, const tcase_t *c, int decode_splits, char *note);

/* Row n's reference exponent: its wref, else its largest block scale. */
int row_ref(const tcase_t *c, int64_t n);

/* The split-K order in plain scalar C, from the spec: w8 by spec_e4m3_round,
 * partial[s] over SK equal K ranges ascending, acc = partial[0] + ... in
 * split order, epilogue x_scale * 2^(ref-127) first.  sk = 1 is folded. */
uint16_t *oracle_split(const tcase_t *c, int sk);

/* a and b equal in each of count elements; fails naming the first that
 * differs. */
void assert_same_bits(const uint16_t *a, const uint16_t *b, int64_t count, const char *what);

#endif
