/* Error metrics (see metrics.h for the definitions).
 *
 * Everything is accumulated in fp64 over out and ref: the largest outputs
 * (4096 x 17408) are 71M elements, and an fp32 square summed in fp64 loses
 * nothing that matters (relative error ~ n * 2^-53).  Rows are summed on
 * all threads and folded in row order, so the result is that of one
 * sequential pass, bit for bit, whatever the thread count. */
#include "metrics.h"

#include "formats.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- non-finite counting ---- */

/* Bit tests rather than isnan/isinf: the classification must not depend on
 * the compiler's floating-point flags, and it is cheaper in the hot loop. */
static inline uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline int f32_is_finite_bits(uint32_t u)
{
    return (u & 0x7F800000u) != 0x7F800000u;
}

static inline void nf_add(nonfinite_t *nf, uint32_t u)
{
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        nf->nan++;
    else if (u == 0x7F800000u)
        nf->pos_inf++;
    else if (u == 0xFF800000u)
        nf->neg_inf++;
}

void nonfinite_count(const float *x, int64_t n, nonfinite_t *nf)
{
    nf->nan = nf->pos_inf = nf->neg_inf = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = bits_of(x[i]);
        if (!f32_is_finite_bits(u))
            nf_add(nf, u);
    }
}

/* ---- norms ---- */

/* The metrics that follow from the sums, counts and extremes (shared by
 * one pass and by merged row blocks, so both follow one set of rules).
 * On entry max_abs / worst_row_rel hold raw values, meaningful only when
 * their index is >= 0. */
static void metrics_derive(metrics_t *m, const metrics_sums_t *sums)
{
    if (m->max_abs_index < 0)
        m->max_abs = NAN; /* no finite pair: nothing to measure */
    if (m->worst_row < 0)
        m->worst_row_rel = NAN;
    const double s_d2 = sums->d2, s_r2 = sums->r2, s_o2 = sums->o2, s_or = sums->o_r;
    const double nr = sqrt(s_r2), no = sqrt(s_o2);
    m->abs_fro = m->finite_count > 0 ? sqrt(s_d2) : NAN;
    if (s_r2 > 0.0) {
        m->rel_fro = sqrt(s_d2) / nr;
        m->nmse = s_d2 / s_r2;
        m->mag_ratio = no / nr;
    } else {
        m->rel_fro = m->nmse = m->mag_ratio = NAN;
    }
    /* Product of the square roots, not the root of the product: keeps the
     * intermediate in range for any fp32 inputs. */
    m->cosine = (s_r2 > 0.0 && s_o2 > 0.0) ? s_or / (no * nr) : NAN;
}

void metrics_compute(const float *out, const float *ref, int64_t M, int64_t N, metrics_t *m)
{
    metrics_compute_sums(out, ref, M, N, m, NULL);
}

/* Running state of one pass (rows in order). */
typedef struct {
    metrics_sums_t sums;
    double max_abs;    /* below every |d| at the start, so the first finite pair sets it */
    int64_t max_idx;
    double worst;      /* worst row rel so far; rels are >= 0 (or +inf) */
    int64_t worst_row;
    int64_t finite;
    nonfinite_t out_nf, ref_nf;
} metrics_pass_t;

static inline float bf16_bits_to_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16; /* exact: bf16 is the top half of fp32 */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Row i of the output, either fp32 (of) or bf16 bits (ob: decoded on the
 * fly, so no fp32 copy of a whole output is needed), against ref row r.
 * Inlined at two call sites, each with one of of/ob NULL, so each loop is
 * compiled for its own kind. */
#define OUT(j) (ob ? bf16_bits_to_f32(ob[j]) : of[j])
/* What one row contributes, computed on its own (rows in parallel) and
 * folded into the pass's state in row order (metrics_fold_row), so the sums
 * and the first-occurrence extremes are those of one sequential pass. */
typedef struct {
    metrics_sums_t sums;
    double max_abs;    /* -1: no finite pair */
    int64_t max_j;
    int64_t finite;
    nonfinite_t out_nf, ref_nf;
    int apart;         /* judged apart: only out_nf / ref_nf hold anything */
} metrics_row_t;

static inline __attribute__((always_inline)) void
metrics_row(const float *of, const uint16_t *ob, const float *r, int64_t N, metrics_row_t *row)
{
    /* LANES independent partial sums per quantity break the fp64 add
     * latency chain (measured ~1 ns/element on 71M elements, against
     * ~2.4 with one accumulator and a per-element max branch); element j
     * always goes to lane j % LANES, so results are deterministic. */
    enum { LANES = 4 };
    double ad2[LANES] = {0}, ar2[LANES] = {0}, ao2[LANES] = {0}, aor[LANES] = {0};
    double rmax = -1.0;
    int64_t rmax_j = -1, rfinite = 0;
    int64_t j0 = 0;
    /* Fast path: whole groups of LANES elements that are all finite on
     * both sides. */
    for (; j0 + LANES <= N; j0 += LANES) {
        uint32_t any_bad = 0;
        for (int l = 0; l < LANES; l++)
            any_bad |= (uint32_t)!f32_is_finite_bits(bits_of(OUT(j0 + l))) |
                       (uint32_t)!f32_is_finite_bits(bits_of(r[j0 + l]));
        if (any_bad)
            break; /* finish this row on the careful path below */
        double ad[LANES];
        for (int l = 0; l < LANES; l++) {
            const double od = OUT(j0 + l), rv = r[j0 + l];
            const double d = od - rv;
            ad2[l] += d * d;
            ar2[l] += rv * rv;
            ao2[l] += od * od;
            aor[l] += od * rv;
            ad[l] = fabs(d);
        }
        /* Branch-free group max; the index is looked up only when the
         * row max improves, which is rare (a per-element data-dependent
         * branch here mispredicts about half the time). */
        const double m01 = ad[0] > ad[1] ? ad[0] : ad[1]; /* finite: no fmax NaN rules needed */
        const double m23 = ad[2] > ad[3] ? ad[2] : ad[3];
        const double gmax = m01 > m23 ? m01 : m23;
        if (gmax > rmax) { /* strict: the first occurrence wins ties */
            int gl = 0;
            while (ad[gl] != gmax)
                gl++;
            rmax = gmax;
            rmax_j = j0 + gl;
        }
        rfinite += LANES;
    }
    /* Careful path: the tail of the row, or everything from the first
     * group holding a non-finite element.  Same lane assignment
     * (element j goes to lane j % LANES), so which path ran does not
     * change the sums. */
    for (int64_t j = j0; j < N; j++) {
        const uint32_t uo = bits_of(OUT(j)), ur = bits_of(r[j]);
        if (!f32_is_finite_bits(uo) || !f32_is_finite_bits(ur)) {
            /* A pair can be non-finite on one side only: classify each. */
            nf_add(&row->out_nf, uo);
            nf_add(&row->ref_nf, ur);
            continue;
        }
        const int l = (int)(j % LANES);
        const double od = OUT(j), rv = r[j];
        const double d = od - rv;
        ad2[l] += d * d;
        ar2[l] += rv * rv;
        ao2[l] += od * od;
        aor[l] += od * rv;
        if (fabs(d) > rmax) {
            rmax = fabs(d);
            rmax_j = j;
        }
        rfinite++;
    }
    row->sums.d2 = (ad2[0] + ad2[1]) + (ad2[2] + ad2[3]);
    row->sums.r2 = (ar2[0] + ar2[1]) + (ar2[2] + ar2[3]);
    row->sums.o2 = (ao2[0] + ao2[1]) + (ao2[2] + ao2[3]);
    row->sums.o_r = (aor[0] + aor[1]) + (aor[2] + aor[3]);
    row->finite = rfinite;
    row->max_abs = rmax;
    row->max_j = rmax_j;
}

static void nf_merge(nonfinite_t *acc, const nonfinite_t *part);

static void sums_add(metrics_sums_t *acc, const metrics_sums_t *part)
{
    acc->d2 += part->d2;
    acc->r2 += part->r2;
    acc->o2 += part->o2;
    acc->o_r += part->o_r;
}

static void metrics_fold_row(metrics_pass_t *st, const metrics_row_t *row, int64_t i, int64_t N)
{
    sums_add(&st->sums, &row->sums);
    st->finite += row->finite;
    nf_merge(&st->out_nf, &row->out_nf);
    nf_merge(&st->ref_nf, &row->ref_nf);
    if (row->max_abs > st->max_abs) { /* strict: the first occurrence wins ties */
        st->max_abs = row->max_abs;
        st->max_idx = i * N + row->max_j;
    }
    /* A row whose reference norm is 0 has no relative error: it is
     * skipped if it also matches exactly, and is +inf otherwise (an
     * output that is nonzero where the reference is exactly zero is
     * infinitely wrong in relative terms, and must not be hidden). */
    double rel;
    if (row->sums.r2 > 0.0)
        rel = sqrt(row->sums.d2) / sqrt(row->sums.r2);
    else if (row->sums.d2 > 0.0)
        rel = INFINITY;
    else
        rel = -1.0;
    if (rel > st->worst) {
        st->worst = rel;
        st->worst_row = i;
    }
}
#undef OUT

/* A row judged apart: only its non-finite elements are counted. */
static void metrics_row_apart(const float *of, const uint16_t *ob, const float *r, int64_t N,
                              metrics_row_t *row)
{
    row->apart = 1;
    for (int64_t j = 0; j < N; j++) {
        const uint32_t uo = ob ? (uint32_t)ob[j] << 16 : bits_of(of[j]), ur = bits_of(r[j]);
        if (!f32_is_finite_bits(uo))
            nf_add(&row->out_nf, uo);
        if (!f32_is_finite_bits(ur))
            nf_add(&row->ref_nf, ur);
    }
}

typedef struct {
    const float *out;
    const uint16_t *out_bits;
    const float *ref;
    int64_t M, N, band_rows;
    const unsigned char *apart;
    metrics_row_t *rows;
} metrics_job_t;

static void metrics_one_row(const metrics_job_t *job, int64_t i, metrics_row_t *row)
{
    const int64_t N = job->N;
    memset(row, 0, sizeof *row);
    row->max_abs = -1.0;
    row->max_j = -1;
    const float *of = job->out_bits ? NULL : job->out + i * N;
    const uint16_t *ob = job->out_bits ? job->out_bits + i * N : NULL;
    if (job->apart && job->apart[i])
        metrics_row_apart(of, ob, job->ref + i * N, N, row);
    else if (ob)
        metrics_row(NULL, ob, job->ref + i * N, N, row);
    else
        metrics_row(of, NULL, job->ref + i * N, N, row);
}

static void metrics_band(void *ctx, int64_t band)
{
    const metrics_job_t *job = ctx;
    const int64_t i0 = band * job->band_rows;
    const int64_t i1 = i0 + job->band_rows < job->M ? i0 + job->band_rows : job->M;
    for (int64_t i = i0; i < i1; i++)
        metrics_one_row(job, i, &job->rows[i]);
}

/* Rows per task: about 64K elements, so a task pays for the hand-off. */
static int64_t metrics_band_rows(int64_t N)
{
    const int64_t rows = ((int64_t)1 << 16) / (N > 0 ? N : 1);
    return rows < 1 ? 1 : rows;
}

static void metrics_pass(const float *out, const uint16_t *out_bits, const float *ref, int64_t M,
                         int64_t N, const unsigned char *apart, metrics_t *m, metrics_sums_t *sums)
{
    memset(m, 0, sizeof *m);
    m->count = (M > 0 && N > 0) ? M * N : 0;
    metrics_pass_t st = {.max_abs = -1.0, .max_idx = -1, .worst = -1.0, .worst_row = -1};
    const int64_t rows = m->count ? M : 0;
    /* Rows in parallel into one record each, then folded in row order;
     * without memory for the records (M x ~100 bytes), one row at a time. */
    metrics_row_t one, *recs = rows > 1 ? malloc((size_t)rows * sizeof *recs) : NULL;
    metrics_job_t job = {.out = out, .out_bits = out_bits, .ref = ref, .M = rows, .N = N,
                         .band_rows = metrics_band_rows(N), .apart = apart, .rows = recs};
    if (recs) {
        const int64_t bands = (rows + job.band_rows - 1) / job.band_rows;
        parallel_for_cost(bands, 0, 1.5 * (double)(job.band_rows * N), metrics_band, &job);
    }
    for (int64_t i = 0; i < rows; i++) {
        const metrics_row_t *row = recs ? &recs[i] : &one;
        if (!recs)
            metrics_one_row(&job, i, &one);
        if (row->apart) {
            nf_merge(&m->out_nf_apart, &row->out_nf);
            nf_merge(&m->ref_nf_apart, &row->ref_nf);
            m->rows_apart++;
        } else {
            metrics_fold_row(&st, row, i, N);
        }
    }
    free(recs);
    m->out_nf = st.out_nf;
    m->ref_nf = st.ref_nf;
    nf_merge(&m->out_nf, &m->out_nf_apart);
    nf_merge(&m->ref_nf, &m->ref_nf_apart);
    m->finite_count = st.finite;
    m->max_abs = st.max_idx >= 0 ? st.max_abs : -1.0;
    m->max_abs_index = st.max_idx;
    m->worst_row_rel = st.worst_row >= 0 ? st.worst : -1.0;
    m->worst_row = st.worst_row;
    metrics_derive(m, &st.sums);
    if (sums)
        *sums = st.sums;
}

void metrics_compute_sums(const float *out, const float *ref, int64_t M, int64_t N, metrics_t *m,
                          metrics_sums_t *sums)
{
    metrics_pass(out, NULL, ref, M, N, NULL, m, sums);
}

void metrics_compute_bf16(const uint16_t *out_bits, const float *ref, int64_t M, int64_t N,
                          metrics_t *m, metrics_sums_t *sums)
{
    metrics_pass(NULL, out_bits, ref, M, N, NULL, m, sums);
}

void metrics_compute_apart(const float *out, const uint16_t *out_bits, const float *ref, int64_t M,
                           int64_t N, const unsigned char *apart, metrics_t *m, metrics_sums_t *sums)
{
    metrics_pass(out_bits ? NULL : out, out_bits, ref, M, N, apart, m, sums);
}

void metrics_merge_init(metrics_t *acc, metrics_sums_t *acc_sums)
{
    memset(acc, 0, sizeof *acc);
    memset(acc_sums, 0, sizeof *acc_sums);
    acc->max_abs_index = -1;
    acc->worst_row = -1;
    metrics_derive(acc, acc_sums);
}

static void nf_merge(nonfinite_t *acc, const nonfinite_t *part)
{
    acc->nan += part->nan;
    acc->pos_inf += part->pos_inf;
    acc->neg_inf += part->neg_inf;
}

void metrics_merge_rows(metrics_t *acc, metrics_sums_t *acc_sums, const metrics_t *part,
                        const metrics_sums_t *part_sums, int64_t row_offset, int64_t N)
{
    acc->count += part->count;
    acc->finite_count += part->finite_count;
    sums_add(acc_sums, part_sums);
    nf_merge(&acc->out_nf, &part->out_nf);
    nf_merge(&acc->ref_nf, &part->ref_nf);
    nf_merge(&acc->out_nf_apart, &part->out_nf_apart);
    nf_merge(&acc->ref_nf_apart, &part->ref_nf_apart);
    acc->rows_apart += part->rows_apart;
    /* Strictly greater: on a tie the earlier rows (acc) keep the index, as
     * one pass over the whole matrix would. */
    if (part->max_abs_index >= 0 && (acc->max_abs_index < 0 || part->max_abs > acc->max_abs)) {
        acc->max_abs = part->max_abs;
        acc->max_abs_index = part->max_abs_index + row_offset * N;
    }
    if (part->worst_row >= 0 && (acc->worst_row < 0 || part->worst_row_rel > acc->worst_row_rel)) {
        acc->worst_row_rel = part->worst_row_rel;
        acc->worst_row = part->worst_row + row_offset;
    }
    metrics_derive(acc, acc_sums);
}

/* ---- bf16 ULPs ---- */

static const char *const ULP_BIN_LABELS[ULP_BIN_COUNT] = {
    "0",         "1",          "2",           "3-4",         "5-8",
    "9-16",      "17-32",      "33-64",       "65-128",      "129-256",
    "257-512",   "513-1024",   "1025-2048",   "2049-4096",   "4097-8192",
    "8193-16384", "16385-32768", ">32768",    "nonfinite",
};

const char *ulp_bin_label(int bin)
{
    if (bin < 0 || bin >= ULP_BIN_COUNT)
        return "?";
    return ULP_BIN_LABELS[bin];
}

/* Bin j >= 1 holds (2^(j-2), 2^(j-1)], i.e. j = ceil(log2 d) + 1, capped. */
int ulp_bin_of(uint64_t d)
{
    if (d == 0)
        return ULP_BIN_0;
    if (d > (1u << 15))
        return ULP_BIN_LAST_FINITE;
    if (d == 1)
        return ULP_BIN_1;
    /* d in [2, 2^15]: ceil(log2 d) = bit width of (d - 1). */
    const unsigned v = (unsigned)(d - 1);
    return (int)(sizeof v * 8) - __builtin_clz(v) + 1;
}

static inline int bf16_is_nan(uint16_t h) { return (h & 0x7FFF) > 0x7F80; }
static inline int bf16_is_inf(uint16_t h) { return (h & 0x7FFF) == 0x7F80; }

/* Position in the total order of bf16 values, with +0 and -0 both at 0:
 * sign-magnitude to a signed integer.  Monotone in the value because bf16
 * magnitudes order like their bit patterns. */
static inline int32_t bf16_ordinal(uint16_t h)
{
    return (h & 0x8000) ? -(int32_t)(h & 0x7FFF) : (int32_t)h;
}

uint64_t bf16_ulp_distance(uint16_t a, uint16_t b)
{
    if (bf16_is_nan(a) || bf16_is_nan(b))
        return UINT64_MAX;
    if (bf16_is_inf(a) || bf16_is_inf(b))
        /* The ordinal would put Inf one step above the largest finite value;
         * an overflow is not "1 ULP off", so any Inf mismatch is non-finite. */
        return a == b ? 0 : UINT64_MAX;
    int32_t d = bf16_ordinal(a) - bf16_ordinal(b);
    return (uint64_t)(d < 0 ? -d : d);
}

static inline void ulp_stats_add(ulp_stats_t *s, uint16_t x, uint16_t y)
{
    if (x == y && !bf16_is_nan(x)) {
        /* The common case: equal bits, distance 0 (an infinity included). */
        s->identical++;
        s->bins[ULP_BIN_0]++;
        return;
    }
    if (bf16_is_nan(x) && bf16_is_nan(y)) {
        /* NaN compares as NaN: two NaNs agree whatever their payloads. */
        s->identical++;
        s->bins[ULP_BIN_0]++;
        return;
    }
    if (x == y)
        s->identical++;
    const uint64_t d = bf16_ulp_distance(x, y);
    if (d == UINT64_MAX) {
        s->bins[ULP_BIN_NONFINITE]++;
        return;
    }
    if (d > s->max_ulp)
        s->max_ulp = d;
    s->bins[ulp_bin_of(d)]++;
    if (d) {
        const int32_t oy = bf16_ordinal(y), step = bf16_ordinal(x) - oy;
        /* Distance counted away from zero is positive. */
        const int64_t away = oy > 0 ? step : oy < 0 ? -step : (int64_t)d;
        s->toward_zero += away < 0;
        s->away_zero += away > 0;
        s->signed_ulp_sum += away;
    }
}

const char *round_mode_name(round_mode_t mode)
{
    static const char *const names[ROUND_MODE_COUNT] = {"nearest-even", "truncation", "half-away",
                                                        "double (via 10 bits)"};
    return (unsigned)mode < ROUND_MODE_COUNT ? names[mode] : "?";
}

/* The magnitude u (sign cleared) rounded to a multiple of 2^drop, nearest
 * with ties to even. */
static inline uint32_t round_bits_rne(uint32_t u, int drop)
{
    const uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
    return ((u + half - 1u + lsb) >> drop) << drop;
}

uint16_t bf16_round_mode(float x, round_mode_t mode)
{
    const uint32_t u = bits_of(x), sign = u & 0x80000000u, mag = u & 0x7FFFFFFFu;
    uint32_t r;
    switch (mode) {
    case ROUND_TOWARD_ZERO:
        r = mag;
        break;
    case ROUND_HALF_AWAY:
        r = mag + 0x8000u;
        break;
    case ROUND_DOUBLE:
        r = round_bits_rne(round_bits_rne(mag, 13), 16);
        break;
    default:
        r = round_bits_rne(mag, 16);
        break;
    }
    /* Carries out of the mantissa move the exponent up, to Inf at most. */
    if (r > 0x7F800000u)
        r = 0x7F800000u;
    return (uint16_t)((sign | (r & 0xFFFF0000u)) >> 16);
}

const char *round_mode_label(int mode)
{
    static const char *const labels[ROUND_MODE_COUNT] = {"nearest_even", "truncation", "half_away", "double"};
    return mode >= 0 && mode < ROUND_MODE_COUNT ? labels[mode] : "?";
}

int ulp_round_fit(const ulp_stats_t *s)
{
    if (s->round_decided <= 0)
        return -1;
    int best = 0;
    for (int m = 1; m < ROUND_MODE_COUNT; m++)
        if (s->round_match[m] > s->round_match[best])
            best = m;
    return best;
}

/* Which roundings of r the output x reproduces, where they disagree. */
static inline void round_fit_add(ulp_stats_t *s, uint16_t x, float r)
{
    const uint32_t u = bits_of(r);
    /* Below 0x7000 in the low 16 bits no mode carries into bf16's last bit
     * (nor does the 13-bit step of the double rounding reach the halfway
     * point), so all four agree: most elements leave here. */
    if ((u & 0xFFFFu) < 0x7000u)
        return;
    if (!f32_is_finite_bits(u) || bf16_is_nan(x) || bf16_is_inf(x))
        return;
    uint16_t c[ROUND_MODE_COUNT];
    int all_same = 1;
    for (int m = 0; m < ROUND_MODE_COUNT; m++) {
        c[m] = bf16_round_mode(r, (round_mode_t)m);
        all_same &= c[m] == c[0];
    }
    if (all_same)
        return;
    s->round_decided++;
    for (int m = 0; m < ROUND_MODE_COUNT; m++)
        s->round_match[m] += x == c[m];
}

void ulp_stats_bf16(const uint16_t *a, const uint16_t *b, int64_t n, ulp_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->count = n > 0 ? n : 0;
    for (int64_t i = 0; i < s->count; i++)
        ulp_stats_add(s, a[i], b[i]);
    s->identical_frac = s->count ? (double)s->identical / (double)s->count : NAN;
}

void ulp_stats_bf16_vs_f32(const uint16_t *a, const float *ref, int64_t n, ulp_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->count = n > 0 ? n : 0;
    for (int64_t i = 0; i < s->count; i++) {
        ulp_stats_add(s, a[i], bf16_encode(ref[i]));
        round_fit_add(s, a[i], ref[i]);
    }
    s->identical_frac = s->count ? (double)s->identical / (double)s->count : NAN;
}

/* Elements of a row counted in 32-bit lanes before they are added to the
 * 64-bit totals: 8 counts a vector instead of 4, and |sum| stays below
 * ULP_CHUNK x 2^17 (a finite pair is fewer than 2^16 ordinals apart). */
#define ULP_CHUNK 4096

/* Up to ULP_CHUNK pairs of a row, every output and every bf16 rounding of
 * the reference finite: ulp_add_finite's counts as plain reductions, with no
 * store and no branch inside the loop, so that the compiler can run it on
 * vectors; the pairs 3 or more ULP apart are binned in a second pass, when
 * there are any. */
static void ulp_chunk_finite(ulp_stats_t *s, const uint16_t *a, const float *ref, int64_t len)
{
    int32_t identical = 0, near0 = 0, near1 = 0, near2 = 0, far = 0, toward = 0, away_n = 0, sum = 0;
    int32_t decided_n = 0, match0 = 0, match1 = 0, match2 = 0, match3 = 0;
    uint32_t max_ulp = 0;
    for (int64_t j = 0; j < len; j++) {
        const uint16_t x = a[j];
        const uint32_t u = bits_of(ref[j]);
        const uint16_t y = bf16_encode(ref[j]);
        const int32_t ox = bf16_ordinal(x), oy = bf16_ordinal(y), step = ox - oy;
        const uint32_t d = (uint32_t)(step < 0 ? -step : step);
        identical += x == y;
        near0 += d == 0;
        near1 += d == 1;
        near2 += d == 2;
        far += d >= 3;
        max_ulp = d > max_ulp ? d : max_ulp;
        const int32_t sign = (oy > 0) - (oy < 0), away = sign * step + (sign == 0) * (int32_t)d;
        toward += away < 0;
        away_n += away > 0;
        sum += away;
        const uint32_t mag = u & 0x7FFFFFFFu, out_sign = (u >> 16) & 0x8000u;
        const uint32_t rne = round_bits_rne(mag, 16) >> 16, trunc = mag >> 16;
        const uint32_t half_away = (mag + 0x8000u) >> 16;
        const uint32_t twice = round_bits_rne(round_bits_rne(mag, 13), 16) >> 16;
        const int decided = (rne != trunc) | (rne != half_away) | (rne != twice);
        decided_n += decided;
        match0 += decided & (x == (uint16_t)(out_sign | rne));
        match1 += decided & (x == (uint16_t)(out_sign | trunc));
        match2 += decided & (x == (uint16_t)(out_sign | half_away));
        match3 += decided & (x == (uint16_t)(out_sign | twice));
    }
    if (far) {
        /* above[t]: the pairs more than 2^t ULPs apart, as plain reductions
         * (a histogram's scattered increments would keep this pass scalar);
         * bin j >= ULP_BIN_3_4 is (2^(j-2), 2^(j-1)], the difference of two. */
        int32_t above[16] = {0};
        for (int64_t j = 0; j < len; j++) {
            const int32_t step = bf16_ordinal(a[j]) - bf16_ordinal(bf16_encode(ref[j]));
            const uint32_t d = (uint32_t)(step < 0 ? -step : step);
            for (int t = 1; t < 16; t++)
                above[t] += d > (1u << t);
        }
        for (int b = ULP_BIN_3_4; b < ULP_BIN_LAST_FINITE; b++)
            s->bins[b] += above[b - 2] - above[b - 1];
        s->bins[ULP_BIN_LAST_FINITE] += above[15];
    }
    const ulp_stats_t row = {
        .identical = identical, .bins = {[0] = near0, [1] = near1, [2] = near2},
        .max_ulp = max_ulp, .toward_zero = toward, .away_zero = away_n, .signed_ulp_sum = sum,
        .round_decided = decided_n,
        .round_match = {[ROUND_NEAREST_EVEN] = match0, [ROUND_TOWARD_ZERO] = match1,
                        [ROUND_HALF_AWAY] = match2, [ROUND_DOUBLE] = match3}};
    ulp_stats_merge(s, &row);
}

static void ulp_row_finite(ulp_stats_t *s, const uint16_t *a, const float *ref, int64_t len)
{
    for (int64_t j = 0; j < len; j += ULP_CHUNK)
        ulp_chunk_finite(s, a + j, ref + j, len - j < ULP_CHUNK ? len - j : ULP_CHUNK);
}

/* Whether every output and every bf16 rounding of the reference in the row
 * is finite (exponent field not all ones). */
static int ulp_row_all_finite(const uint16_t *a, const float *ref, int64_t len)
{
    unsigned special = 0;
    for (int64_t j = 0; j < len; j++)
        special |= ((a[j] & 0x7F80u) == 0x7F80u) | ((bf16_encode(ref[j]) & 0x7F80u) == 0x7F80u);
    return !special;
}

/* Rows [begin, end) of ulp_stats_bf16_vs_f32_apart into s (zeroed first). */
static void ulp_rows(const uint16_t *a, const float *ref, int64_t begin, int64_t end, int64_t N,
                     const unsigned char *apart, ulp_stats_t *s)
{
    memset(s, 0, sizeof *s);
    for (int64_t i = begin; i < end; i++) {
        if (apart && apart[i])
            continue;
        if (ulp_row_all_finite(a + i * N, ref + i * N, N)) {
            ulp_row_finite(s, a + i * N, ref + i * N, N);
        } else {
            for (int64_t j = i * N; j < (i + 1) * N; j++) {
                ulp_stats_add(s, a[j], bf16_encode(ref[j]));
                round_fit_add(s, a[j], ref[j]);
            }
        }
        s->count += N;
    }
}

/* The stats are counts and a maximum, so parts merged in any order give the
 * same numbers as one pass: the rows are cut into bands measured in
 * parallel (a prefill output is tens of millions of elements, and this pass
 * was the longest single-threaded stretch of a replay). */
#define ULP_BAND_ROWS 16
#define ULP_MAX_BANDS 4096
typedef struct {
    const uint16_t *a;
    const float *ref;
    int64_t M, N, band_rows;
    const unsigned char *apart;
    ulp_stats_t *part;
} ulp_job_t;

static void ulp_band(void *ctx, int64_t t)
{
    const ulp_job_t *j = ctx;
    const int64_t begin = t * j->band_rows;
    const int64_t end = begin + j->band_rows < j->M ? begin + j->band_rows : j->M;
    ulp_rows(j->a, j->ref, begin, end, j->N, j->apart, &j->part[t]);
}

void ulp_stats_bf16_vs_f32_apart(const uint16_t *a, const float *ref, int64_t M, int64_t N,
                                 const unsigned char *apart, ulp_stats_t *s)
{
    int64_t band_rows = ULP_BAND_ROWS;
    while ((M + band_rows - 1) / band_rows > ULP_MAX_BANDS)
        band_rows *= 2;
    const int64_t bands = M > 0 ? (M + band_rows - 1) / band_rows : 0;
    ulp_stats_t *part = bands > 1 ? calloc((size_t)bands, sizeof *part) : NULL;
    if (!part) {
        /* One band, or no memory for the parts: one pass, the same numbers. */
        ulp_rows(a, ref, 0, M, N, apart, s);
    } else {
        ulp_job_t job = {.a = a, .ref = ref, .M = M, .N = N, .band_rows = band_rows,
                         .apart = apart, .part = part};
        /* Some 3-10 ns an element on one core (the row pass; 30 where a row
         * holds an Inf or NaN). */
        parallel_for_cost(bands, 0, 5.0 * (double)(band_rows * N), ulp_band, &job);
        memset(s, 0, sizeof *s);
        for (int64_t t = 0; t < bands; t++)
            ulp_stats_merge(s, &part[t]);
        free(part);
    }
    s->identical_frac = s->count ? (double)s->identical / (double)s->count : NAN;
}

void ulp_stats_merge(ulp_stats_t *acc, const ulp_stats_t *part)
{
    acc->count += part->count;
    acc->identical += part->identical;
    if (part->max_ulp > acc->max_ulp)
        acc->max_ulp = part->max_ulp;
    for (int b = 0; b < ULP_BIN_COUNT; b++)
        acc->bins[b] += part->bins[b];
    acc->toward_zero += part->toward_zero;
    acc->away_zero += part->away_zero;
    acc->signed_ulp_sum += part->signed_ulp_sum;
    acc->round_decided += part->round_decided;
    for (int m = 0; m < ROUND_MODE_COUNT; m++)
        acc->round_match[m] += part->round_match[m];
    acc->identical_frac = acc->count ? (double)acc->identical / (double)acc->count : NAN;
}
