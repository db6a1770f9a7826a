/* Error metrics between an output and a reference.
 *
 * Outputs are compared in fp64.  Non-finite elements never enter the
 * norms: they are counted, split by side (input / output / reference) and by
 * sign, and the finite-only metrics are computed over elements finite on both
 * sides.  NaN compares as NaN, never by bits. */
#ifndef KR_METRICS_H
#define KR_METRICS_H

#include <stdint.h>

/* bf16 ULP-distance histogram bins: 0, 1, 2, 3-4, 5-8, 9-16, ..., 2^14+1-2^15,
 * > 2^15, and one bin for pairs where either side is NaN or an Inf differs.
 * Bin j in 1..16 holds distances d in (2^(j-2), 2^(j-1)] (bin 1 = {1},
 * bin 2 = {2}, bin 3 = 3-4, ..., bin 16 = 16385-32768), i.e.
 * j = ceil(log2 d) + 1; bin 17 holds d > 2^15 (the largest finite bf16
 * distance, -max to +max, is 65278). */
enum {
    ULP_BIN_0 = 0,
    ULP_BIN_1,
    ULP_BIN_2,
    ULP_BIN_3_4,          /* then bin j = (2^(j-2), 2^(j-1)]: 4 = 5-8, 5 = 9-16, ... */
    ULP_BIN_LAST_FINITE = 17, /* (2^15, inf) */
    ULP_BIN_NONFINITE = 18,
    ULP_BIN_COUNT = 19
};

/* Human label of a bin ("0", "1", "2", "3-4", "5-8", ..., ">32768", "nonfinite"). */
const char *ulp_bin_label(int bin);
/* Bin of a finite distance d >= 0. */
int ulp_bin_of(uint64_t d);

typedef struct {
    int64_t nan, pos_inf, neg_inf;
} nonfinite_t;

typedef struct {
    int64_t count;          /* elements compared (M * N) */
    int64_t finite_count;   /* elements finite on both sides */
    double rel_fro;         /* ||out - ref||_F / ||ref||_F over finite pairs (NaN if ||ref|| = 0) */
    double nmse;            /* ||out - ref||^2 / ||ref||^2 */
    double max_abs;         /* max |out - ref| */
    int64_t max_abs_index;  /* flat index of it, -1 if none */
    double worst_row_rel;   /* max over rows of the row's relative Frobenius error */
    int64_t worst_row;      /* -1 if none */
    double cosine;          /* <out, ref> / (|out| |ref|) */
    double mag_ratio;       /* ||out||_F / ||ref||_F */
    nonfinite_t out_nf;     /* non-finite elements of the output */
    nonfinite_t ref_nf;     /* ... of the reference */
    double abs_fro;         /* ||out - ref||_F over finite pairs: the error where ||ref|| = 0 */
    /* Rows judged apart (their inputs are non-finite): they enter only the
     * non-finite counts above, never a norm, maximum or row statistic. */
    int64_t rows_apart;
    nonfinite_t out_nf_apart; /* the output's non-finite elements in those rows */
    nonfinite_t ref_nf_apart; /* ... the reference's */
} metrics_t;

/* The fp64 sums over finite pairs that metrics_t's norms come from: what
 * metrics of consecutive row blocks need to merge (metrics_merge_rows). */
typedef struct {
    double d2, r2, o2, o_r;   /* sum (o-r)^2, r^2, o^2, o*r */
} metrics_sums_t;

/* out and ref are fp32 arrays of M*N (an output in bf16 is decoded first).
 * Single pass, fp64 sums.  A pair (o, r) is "finite" if both are finite; only
 * finite pairs enter any norm, max or row statistic.  Conventions:
 *  - rel_fro, nmse, mag_ratio: NaN when the finite ref norm is 0.
 *  - cosine: NaN when either finite norm is 0.
 *  - max_abs: NaN and max_abs_index -1 when there is no finite pair; ties go
 *    to the lowest flat index.
 *  - worst_row_rel: per row over its finite pairs, sqrt(sum d^2 / sum r^2);
 *    a row with ref norm 0 is skipped if its diff norm is 0 too, and counts
 *    as +INFINITY otherwise; ties go to the lowest row; NaN and worst_row -1
 *    when every row is skipped.
 *  - out_nf / ref_nf: NaN, +Inf, -Inf over ALL elements of each side. */
void metrics_compute(const float *out, const float *ref, int64_t M, int64_t N, metrics_t *m);
/* Same, and the sums behind it (sums may be NULL). */
void metrics_compute_sums(const float *out, const float *ref, int64_t M, int64_t N, metrics_t *m,
                          metrics_sums_t *sums);
/* Same for an output in bf16 bits, decoded exactly on the fly: identical
 * results to decoding it to fp32 first, without the fp32 copy. */
void metrics_compute_bf16(const uint16_t *out_bits, const float *ref, int64_t M, int64_t N,
                          metrics_t *m, metrics_sums_t *sums);
/* The same with rows judged apart: apart[i] != 0 (apart may be NULL) keeps
 * row i out of every norm, maximum and row statistic and out of
 * finite_count; its non-finite elements are counted in out_nf / ref_nf and
 * in out_nf_apart / ref_nf_apart, and rows_apart counts such rows. */
void metrics_compute_apart(const float *out, const uint16_t *out_bits, const float *ref, int64_t M,
                           int64_t N, const unsigned char *apart, metrics_t *m, metrics_sums_t *sums);

/* Folds the metrics of a block of rows into acc, the metrics of every row
 * above the block: `part` covers rows [row_offset, row_offset + rows) of an
 * output N columns wide.  Counts, sums and histograms add; max_abs and
 * worst_row keep the first occurrence (acc's rows come first), with the
 * block's indices moved to whole-matrix ones; the derived metrics are
 * recomputed from the merged sums with the conventions of metrics_compute.
 * acc and acc_sums must start from metrics_merge_init() (an empty matrix).  The sums are
 * the same fp64 sums in another association, so the merged metrics equal
 * metrics_compute over the whole matrix up to fp64 rounding (~1e-16
 * relative); counts, indices and maxima are exact. */
void metrics_merge_init(metrics_t *acc, metrics_sums_t *acc_sums);
void metrics_merge_rows(metrics_t *acc, metrics_sums_t *acc_sums, const metrics_t *part,
                        const metrics_sums_t *part_sums, int64_t row_offset, int64_t N);

/* Non-finite counts of any fp32 array (used for the input side). */
void nonfinite_count(const float *x, int64_t n, nonfinite_t *nf);

typedef struct {
    int64_t count;
    int64_t identical;      /* bit-identical, or both NaN (NaN == NaN here, whatever the payload) */
    double identical_frac;
    uint64_t max_ulp;       /* over finite pairs */
    int64_t bins[ULP_BIN_COUNT];
    /* Signed error against the reference, over finite pairs that differ:
     * toward_zero when out lies between ref and zero, or past zero on the
     * other side (a move toward zero in bf16's order), away_zero otherwise
     * (farther from zero on ref's side; a zero reference counts as away).
     * signed_ulp_sum: sum of the ULP
     * distances, negative toward zero.  A correctly rounding kernel has no
     * preference; truncation puts every differing element toward zero. */
    int64_t toward_zero, away_zero;
    int64_t signed_ulp_sum;
    /* Against an fp32 reference only (ulp_stats_bf16_vs_f32*): which bf16
     * rounding of the reference the output reproduces, counted over the
     * finite pairs where the candidate roundings do not all agree
     * (round_decided); round_match[mode] of them equal that mode's result. */
    int64_t round_decided;
    int64_t round_match[4];   /* indexed by round_mode_t */
} ulp_stats_t;

/* The bf16 roundings of an fp32 value a kernel may apply. */
typedef enum {
    ROUND_NEAREST_EVEN = 0,   /* IEEE round to nearest, ties to even: the correct one */
    ROUND_TOWARD_ZERO,        /* truncation: drop the low 16 bits */
    ROUND_HALF_AWAY,          /* to nearest, ties away from zero */
    ROUND_DOUBLE,             /* to nearest even at fp16 precision (10 bits) first, then to bf16 */
    ROUND_MODE_COUNT
} round_mode_t;

/* "nearest-even", "truncation", "half-away", "double (via 10 bits)". */
const char *round_mode_name(round_mode_t mode);
/* A column label per mode ("nearest_even", "truncation", "half_away", "double"). */
const char *round_mode_label(int mode);
/* bf16 bits of a finite fp32 value rounded by mode (an overflow of the
 * magnitude rounds to Inf as bf16_encode does). */
uint16_t bf16_round_mode(float x, round_mode_t mode);
/* The mode whose matches are most among the deciding elements, or -1 when
 * none decided. */
int ulp_round_fit(const ulp_stats_t *s);

/* ULP distance between two bf16 values in the total order of finite bf16
 * (so +0 and -0 are 0 apart and the distance crosses zero correctly).
 * Returns UINT64_MAX if either is NaN, or if exactly one is infinite or the
 * infinities differ. */
uint64_t bf16_ulp_distance(uint16_t a, uint16_t b);

/* Same against an fp32 reference, rounded to bf16 (bf16_encode) on the fly. */
void ulp_stats_bf16_vs_f32(const uint16_t *a, const float *ref, int64_t n, ulp_stats_t *s);
/* Same over M rows of N, skipping rows with apart[i] != 0 (apart may be NULL). */
void ulp_stats_bf16_vs_f32_apart(const uint16_t *a, const float *ref, int64_t M, int64_t N,
                                 const unsigned char *apart, ulp_stats_t *s);

/* Adds the histogram of a block of elements to acc (start acc zeroed). */
void ulp_stats_merge(ulp_stats_t *acc, const ulp_stats_t *part);

/* Histogram over two bf16 arrays of n elements.  Per pair:
 *  - both NaN (any payloads, any signs): identical, bin 0;
 *  - otherwise identical iff the bits are equal (so +0 vs -0 is NOT
 *    identical, though its distance is 0 and it lands in bin 0);
 *  - distance UINT64_MAX (one NaN, or an Inf mismatch): ULP_BIN_NONFINITE;
 *  - else bin ulp_bin_of(d), and d enters max_ulp.
 * identical_frac = identical / n (NaN when n = 0). */
void ulp_stats_bf16(const uint16_t *a, const uint16_t *b, int64_t n, ulp_stats_t *s);

#endif
