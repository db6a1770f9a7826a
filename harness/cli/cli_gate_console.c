/* realpath(3) */
#define _DEFAULT_SOURCE
#include "cli_gate_console.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_colour.h"
#include "cli_run_summary.h"
#include "cli_shell_words.h"
#include "registry.h"
#include "kr_string.h"
#include "report.h"
#include "term_layout.h"

/* Rows listed by name under NEW / MISSING before "... and N more". */
#define LISTED_MAX 20

/* A name, note or diagnosis from a row (anyone's text: a partial, a
 * baseline) made inert for the terminal (kr_string.h). */
#define TERM(s) term_text((s), (char[1024]){0}, 1024)

static const char *term_text(const char *s, char *buf, size_t cap)
{
    kr_str_printable(s, buf, cap);
    return buf;
}

static int needs_attention(const result_t *r)
{
    return verdict_is_failure(r->verdict);
}

/* Does --inject [KERNELS=]FAULT fault this kernel?  A rerun of another
 * kernel's row leaves it out: a fault aimed at no kernel it runs is an error. */
static int inject_reaches(const char *inject, const char *kernel)
{
    const char *eq = strchr(inject, '=');
    if (!eq)
        return 1;
    char globs[256];
    snprintf(globs, sizeof globs, "%.*s", (int)(eq - inject), inject);
    return kernel_name_matches(kernel, globs);
}

/* The one command that reruns exactly this row's case and kernel, with the
 * run's suite, policy, seeds, fault and baseline. */
static void rerun_command(FILE *fp, const gate_options_t *o, const result_t *r)
{
    fputs("    rerun: ", fp);
    cli_binary_word(fp);
    fputs(" gate ", fp);
    cli_path_word(fp, o->suite_path);
    fputs(" -o ", fp);
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/rerun", o->run_dir);
    char abs[PATH_MAX];
    if (realpath(o->run_dir, abs))
        snprintf(dir, sizeof dir, "%s/rerun", abs);
    cli_shell_word(fp, dir);
    fputs(" --only-case ", fp);
    cli_shell_word(fp, TERM(r->case_name));
    fputs(" --kernels ", fp);
    cli_shell_word(fp, TERM(r->kernel));
    if (o->policy_path) {
        fputs(" --policy ", fp);
        cli_path_word(fp, o->policy_path);
    }
    if (o->seed_first > 0)
        fprintf(fp, " --seeds %lld-%lld", o->seed_first, o->seed_last);
    if (o->inject && inject_reaches(o->inject, r->kernel)) {
        fputs(" --inject ", fp);
        cli_shell_word(fp, o->inject);
    }
    if (o->baseline_path) {
        fputs(" --baseline ", fp);
        cli_path_word(fp, o->baseline_path);
        fputs(" --allow-missing", fp);
    }
    fputc('\n', fp);
}

/* The command that shrinks this failing row's case to a small one that
 * fails the same way (kreplay reduce, with the run's suite, policy and
 * fault), next to the rerun.  A regression or an error has no failure of
 * its own to keep. */
static void reduce_command(FILE *fp, const gate_options_t *o, const result_t *r)
{
    if (r->verdict == VERDICT_REGRESSED || r->verdict == VERDICT_ERROR || !strncmp(r->reference, "model:", 6))
        return;
    fputs("    reduce: ", fp);
    cli_binary_word(fp);
    fputs(" reduce ", fp);
    if (strncmp(r->case_path, "synth:", 6) == 0)
        cli_shell_word(fp, TERM(r->case_path));
    else
        cli_path_word(fp, r->case_path);
    fputs(" --kernels ", fp);
    cli_shell_word(fp, TERM(r->kernel));
    fputs(" --ref ", fp);
    cli_shell_word(fp, TERM(strcmp(r->reference, "-") ? r->reference : "R_exact"));
    fputs(" --suite ", fp);
    cli_path_word(fp, o->suite_path);
    if (o->policy_path) {
        fputs(" --policy ", fp);
        cli_path_word(fp, o->policy_path);
    }
    if (o->inject) {
        fputs(" --inject ", fp);
        cli_shell_word(fp, o->inject);
    }
    if (r->verdict == VERDICT_NONDETERMINISTIC)
        fputs(" --reruns 3", fp);
    char out[4400], abs[PATH_MAX];
    snprintf(out, sizeof out, "%s/reduced/%s.%s.h5", realpath(o->run_dir, abs) ? abs : o->run_dir,
             r->case_name, r->kernel);
    fputs(" -o ", fp);
    cli_shell_word(fp, out);
    fputc('\n', fp);
}

static void print_counts(FILE *fp, const result_list_t *rows, int colour)
{
    const char *before[VERDICT_COUNT];
    for (int v = 0; v < VERDICT_COUNT; v++)
        before[v] = cli_colour_of((verdict_t)v, colour);
    report_summary_line_marked(fp, rows, before, cli_colour_reset(colour));
}

static void print_row(FILE *fp, const gate_options_t *o, const result_t *r, int colour)
{
    fprintf(fp, "%s%-10s%s %s  %s / %s  M=%lld N=%lld K=%lld  rel_fro %.4g (threshold %.4g)",
            cli_colour_of(r->verdict, colour), verdict_name(r->verdict), cli_colour_reset(colour),
            TERM(r->case_name), TERM(r->kernel), TERM(r->reference), (long long)r->M, (long long)r->N,
            (long long)r->K, r->metrics.rel_fro, r->threshold);
    if (r->ulp.count > 0)
        fprintf(fp, "  identical %lld/%lld", (long long)r->ulp.identical, (long long)r->ulp.count);
    fputc('\n', fp);
    if (r->note[0])
        fprintf(fp, "    %s\n", TERM(r->note));
    if (r->diagnosis[0])
        fprintf(fp, "    diagnosis: %s\n", TERM(r->diagnosis));
    rerun_command(fp, o, r);
    reduce_command(fp, o, r);
}

static void list_names(FILE *fp, const char *what, const result_t *const *rows, int64_t n)
{
    if (n == 0)
        return;
    fprintf(fp, "\n%s (%lld):\n", what, (long long)n);
    for (int64_t i = 0; i < n && i < LISTED_MAX; i++)
        fprintf(fp, "  %s [%s] %s / %s\n", TERM(rows[i]->case_name), TERM(rows[i]->case_id),
                TERM(rows[i]->kernel), TERM(rows[i]->reference));
    if (n > LISTED_MAX)
        fprintf(fp, "  ... and %lld more (the report lists every row)\n", (long long)(n - LISTED_MAX));
}

static void console_lines(FILE *fp, const gate_console_t *con, const gate_options_t *o, const result_list_t *rows,
                          const gate_summary_t *sum, int ran, int colour, int width);

/* Written whole, then each line fitted to the width (term_layout.h): notes
 * and diagnoses wrapped, rerun commands continued with a backslash. */
void gate_console_print(FILE *fp, const gate_console_t *con, const gate_options_t *o,
                        const result_list_t *rows, const gate_summary_t *sum, int ran)
{
    const int width = term_width(fp), colour = cli_colour_wanted(fp);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        console_lines(fp, con, o, rows, sum, ran, colour, -1);
        return;
    }
    console_lines(mem, con, o, rows, sum, ran, colour, width);
    fclose(mem);
    term_wrap_lines(fp, buf, width);
    free(buf);
}

static void console_lines(FILE *fp, const gate_console_t *con, const gate_options_t *o, const result_list_t *rows,
                          const gate_summary_t *sum, int ran, int colour, int width)
{
    int64_t attention = 0, failing = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        attention += needs_attention(&rows->rows[i]);
        /* A REGRESSED verdict is counted as regressed, not twice. */
        failing += needs_attention(&rows->rows[i]) && rows->rows[i].verdict != VERDICT_REGRESSED;
    }
    const int failed = !ran || sum->failing || sum->baseline_failed;
    fprintf(fp, "gate %s%s%s: ", failed ? cli_colour_of(VERDICT_ERROR, colour) : cli_colour_of(VERDICT_PASS, colour),
            !ran ? "INCOMPLETE" : failed ? "FAILED" : "PASSED", cli_colour_reset(colour));
    print_counts(fp, rows, colour);
    fprintf(fp, "  %lld failing, %lld regressed, %lld improved", (long long)failing,
            (long long)sum->regressed, (long long)sum->improved);
    if (o->baseline_path)
        fprintf(fp, ", %lld missing%s, %lld new against %s", (long long)sum->missing,
                sum->missing && o->allow_missing ? " (allowed)" : "", (long long)sum->new_rows,
                o->baseline_path);
    else
        fprintf(fp, " (no baseline)");
    fprintf(fp, "; %lld cases (%lld resumed), %.1f s\n", (long long)sum->cases_planned,
            (long long)sum->cases_resumed, sum->seconds);
    fprintf(fp, "  report: %s/report.html (results.h5, results.json, results.csv, report.md beside it)\n",
            o->run_dir);
    if (o->junit_path)
        fprintf(fp, "  junit: %s\n", o->junit_path);
    cli_fault_summary(fp, rows);
    if (con->quiet)
        return;

    if (attention > 0) {
        fprintf(fp, "\n%lld row%s failing or regressed%s:\n", (long long)attention, attention == 1 ? "" : "s",
                con->all_rows ? "" : " (--all-rows for every row)");
        for (int64_t i = 0; i < rows->count; i++)
            if (needs_attention(&rows->rows[i]))
                print_row(fp, o, &rows->rows[i], colour);
    }
    const result_t **listed = malloc((size_t)(sum->added_rows.count + sum->missing_rows.count + 1) * sizeof *listed);
    if (listed) {
        int64_t n = 0;
        for (int64_t i = 0; i < sum->missing_rows.count; i++)
            listed[n++] = &sum->missing_rows.rows[i];
        list_names(fp, o->allow_missing ? "MISSING from this run (allowed)" : "MISSING from this run (fails the gate)",
                   listed, n);
        n = 0;
        for (int64_t i = 0; i < sum->added_rows.count; i++)
            listed[n++] = &sum->added_rows.rows[i];
        list_names(fp, "NEW (no baseline row)", listed, n);
        free(listed);
    }
    if (con->all_rows && rows->count > 0) {
        fputc('\n', fp);
        const report_table_options_t table = {width, 0};
        report_table_print_with(fp, rows, &table);
    }
}
