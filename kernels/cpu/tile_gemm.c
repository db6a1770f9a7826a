#include "tile_gemm.h"

#include "formats.h"
#include "parallel.h"
#include "scratch.h"
#include "tile_dot.h"

/* Rows whose accumulators a task keeps at once (a task with more rows walks
 * K again for the next ones, refilling the weight). */
#define TILE_GEMM_MC 512
/* A row range is cut no finer than this. */
#define TILE_GEMM_MIN_ROWS 8
/* Column tiles a task walks side by side, at most. */
#define TILE_GEMM_MAX_TILES 4

/* The planner's cost model, in nanoseconds of one core (measured on an
 * AVX-512 core; only the ratios steer the choice): filling one weight
 * element, one row x one k of a whole tile's sums (32 lanes), the same for a
 * half tile (16 lanes: fewer lanes per broadcast x, so dearer per lane),
 * and a task's fixed cost. */
#define TILE_GEMM_NS_FILL 0.25
#define TILE_GEMM_NS_ROW_K_WHOLE 1.05
#define TILE_GEMM_NS_ROW_K_HALF 0.85
#define TILE_GEMM_NS_TASK 2000.0

typedef struct {
    const tile_gemm_t *g;
    int64_t group_width;        /* TILE_N, or TILE_N / 2 for narrow outputs */
    int64_t groups;             /* column tiles of group_width */
    int64_t rows_per_part;
    int64_t tiles_per_task;     /* consecutive column tiles one task walks side by side */
    int64_t task_groups;        /* tasks per row range: groups / tiles_per_task, rounded up */
} tile_plan_t;

/* The epilogue of rows [m0, m0 + rows): out = bf16(acc (* row_scale)). */
static void store_rows(const tile_gemm_t *g, int64_t m0, int64_t rows, int64_t n0, int64_t width,
                       float acc[][TILE_N])
{
    for (int64_t i = 0; i < rows; i++) {
        uint16_t *orow = g->out + (m0 + i) * g->N + n0;
        if (g->row_scale) {
            const float s = g->row_scale[m0 + i];
            for (int64_t j = 0; j < width; j++)
                orow[j] = bf16_encode(acc[i][j] * s);
        } else {
            for (int64_t j = 0; j < width; j++)
                orow[j] = bf16_encode(acc[i][j]);
        }
    }
}

/* Rows [m0, m1) (at most TILE_GEMM_MC) of one tile over the chunk [k0, k1) for
 * split-K sums: the chunk is cut at split boundaries; a split's
 * part starts at +0 at its first k and is folded into acc at its last. */
static void splits_chunk(const tile_gemm_t *g, int half, int64_t m0, int64_t m1, int64_t k0,
                         int64_t k1, const float *value, float part[][TILE_N],
                         float acc[][TILE_N])
{
    const int64_t K = g->K, span = K / g->splits;
    const int nv = half ? TD_NV_HALF : TD_NV;
    for (int64_t a = k0; a < k1;) {
        const int64_t split = a / span, split_end = (split + 1) * span;
        const int64_t b = k1 < split_end ? k1 : split_end;
        const int fresh = a == split * span;
        for (int64_t m = m0; m < m1; m += TILE_DOT_MB) {
            const int mb = (int)(m1 - m < TILE_DOT_MB ? m1 - m : TILE_DOT_MB);
            tile_dot_segment(value + (a - k0) * TILE_N, g->x + m * K + a, K, mb, half, b - a,
                             fresh, part + (m - m0));
        }
        if (b == split_end)
            for (int64_t i = 0; i < m1 - m0; i++)
                for (int v = 0; v < nv; v++) {
                    float *o = acc[i] + v * TD_VW;
                    const td_vec p = td_load(part[i] + v * TD_VW);
                    td_store(o, split == 0 ? p : td_load(o) + p);   /* split order */
                }
        a = b;
    }
}

/* One task's buffers: per tile of its run the weight chunk, its block
 * factors, the accumulators and the split parts of up to TILE_GEMM_MC rows
 * (some 160 KB a tile: from the scratch cache, not the stack). */
typedef struct {
    float value[TILE_GEMM_KC * TILE_N];
    float block_scale[TILE_GEMM_KC / 32 * TILE_N];
    float acc[TILE_GEMM_MC][TILE_N];
    float part[TILE_GEMM_MC][TILE_N];
} tile_buffers_t;

/* The blocks sums of rows [m0, m1) over the chunk [k0, k1) for the run's
 * tiles, row group by row group: each group's chunk of x is read from the
 * L1 cache for every tile after the first, instead of every tile streaming
 * all of x from memory (at M = 4096 the model was bound by that stream). */
static void blocks_chunk_run(const tile_gemm_t *g, int64_t tiles, const int *half, int64_t m0,
                             int64_t m1, int64_t k0, int64_t k1, tile_buffers_t *buf)
{
    const int64_t K = g->K, nblocks = K / 32;
    for (int64_t m = m0; m < m1; m += TILE_DOT_MB) {
        const int mb = (int)(m1 - m < TILE_DOT_MB ? m1 - m : TILE_DOT_MB);
        const float *xs = g->x_block ? g->x_block + m * nblocks + k0 / 32 : NULL;
        for (int64_t t = 0; t < tiles; t++)
            tile_dot_blocks(buf[t].value, g->x + m * K + k0, K, mb, half[t], (k1 - k0) / 32,
                            buf[t].block_scale, xs, nblocks, buf[t].acc + (m - m0));
    }
}

/* Rows [r0, r1) of the run's tiles (n0, width, half per tile) into buf. */
static void tile_run(const tile_gemm_t *g, int64_t r0, int64_t r1, int64_t tiles,
                     const int64_t *n0, const int64_t *width, const int *half,
                     tile_buffers_t *buf)
{
    for (int64_t m0 = r0; m0 < r1; m0 += TILE_GEMM_MC) {
        const int64_t m1 = r1 - m0 < TILE_GEMM_MC ? r1 : m0 + TILE_GEMM_MC;
        if (g->order == TILE_SUM_BLOCKS)
            for (int64_t t = 0; t < tiles; t++)
                for (int64_t i = 0; i < m1 - m0; i++)
                    for (int j = 0; j < TILE_N; j++)
                        buf[t].acc[i][j] = 0.0f;
        for (int64_t k0 = 0; k0 < g->K; k0 += TILE_GEMM_KC) {
            const int64_t k1 = g->K - k0 < TILE_GEMM_KC ? g->K : k0 + TILE_GEMM_KC;
            for (int64_t t = 0; t < tiles; t++)
                g->fill(g, n0[t], width[t], k0, k1, buf[t].value,
                        g->order == TILE_SUM_BLOCKS ? buf[t].block_scale : NULL);
            if (g->order == TILE_SUM_BLOCKS)
                blocks_chunk_run(g, tiles, half, m0, m1, k0, k1, buf);
            else
                for (int64_t t = 0; t < tiles; t++)
                    splits_chunk(g, half[t], m0, m1, k0, k1, buf[t].value, buf[t].part, buf[t].acc);
        }
        for (int64_t t = 0; t < tiles; t++)
            store_rows(g, m0, m1 - m0, n0[t], width[t], buf[t].acc);
    }
}

static void tile_gemm_task(void *ctx, int64_t task)
{
    const tile_plan_t *plan = ctx;
    const tile_gemm_t *g = plan->g;
    const int64_t first = (task % plan->task_groups) * plan->tiles_per_task;
    const int64_t range = task / plan->task_groups;
    const int64_t tiles = plan->groups - first < plan->tiles_per_task ? plan->groups - first
                                                                       : plan->tiles_per_task;
    const int64_t r0 = range * plan->rows_per_part;
    const int64_t r1 = g->M - r0 < plan->rows_per_part ? g->M : r0 + plan->rows_per_part;
    int64_t n0[TILE_GEMM_MAX_TILES], width[TILE_GEMM_MAX_TILES];
    int half[TILE_GEMM_MAX_TILES];
    for (int64_t t = 0; t < tiles; t++) {
        n0[t] = (first + t) * plan->group_width;
        width[t] = g->N - n0[t] < plan->group_width ? g->N - n0[t] : plan->group_width;
        half[t] = width[t] <= TILE_N / 2;
    }
    scratch_t scratch = {0};
    tile_buffers_t *buf = tiles > 1 ? scratch_get(&scratch, (size_t)tiles * sizeof *buf) : NULL;
    if (!buf) {
        /* One tile, or no memory for several: one tile at a time in a
         * buffer on this thread's stack (the same bits either way). */
        _Alignas(64) tile_buffers_t own;
        for (int64_t t = 0; t < tiles; t++)
            tile_run(g, r0, r1, 1, &n0[t], &width[t], &half[t], &own);
        return;
    }
    tile_run(g, r0, r1, tiles, n0, width, half, buf);
    scratch_put(&scratch);
}


static double task_cost(const tile_gemm_t *g, int64_t width, int64_t rows)
{
    const int half = width <= TILE_N / 2;
    const double fills = (double)((rows + TILE_GEMM_MC - 1) / TILE_GEMM_MC);
    return TILE_GEMM_NS_TASK + fills * (double)g->K * (half ? TILE_N / 2 : TILE_N) * TILE_GEMM_NS_FILL +
           (double)rows * (double)g->K * (half ? TILE_GEMM_NS_ROW_K_HALF : TILE_GEMM_NS_ROW_K_WHOLE);
}

/* The estimated time of a plan on p threads taking tasks in order, each
 * thread the next task when it is free (what parallel_for does). */
static double plan_time(const tile_gemm_t *g, const tile_plan_t *plan, int p)
{
    double busy[64] = {0};
    const int64_t ranges = (g->M + plan->rows_per_part - 1) / plan->rows_per_part;
    for (int64_t r = 0; r < ranges; r++) {
        const int64_t rows = g->M - r * plan->rows_per_part < plan->rows_per_part
                                 ? g->M - r * plan->rows_per_part
                                 : plan->rows_per_part;
        for (int64_t grp = 0; grp < plan->groups; grp++) {
            const int64_t n0 = grp * plan->group_width;
            const int64_t width = g->N - n0 < plan->group_width ? g->N - n0 : plan->group_width;
            int first_free = 0;
            for (int t = 1; t < p; t++)
                if (busy[t] < busy[first_free])
                    first_free = t;
            busy[first_free] += task_cost(g, width, rows);
        }
    }
    double end = 0;
    for (int t = 0; t < p; t++)
        end = busy[t] > end ? busy[t] : end;
    return end;
}

/* Chooses tile width and row ranges: on one thread whole tiles and one
 * range (the least work); on several, the plan the cost model says ends
 * first among whole or half-width tiles and a few range counts.  Half tiles
 * and row ranges buy tasks for narrow outputs at the price of filling the
 * weight more often. */
static tile_plan_t choose_plan(const tile_gemm_t *g, int p)
{
    tile_plan_t best = {.g = g, .group_width = TILE_N, .rows_per_part = g->M};
    best.groups = (g->N + TILE_N - 1) / TILE_N;
    if (p <= 1)
        return best;
    double best_time = plan_time(g, &best, p);
    static const int64_t range_counts[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    for (int half = 0; half <= 1; half++)
        for (size_t i = 0; i < sizeof range_counts / sizeof range_counts[0]; i++) {
            const int64_t ranges = range_counts[i];
            if (ranges > 1 && g->M / ranges < TILE_GEMM_MIN_ROWS)
                break;
            tile_plan_t plan = {.g = g, .group_width = half ? TILE_N / 2 : TILE_N};
            plan.groups = (g->N + plan.group_width - 1) / plan.group_width;
            if (ranges > 1 && plan.groups * ranges > 16 * (int64_t)p)
                break;          /* tasks enough already */
            plan.rows_per_part = (g->M + ranges - 1) / ranges;
            const double t = plan_time(g, &plan, p);
            if (t < best_time) {
                best_time = t;
                best = plan;
            }
        }
    return best;
}

/* Tiles per task: as many as TILE_GEMM_MAX_TILES while the tasks still
 * number 8 per thread (for balance); the planner's figures are per tile. */
static void choose_tiles_per_task(tile_plan_t *plan, int p)
{
    const int64_t ranges = (plan->g->M + plan->rows_per_part - 1) / plan->rows_per_part;
    plan->tiles_per_task = 1;
    for (int64_t t = TILE_GEMM_MAX_TILES; t > 1; t /= 2)
        if ((plan->groups + t - 1) / t * ranges >= 8 * (int64_t)p) {
            plan->tiles_per_task = t;
            break;
        }
    plan->task_groups = (plan->groups + plan->tiles_per_task - 1) / plan->tiles_per_task;
}

void tile_gemm_run(const tile_gemm_t *g, int threads)
{
    if (g->M <= 0 || g->N <= 0)
        return;
    const int p = parallel_thread_count(threads);
    tile_plan_t plan = choose_plan(g, p);
    choose_tiles_per_task(&plan, p);
    const int64_t tasks = plan.task_groups * ((g->M + plan.rows_per_part - 1) / plan.rows_per_part);
    parallel_for_cost(tasks, threads,
                      (double)plan.tiles_per_task * task_cost(g, plan.group_width, plan.rows_per_part),
                      tile_gemm_task, &plan);
}
