#include <math.h>
#include <string.h>

#include "escape.h"
#include "report.h"
#include "verdict.h"

static void csv_string(FILE *fp, const char *s)
{
    esc_csv(fp, s, 1);
}

static void csv_number(FILE *fp, double v)
{
    if (isnan(v))
        fputs(",nan", fp);
    else
        fprintf(fp, ",%.9g", v);
}

void report_csv_write(FILE *fp, const result_list_t *rows)
{
    fputs("case,path,M,N,K,band,kernel,reference,act_origin,verdict,threshold,rel_fro,nmse,"
          "max_abs,worst_row_rel,worst_row,cosine,mag_ratio,out_nan,out_pos_inf,out_neg_inf,"
          "ref_nan,ref_pos_inf,ref_neg_inf,in_nan,in_pos_inf,in_neg_inf,identical_frac,max_ulp",
          fp);
    for (int b = 0; b < ULP_BIN_COUNT; b++)
        fprintf(fp, ",ulp_%s", ulp_bin_label(b));
    fputs(",ref_f32_vs_f64,seconds,note,diagnosis\n", fp);
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        const metrics_t *m = &r->metrics;
        csv_string(fp, r->case_name);
        fputc(',', fp);
        csv_string(fp, r->case_path);
        fprintf(fp, ",%lld,%lld,%lld,", (long long)r->M, (long long)r->N, (long long)r->K);
        /* Quoted only when they need it: plain names stay as they were. */
        esc_csv(fp, r->band, 0);
        fputc(',', fp);
        esc_csv(fp, r->kernel, 0);
        fputc(',', fp);
        esc_csv(fp, r->reference, 0);
        fputc(',', fp);
        csv_string(fp, r->act_origin);
        fprintf(fp, ",%s", verdict_name(r->verdict));
        csv_number(fp, r->threshold);
        csv_number(fp, m->rel_fro);
        csv_number(fp, m->nmse);
        csv_number(fp, m->max_abs);
        csv_number(fp, m->worst_row_rel);
        fprintf(fp, ",%lld", (long long)m->worst_row);
        csv_number(fp, m->cosine);
        csv_number(fp, m->mag_ratio);
        fprintf(fp, ",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", (long long)m->out_nf.nan,
                (long long)m->out_nf.pos_inf, (long long)m->out_nf.neg_inf, (long long)m->ref_nf.nan,
                (long long)m->ref_nf.pos_inf, (long long)m->ref_nf.neg_inf,
                (long long)r->input_nf.nan, (long long)r->input_nf.pos_inf,
                (long long)r->input_nf.neg_inf);
        csv_number(fp, r->ulp.identical_frac);
        fprintf(fp, ",%llu", (unsigned long long)r->ulp.max_ulp);
        for (int b = 0; b < ULP_BIN_COUNT; b++)
            fprintf(fp, ",%lld", (long long)r->ulp.bins[b]);
        csv_number(fp, r->ref_f32_vs_f64);
        fprintf(fp, ",%.6f,", r->seconds);
        csv_string(fp, r->note);
        fputc(',', fp);
        csv_string(fp, r->diagnosis);
        fputc('\n', fp);
    }
}
