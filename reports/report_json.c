#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "verdict.h"

void run_info_fill(run_info_t *info, const char *command, const char *version,
                   const char *git_commit)
{
    memset(info, 0, sizeof *info);
    info->command = command;
    info->version = version;
    info->git_commit = git_commit ? git_commit : "unknown";
    if (gethostname(info->host, sizeof info->host - 1) != 0)
        snprintf(info->host, sizeof info->host, "unknown");
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(info->time_utc, sizeof info->time_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* JSON has no NaN or Inf: a non-finite metric is null. */
static json_t *json_number_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *nonfinite_json(const nonfinite_t *nf)
{
    return json_pack("{s:I, s:I, s:I}", "nan", (json_int_t)nf->nan, "pos_inf",
                     (json_int_t)nf->pos_inf, "neg_inf", (json_int_t)nf->neg_inf);
}

static json_t *row_json(const result_t *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "case", json_string(r->case_name));
    json_object_set_new(o, "path", json_string(r->case_path));
    json_object_set_new(o, "M", json_integer(r->M));
    json_object_set_new(o, "N", json_integer(r->N));
    json_object_set_new(o, "K", json_integer(r->K));
    json_object_set_new(o, "band", json_string(r->band));
    json_object_set_new(o, "kernel", json_string(r->kernel));
    json_object_set_new(o, "reference", json_string(r->reference));
    json_object_set_new(o, "act_origin", json_string(r->act_origin));
    json_object_set_new(o, "verdict", json_string(verdict_name(r->verdict)));
    json_object_set_new(o, "note", json_string(r->note));
    json_object_set_new(o, "diagnosis", json_string(r->diagnosis));
    json_object_set_new(o, "threshold", json_number_or_null(r->threshold));
    json_object_set_new(o, "seconds", json_real(r->seconds));
    json_object_set_new(o, "input_nonfinite", nonfinite_json(&r->input_nf));
    if (strcmp(r->reference, "-") == 0)
        return o;
    const metrics_t *m = &r->metrics;
    json_t *mj = json_object();
    json_object_set_new(mj, "count", json_integer(m->count));
    json_object_set_new(mj, "finite_count", json_integer(m->finite_count));
    json_object_set_new(mj, "rel_fro", json_number_or_null(m->rel_fro));
    json_object_set_new(mj, "nmse", json_number_or_null(m->nmse));
    json_object_set_new(mj, "max_abs", json_number_or_null(m->max_abs));
    json_object_set_new(mj, "max_abs_index", json_integer(m->max_abs_index));
    json_object_set_new(mj, "worst_row_rel", json_number_or_null(m->worst_row_rel));
    json_object_set_new(mj, "worst_row", json_integer(m->worst_row));
    json_object_set_new(mj, "cosine", json_number_or_null(m->cosine));
    json_object_set_new(mj, "mag_ratio", json_number_or_null(m->mag_ratio));
    json_object_set_new(mj, "out_nonfinite", nonfinite_json(&m->out_nf));
    json_object_set_new(mj, "ref_nonfinite", nonfinite_json(&m->ref_nf));
    json_object_set_new(o, "metrics", mj);
    json_object_set_new(o, "ref_f32_vs_f64", json_number_or_null(r->ref_f32_vs_f64));
    json_t *uj = json_object();
    json_object_set_new(uj, "count", json_integer(r->ulp.count));
    json_object_set_new(uj, "identical", json_integer(r->ulp.identical));
    json_object_set_new(uj, "identical_frac", json_number_or_null(r->ulp.identical_frac));
    json_object_set_new(uj, "max_ulp", json_integer((json_int_t)r->ulp.max_ulp));
    json_t *bins = json_object();
    for (int b = 0; b < ULP_BIN_COUNT; b++)
        json_object_set_new(bins, ulp_bin_label(b), json_integer(r->ulp.bins[b]));
    json_object_set_new(uj, "histogram", bins);
    json_object_set_new(o, "ulp_vs_reference_bf16", uj);
    return o;
}

json_t *report_json_build(const result_list_t *rows, const run_info_t *info)
{
    json_t *root = json_object();
    json_t *prov = json_object();
    json_object_set_new(prov, "version", json_string(info->version ? info->version : ""));
    json_object_set_new(prov, "git_commit", json_string(info->git_commit ? info->git_commit : ""));
    json_object_set_new(prov, "host", json_string(info->host));
    json_object_set_new(prov, "time_utc", json_string(info->time_utc));
    json_object_set_new(prov, "command", json_string(info->command ? info->command : ""));
    json_object_set_new(root, "kreplay", prov);
    /* An incomplete run must not read as a complete one. */
    json_object_set_new(root, "incomplete", json_boolean(info->n_failed_inputs > 0));
    if (info->n_failed_inputs > 0) {
        json_t *failed = json_array();
        for (int i = 0; i < info->n_failed_inputs; i++)
            json_array_append_new(failed, json_string(info->failed_inputs[i]));
        json_object_set_new(root, "failed_inputs", failed);
    }
    json_t *arr = json_array();
    int64_t counts[VERDICT_COUNT] = {0};
    for (int64_t i = 0; i < rows->count; i++) {
        json_array_append_new(arr, row_json(&rows->rows[i]));
        counts[rows->rows[i].verdict]++;
    }
    json_object_set_new(root, "results", arr);
    json_t *summary = json_object();
    for (int v = 0; v < VERDICT_COUNT; v++)
        if (counts[v])
            json_object_set_new(summary, verdict_name((verdict_t)v), json_integer(counts[v]));
    json_object_set_new(root, "summary", summary);
    return root;
}

int report_json_write(FILE *fp, const result_list_t *rows, const run_info_t *info)
{
    json_t *root = report_json_build(rows, info);
    int st = json_dumpf(root, fp, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    fputc('\n', fp);
    json_decref(root);
    return st;
}
