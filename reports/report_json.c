#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "case_headline.h"
#include "report.h"
#include "result_fields.h"
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
        /* Rows nest at each '.' of the field table's column names, so
         * pandas.json_normalize(doc["results"]) has results.csv's columns. */
        json_array_append_new(arr, result_fields_json(&rows->rows[i]));
        counts[rows->rows[i].verdict]++;
    }
    /* One headline per case: who is at fault, the verdict, why. */
    json_object_set_new(root, "cases", case_headlines_json(rows));
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
