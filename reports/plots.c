#include "plots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "kr_string.h"
#include "plot_util.h"
#include "row_kernel.h"
#include "shape_order.h"
#include "verdict.h"
#include "row_reference.h"

/* ------------------------------------------------------------ ULP histograms */

static int plot_ulp(plot_list_t *pl, const result_list_t *rows, const strset_t *kernels, const char *ref)
{
    /* Per kernel: summed bins and count. */
    int nk = kernels->n;
    double (*bins)[ULP_BIN_COUNT] = calloc((size_t)(nk ? nk : 1), sizeof *bins);
    double *count = calloc((size_t)(nk ? nk : 1), sizeof *count);
    if (!bins || !count) {
        free(bins);
        free(count);
        return -1;
    }
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (strcmp(r->reference, ref) || r->ulp.count <= 0 || r->verdict == VERDICT_UNSUPPORTED ||
            r->verdict == VERDICT_ERROR)
            continue;
        int k = strset_find(kernels, r->kernel);
        if (k < 0)
            continue;
        for (int b = 0; b < ULP_BIN_COUNT; b++)
            bins[k][b] += (double)r->ulp.bins[b];
        count[k] += (double)r->ulp.count;
    }
    int series = 0, maxbin = 1;
    int *same_as = malloc((size_t)(nk ? nk : 1) * sizeof *same_as);
    if (!same_as) {
        free(bins);
        free(count);
        return -1;
    }
    for (int k = 0; k < nk; k++) {
        /* A histogram another kernel has bin for bin (bit-identical outputs)
         * is drawn once, the kernels named together in the key. */
        same_as[k] = -1;
        for (int q = 0; q < k && same_as[k] < 0 && count[k] > 0; q++)
            if (same_as[q] < 0 && count[q] == count[k] && !memcmp(bins[q], bins[k], sizeof bins[k]))
                same_as[k] = q;
        double tot = 0;
        for (int b = 0; b < ULP_BIN_COUNT; b++) {
            tot += bins[k][b];
            if (bins[k][b] > 0 && b > maxbin)
                maxbin = b;
        }
        if (count[k] > 0 && tot > 0)
            series++;
        else
            count[k] = 0;
    }
    int rc = 0;
    if (series) {
        char name[96], rt[64];
        snprintf(name, sizeof name, "ulp_%s", ref);
        gp_text(ref, rt, sizeof rt);
        plot_t *p = plot_add(pl, "ulp", name, 960, 460);
        script_t s;
        if (!p || script_open(&s)) {
            rc = -1;
        } else {
            snprintf(p->title, sizeof p->title,
                     "bf16 ULP distance to %s: fraction of output elements per bin, per kernel (summed over cases)", ref);
            FILE *fp = s.fp;
            gp_common(fp);
            int blk = 0;
            for (int k = 0; k < nk; k++) {
                if (count[k] <= 0 || same_as[k] >= 0)
                    continue;
                fprintf(fp, "$u%d << EOD\n", blk++);
                for (int b = 0; b < ULP_BIN_COUNT; b++) {
                    fprintf(fp, "%d ", b);
                    gp_num(fp, bins[k][b] > 0 ? bins[k][b] / count[k] : NAN);
                    fputc('\n', fp);
                }
                fputs("EOD\n", fp);
            }
            fprintf(fp, "set title \"ULP distance to %s\"\n", rt);
            fputs("set logscale y\nset format y \"%.0e\"\nset ylabel \"fraction of elements\"\n", fp);
            fputs("set xlabel \"bf16 ULP distance\"\nset key outside right top vertical\n", fp);
            fputs("set lmargin at screen 0.09\nset rmargin at screen 0.76\n", fp);
            /* Always show 0..2; beyond that up to the last bin any kernel filled. */
            int last = maxbin < 4 ? 4 : maxbin;
            fprintf(fp, "set xrange [-0.5:%d.5]\nset xtics rotate by -45 (", last);
            for (int b = 0; b <= last; b++)
                fprintf(fp, "%s\"%s\" %d", b ? ", " : "", ulp_bin_label(b), b);
            fputs(")\n", fp);
            fputs("plot ", fp);
            blk = 0;
            for (int k = 0; k < nk; k++) {
                if (count[k] <= 0 || same_as[k] >= 0)
                    continue;
                char style[96], kt[80];
                kernel_style(kernels, kernels->v[k], style, sizeof style);
                gp_text(kernels->v[k], kt, sizeof kt);
                fprintf(fp, "%s$u%d using 1:2 with linespoints lw 1.5 ps 0.9 %s title \"%s\"", blk ? ", \\\n  " : "",
                        blk, style, kt);
                for (int q = k + 1; q < nk; q++)
                    if (same_as[q] == k) {
                        gp_text(kernels->v[q], kt, sizeof kt);
                        fprintf(fp, ", \\\n  keyentry with lines lc rgb \"#ffffff\" title \"= %s (identical)\"", kt);
                    }
                blk++;
            }
            fputc('\n', fp);
            rc = script_finish(pl, p, &s);
        }
    }
    free(same_as);
    free(bins);
    free(count);
    return rc;
}

/* ------------------------------------------------------------- shape x band */

static int cell_cmp(const void *a, const void *b)
{
    const plot_cell_t *x = a, *y = b;
    return shape_order_band(x->N, x->K, x->band_order, x->band, y->N, y->K, y->band_order,
                            y->band);
}

int plots_row_worse(const result_t *a, const result_t *b)
{
    const int fa = verdict_is_failure(a->verdict), fb = verdict_is_failure(b->verdict);
    if (fa != fb)
        return fa;
    const int ta = isfinite(a->threshold) && a->threshold > 0, tb = isfinite(b->threshold) && b->threshold > 0;
    if (ta != tb)
        return ta;
    if (ta && a->metrics.rel_fro / a->threshold != b->metrics.rel_fro / b->threshold)
        return a->metrics.rel_fro / a->threshold > b->metrics.rel_fro / b->threshold;
    return a->metrics.rel_fro > b->metrics.rel_fro;
}

/* The error rows against ref (NULL: any R_*) grouped by shape, and by band
 * too when by_band: the shape x band cells, and the shapes the relative-error
 * plots are drawn for.  Returns the count, or -1 when out of memory. */
static int collect_cells(const result_list_t *rows, const char *ref, int by_band, plot_cell_t **cells)
{
    *cells = NULL;
    plot_cell_t *v = NULL;
    int n = 0;
    int64_t cap = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!plots_is_error_row(r, ref))
            continue;
        int j;
        for (j = 0; j < n; j++)
            if (v[j].N == r->N && v[j].K == r->K && (!by_band || !strcmp(v[j].band, r->band)))
                break;
        if (j == n) {
            if ((v = array_reserve_one_or_free(v, n, &cap, sizeof *v, 16)) == NULL)
                return -1;
            v[n] = (plot_cell_t){.N = r->N, .K = r->K, .band_order = band_order(rows, r->band), .worst_index = -1};
            kr_strlcpy(v[n].band, r->band, sizeof v[n].band);
            n++;
        }
        v[j].n_rows++;
        v[j].failing += verdict_is_failure(r->verdict);
        if (v[j].worst_index < 0 || plots_row_worse(r, &rows->rows[v[j].worst_index])) {
            v[j].worst_rel = r->metrics.rel_fro;
            v[j].worst_ratio = isfinite(r->threshold) && r->threshold > 0 ? r->metrics.rel_fro / r->threshold : NAN;
            v[j].worst_index = i;
            v[j].worst_verdict = r->verdict;
        }
    }
    /* Without bands the shapes are distinct, so this is their (N, K) order. */
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cell_cmp);
    *cells = v;
    return n;
}

int plots_cells(const result_list_t *rows, plot_cell_t **cells)
{
    /* Every reference: a row is worse by its ratio to its own threshold, so
     * a kernel failing R_exact is not hidden behind R_source's larger errors. */
    return collect_cells(rows, NULL, 1, cells);
}

/* --------------------------------------------------------------- public API */

int plots_from_rows(plot_list_t *pl, const result_list_t *rows, kr_error_t *err)
{
    strset_t kernels = {0}, refs = {0}, bands = {0};
    plot_cell_t *shapes = NULL, *cells = NULL;
    int n_shapes = 0, rc = 0;
    if (plot_sets_collect(rows, &kernels, &refs, &bands) ||
        (n_shapes = collect_cells(rows, NULL, 0, &shapes)) < 0) {
        rc = -1;
        goto done;
    }
    for (int i = 0; i < n_shapes && rc == 0; i++)
        rc = plot_relerr(pl, rows, &kernels, &bands, shapes[i].N, shapes[i].K);
    /* ULP histograms: the references in a fixed order, then the others. */
    static const char *const first_refs[] = {"R_exact", "R_source", ROW_REF_SANITIZED, ROW_REF_RERUN};
    for (size_t j = 0; j < sizeof first_refs / sizeof first_refs[0] && rc == 0; j++)
        if (strset_find(&refs, first_refs[j]) >= 0)
            rc = plot_ulp(pl, rows, &kernels, first_refs[j]);
    for (int j = 0; j < refs.n && rc == 0; j++) {
        int known = 0;
        for (size_t q = 0; q < sizeof first_refs / sizeof first_refs[0]; q++)
            known |= !strcmp(refs.v[j], first_refs[q]);
        if (!known)
            rc = plot_ulp(pl, rows, &kernels, refs.v[j]);
    }
    int n_cells = rc == 0 ? plots_cells(rows, &cells) : 0;
    if (n_cells < 0)
        rc = -1;
    if (rc == 0)
        rc = plot_w4a8_vs_w4a4(pl, rows, &kernels, cells, n_cells);
    if (rc == 0)
        rc = plot_heatmap(pl, cells, n_cells);
    if (rc == 0)
        rc = plot_regressions(pl, rows);
done:
    free(cells);
    free(shapes);
    strset_free(&kernels);
    strset_free(&refs);
    strset_free(&bands);
    if (rc)
        return kr_fail(err, "plots: out of memory");
    return 0;
}

int plots_nfmap(plot_list_t *pl, const char *case_name, const char *case_path, const float *x,
                int64_t M, int64_t K, const input_map_t *m, kr_error_t *err)
{
    if (!x || M <= 0 || K <= 0 || nonfinite_total(&m->nf) == 0)
        return 0;
    int64_t rb = M < 64 ? M : 64, cb = K < 256 ? K : 256;
    int64_t rstep = (M + rb - 1) / rb, cstep = (K + cb - 1) / cb;
    rb = (M + rstep - 1) / rstep;
    cb = (K + cstep - 1) / cstep;
    int64_t *cnt = calloc((size_t)(rb * cb), sizeof *cnt);
    if (!cnt)
        return kr_fail(err, "plots: out of memory");
    for (int64_t r = 0; r < M; r++)
        if (!m->row_count || m->row_count[r] > 0)
            for (int64_t c = 0; c < K; c++)
                if (!isfinite(x[r * K + c]))
                    cnt[(r / rstep) * cb + c / cstep]++;
    char name[96];
    snprintf(name, sizeof name, "nfmap_%s", case_name);
    plot_t *p = plot_add(pl, "nfmap", name, 960, M > 48 ? 620 : 420);
    script_t s;
    if (!p || script_open(&s)) {
        free(cnt);
        return kr_fail(err, "plots: out of memory");
    }
    kr_strlcpy(p->case_path, case_path ? case_path : "", sizeof p->case_path);
    snprintf(p->title, sizeof p->title, "Non-finite map of x (%lld rows x %lld columns): %s", (long long)M,
             (long long)K, case_name);
    FILE *fp = s.fp;
    gp_common(fp);
    fputs("$c << EOD\n", fp);
    for (int64_t i = 0; i < rb; i++)
        for (int64_t j = 0; j < cb; j++) {
            int64_t n = cnt[i * cb + j];
            if (!n)
                continue;
            int64_t r0 = i * rstep, r1 = (i + 1) * rstep < M ? (i + 1) * rstep : M;
            int64_t c0 = j * cstep, c1 = (j + 1) * cstep < K ? (j + 1) * cstep : K;
            fprintf(fp, "%.3f %.3f %.3f %.3f %.6f\n", (c0 + c1) / 2.0, (r0 + r1) / 2.0, (c1 - c0) / 2.0,
                    (r1 - r0) / 2.0, (double)n / (double)((r1 - r0) * (c1 - c0)));
        }
    fputs("EOD\n", fp);
    char ct[140];
    gp_text(case_name, ct, sizeof ct);
    fprintf(fp, "set title \"non-finite elements of x: %s\"\n", ct);
    fprintf(fp, "set xrange [0:%lld]\nset yrange [%lld:0]\n", (long long)K, (long long)M);
    fputs("set xlabel \"column (k)\"\nset ylabel \"row (token)\"\nset grid front\n", fp);
    fputs("set cbrange [0:1]\nset cblabel \"non-finite fraction of the cell\"\n"
          "set palette defined (0 \"#fcbba1\", 1 \"#a50f15\")\n",
          fp);
    for (int64_t b = 0; b < m->blocks_stored; b++) {
        const nf_block_t *blk = &m->blocks[b];
        fprintf(fp, "set object %lld rect from %lld,%lld to %lld,%lld fs empty border lc rgb \"#08519c\" lw 1.5 front\n",
                (long long)b + 1, (long long)blk->c0, (long long)blk->r0, (long long)blk->c1 + 1,
                (long long)blk->r1 + 1);
    }
    fprintf(fp, "plot $c using 1:2:3:4:5 with boxxyerror fs solid 1.0 noborder fc palette title \"%s\"\n",
            m->blocks_stored ? "non-finite cells (blue: blocks)" : "non-finite cells");
    free(cnt);
    if (script_finish(pl, p, &s))
        return kr_fail(err, "plots: out of memory");
    return 0;
}

void plot_list_free(plot_list_t *pl)
{
    for (int i = 0; i < pl->count; i++)
        free(pl->items[i].script);
    free(pl->items);
    memset(pl, 0, sizeof *pl);
}
