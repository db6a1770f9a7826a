#include "gate.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "baseline.h"
#include "case_io.h"
#include "case_name.h"
#include "case_load.h"
#include "fault_inject.h"
#include "gate_fingerprint.h"
#include "gate_preflight.h"
#include "gate_gpu.h"
#include "gate_lanes.h"
#include "gate_selection.h"
#include "kr_string.h"
#include "partials_validate.h"
#include "path_name.h"
#include "judge.h"
#include "kernel_selection.h"
#include "policy.h"
#include "progress.h"
#include "py_kernels.h"
#include "registry.h"
#include "replay.h"
#include "results_store.h"
#include "resume_check.h"
#include "run_dir_check.h"
#include "suite.h"
#include "synth.h"
#include "row_reference.h"

/* One case of the plan: a file, or synthetic case j of item i. */
typedef struct {
    char key[512];
    const char *file;
    int synth_item;
    int64_t synth_index;
    int64_t N, K, M;            /* known up front for synthetic cases; 0 for files */
} plan_item_t;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int build_plan(const suite_t *s, plan_item_t **out, int64_t *count, kr_error_t *err)
{
    int64_t n = s->n_files;
    for (int i = 0; i < s->n_synth; i++)
        n += suite_synth_count(&s->synth[i]);
    plan_item_t *plan = calloc((size_t)(n > 0 ? n : 1), sizeof *plan);
    if (!plan)
        return kr_fail(err, "out of memory for the run plan");
    int64_t k = 0;
    for (int i = 0; i < s->n_files; i++, k++) {
        plan[k].file = s->files[i];
        kr_strlcpy(plan[k].key, s->files[i], sizeof plan[k].key);
    }
    for (int i = 0; i < s->n_synth; i++) {
        for (int64_t j = 0; j < suite_synth_count(&s->synth[i]); j++, k++) {
            synth_params_t p;
            if (suite_synth_params(&s->synth[i], j, &p)) {
                free(plan);
                return kr_fail(err, "%s: synthetic item %d case %lld is invalid", s->path, i,
                               (long long)j);
            }
            plan[k].synth_item = i;
            plan[k].synth_index = j;
            plan[k].N = p.N;
            plan[k].K = p.K;
            plan[k].M = p.M;
            snprintf(plan[k].key, sizeof plan[k].key, "synth:%s:%lldx%lld:M%lld:s%llu:i%d",
                     p.layer ? p.layer : "shape", (long long)p.N, (long long)p.K, (long long)p.M,
                     (unsigned long long)p.seed, i);
        }
    }
    *out = plan;
    *count = k;
    return 0;
}

static int load_plan_case(const suite_t *s, const plan_item_t *it, case_t *c, kr_error_t *err)
{
    if (it->file)
        return case_load_safe(it->file, c, NULL, 0, err);
    synth_params_t p;
    if (suite_synth_params(&s->synth[it->synth_item], it->synth_index, &p))
        return kr_fail(err, "%s: bad synthetic case %s", s->path, it->key);
    if (synth_case(&p, c, err))
        return -1;
    c->path = strdup(it->key);
    return c->path ? 0 : kr_fail(err, "out of memory");
}

/* The case_name the rows of plan item i get. */
static void plan_item_name_at(const void *plan, int64_t i, char *buf, size_t cap)
{
    const plan_item_t *it = &((const plan_item_t *)plan)[i];
    case_short_name(it->file ? it->file : it->key, buf, (int)cap);
}

/* Is this the case named `name` (the case_name its rows get)?  NULL: any. */
static int plan_item_named(const plan_item_t *it, const char *name)
{
    if (!name)
        return 1;
    char short_name[256];
    case_short_name(it->file ? it->file : it->key, short_name, sizeof short_name);
    return strcmp(short_name, name) == 0;
}

/* Drops the rows of other shapes. */
static void keep_shape(result_list_t *l, int64_t N, int64_t K)
{
    int64_t k = 0;
    for (int64_t i = 0; i < l->count; i++)
        if (l->rows[i].N == N && l->rows[i].K == K)
            l->rows[k++] = l->rows[i];
    l->count = k;
}

void gate_summary_free(gate_summary_t *sum)
{
    result_list_free(&sum->missing_rows);
    result_list_free(&sum->added_rows);
}

static int key_done(char **keys, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i], key))
            return 1;
    return 0;
}

/* Rows are judged inside the replay, by the gate's policy (judge.h): the
 * band names are the suite's. */
static const char *gate_band_of(const void *suite, int64_t M)
{
    return suite_band_of((const suite_t *)suite, M);
}

/* Resumed rows judged again by a changed policy: the same judgement replay
 * applies (judge.h); the replay's own note is kept after the new verdict's. */
static void judge_rows(const suite_t *s, const policy_t *pol, result_t *rows, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        result_t *r = &rows[i];
        kr_strlcpy(r->band, suite_band_of(s, r->M), sizeof r->band);
        if (!strcmp(r->reference, ROW_REF_NONE) || !strcmp(r->reference, ROW_REF_RERUN))
            continue;
        policy_rule_t rule;
        judge_rule_for(pol, kernel_find(r->kernel), r, r->threshold, &rule);
        char note[sizeof r->note];
        const verdict_t v = judge_row(&rule, r, NULL, note, sizeof note);
        char old_note[sizeof r->note];
        kr_strlcpy(old_note, r->note, sizeof old_note);
        snprintf(r->note, sizeof r->note, "%.240s; judged again (policy changed), replay's note: %.220s", note, old_note);
        r->verdict = v;
        r->threshold = rule.rel_fro;
    }
}

static int copy_file_atomic(const char *from, const char *to, kr_error_t *err)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return kr_fail(err, "%s: cannot read", from);
    atomic_file_t f;
    if (atomic_file_open(&f, to, err)) {
        fclose(in);
        return -1;
    }
    char buf[65536];
    size_t got;
    int short_write = 0;
    while (!short_write && (got = fread(buf, 1, sizeof buf, in)) > 0)
        short_write = fwrite(buf, 1, got, f.fp) != got;
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        atomic_file_abort(&f);
        return kr_fail(err, "%s: read error", from);
    }
    if (short_write) {
        int e = errno;
        atomic_file_abort(&f);
        return kr_fail(err, "%s: write failed: %s", to, strerror(e));
    }
    return atomic_file_commit(&f, err);
}

/* A run's outputs left by an earlier run in the same directory would read as
 * this run's if this one stops before writing its own. */
static int remove_stale_outputs(const char *run_dir, kr_error_t *err)
{
    static const char *const names[] = {"results.h5", "results.json", "results.csv", "report.md",
                                        "report.html"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", run_dir, names[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            return kr_fail(err, "%s: cannot remove the earlier run's file: %s", path, strerror(errno));
    }
    return 0;
}

/* One gate run's state, shared by its steps. */
typedef struct {
    const gate_options_t *o;
    suite_t s;
    policy_t pol;
    int have_policy;
    const char *policy_path;
    kr_plugin_t *py;                        /* the suite's python: kernels, if any */
    const kernel_desc_t *py_kernels[SUITE_MAX_PYTHON];
    char patterns[1024];
    char inject[256];
    replay_options_t ropt;
    int64_t only_n, only_k;                 /* --only-shape; 0: every shape */
    gpu_list_t gpus;                        /* --gpus */
    plan_item_t *plan;
    int64_t n_plan;
    char **done;                            /* keys of the resumed cases */
    int n_done;
    int baseline_missing;
    gate_seen_t seen;                       /* the cases' shapes and bands, for an empty selection */
} gate_state_t;

/* The suite, its policy (or the calibrated default, as replay uses) and
 * --seeds.  On failure nothing is left to free. */
static int gate_load_suite(gate_state_t *g, kr_error_t *err)
{
    const gate_options_t *o = g->o;
    if (suite_load(o->suite_path, &g->s, err))
        return -1;
    g->policy_path = o->policy_path ? o->policy_path : g->s.policy_path;
    if (g->policy_path ? policy_load(g->policy_path, &g->pol, err) : judge_default_policy(&g->pol, err)) {
        suite_free(&g->s);
        return -1;
    }
    g->have_policy = 1;
    if (o->seed_first > 0) {
        if (o->seed_last < o->seed_first || o->seed_last - o->seed_first >= SUITE_MAX_LIST) {
            suite_free(&g->s);
            policy_free(&g->pol);
            g->have_policy = 0;
            return kr_fail(err, "--seeds %lld-%lld: at most %d seeds, first <= last", o->seed_first,
                           o->seed_last, SUITE_MAX_LIST);
        }
        for (int i = 0; i < g->s.n_synth; i++) {
            g->s.synth[i].n_seeds = (int)(o->seed_last - o->seed_first + 1);
            for (int j = 0; j < g->s.synth[i].n_seeds; j++)
                g->s.synth[i].seeds[j] = o->seed_first + j;
        }
    }
    return 0;
}

/* The provenance every partial and the results file carry. */
static void gate_fill_meta(const gate_state_t *g, results_meta_t *meta)
{
    const gate_options_t *o = g->o;
    results_meta_init(meta);
    kr_strlcpy(meta->version, o->version ? o->version : "", sizeof meta->version);
    kr_strlcpy(meta->git_commit, o->git_commit ? o->git_commit : "unknown", sizeof meta->git_commit);
    kr_strlcpy(meta->device, gate_gpu_device_name(o, g->s.device), sizeof meta->device);
    snprintf(meta->kernel_build_id, sizeof meta->kernel_build_id, "cpu models, kreplay %s",
             meta->git_commit);
    kr_strlcpy(meta->suite_name, g->s.name, sizeof meta->suite_name);
    snprintf(meta->suite_hash, sizeof meta->suite_hash, "%s%s%s", g->s.hash, g->have_policy ? "+" : "",
             g->have_policy ? g->pol.hash : "");
    kr_strlcpy(meta->command, o->command ? o->command : "", sizeof meta->command);
    kr_strlcpy(meta->policy, g->have_policy ? g->policy_path : "", sizeof meta->policy);
    if (o->shard_count > 0)
        snprintf(meta->shard, sizeof meta->shard, "%d/%d", o->shard_index, o->shard_count);
    gate_fingerprint(o->options_fingerprint, &g->s, meta->options, sizeof meta->options);
}

/* --resume: the earlier partials' rows and keys.  Partials of another suite
 * or build are refused; those judged by another policy are judged again. */
static int gate_resume(gate_state_t *g, const results_meta_t *meta, result_list_t *rows,
                       gate_summary_t *sum, kr_error_t *err)
{
    resume_check_t rc;
    if (resume_check_partials(g->o->run_dir, meta, &rc, err) ||
        results_store_load_partials(g->o->run_dir, rows, &g->done, &g->n_done, err))
        return -1;
    if (rc.policy_changed) {
        judge_rows(&g->s, g->have_policy ? &g->pol : NULL, rows->rows, rows->count);
        sum->rejudged = rows->count;
        fprintf(stderr, "kreplay gate: --resume: the policy changed since %s/partial was written "
                        "(%s): %lld resumed rows judged again\n",
                g->o->run_dir, rc.old_suite_hash, (long long)rows->count);
    }
    return 0;
}

/* The suite's python: kernels, added to the replay beside the registry's. */
static int gate_load_python(gate_state_t *g, kr_error_t *err)
{
    const char *specs[SUITE_MAX_PYTHON];
    for (int i = 0; i < g->s.n_python; i++)
        specs[i] = g->s.python[i];
    if (py_kernels_load(specs, g->s.n_python, &g->py, err))
        return -1;
    for (int i = 0; i < g->s.n_python; i++)
        g->py_kernels[i] = plugin_kernel_at(g->py, i);
    g->ropt.extra_kernels = g->py_kernels;
    g->ropt.n_extra_kernels = g->s.n_python;
    if (g->ropt.kernel_patterns) {     /* the kernels: globs select registry kernels */
        snprintf(g->patterns, sizeof g->patterns, "%s,py.*", g->ropt.kernel_patterns);
        g->ropt.kernel_patterns = g->patterns;
    }
    return 0;
}

/* --inject [KERNELS=]SPEC */
static int gate_parse_inject(gate_state_t *g, kr_error_t *err)
{
    kr_strlcpy(g->inject, g->o->inject, sizeof g->inject);
    char *spec = g->inject, *eq = strchr(g->inject, '=');
    if (eq) {
        *eq = '\0';
        g->ropt.fault_kernels = g->inject;
        spec = eq + 1;
    }
    return fault_parse(spec, &g->ropt.fault, err);
}

/* The replay options the suite and the command line ask for. */
static int gate_replay_options(gate_state_t *g, kr_error_t *err)
{
    const gate_options_t *o = g->o;
    replay_options_t *ropt = &g->ropt;
    replay_options_default(ropt);
    ropt->kernel_patterns = o->kernels ? o->kernels : g->s.kernels[0] ? g->s.kernels : NULL;
    if (g->s.n_python && gate_load_python(g, err))
        return -1;
    ropt->refs = g->s.refs;
    ropt->kernel.threads = o->threads;
    ropt->gpu_reruns = g->s.reruns > 0 ? g->s.reruns : 3;
    ropt->policy = &g->pol;
    ropt->band_of = gate_band_of;
    ropt->band_ctx = &g->s;
    if (gate_gpu_setup(g->s.path, g->s.device, o, ropt, &g->gpus, err))
        return -1;
    if (o->inject && (gate_parse_inject(g, err) || kernel_selection_check(ropt, "--inject", ropt->fault_kernels, err)))
        return -1;
    if ((o->only_shape && gate_check_only_shape(&g->s, o->only_shape, &g->only_n, &g->only_k, err)) ||
        (o->only_band && gate_check_only_band(&g->s, o->only_band, err)))
        return -1;
    return o->only_case ? gate_check_only_case(o->only_case, g->n_plan, plan_item_name_at, g->plan, err) : 0;
}

/* Is plan item i this run's: in its shard, of the shape and band asked for
 * (file cases are filtered by shape after reading), the case named? */
static int gate_plan_selected(const gate_state_t *g, int64_t i)
{
    const gate_options_t *o = g->o;
    const plan_item_t *it = &g->plan[i];
    if (o->shard_count > 0 && i % o->shard_count != o->shard_index - 1)
        return 0;
    if (g->only_n && it->N && (it->N != g->only_n || it->K != g->only_k))
        return 0;
    if (o->only_band && it->N && strcmp(suite_band_of(&g->s, it->M), o->only_band))
        return 0;
    return plan_item_named(it, o->only_case);
}

/* A file case read only now turns out to be of another shape or band. */
static int gate_case_filtered_out(const gate_state_t *g, const case_t *c)
{
    return (g->only_n && (c->N != g->only_n || c->K != g->only_k)) ||
           (g->o->only_band && strcmp(suite_band_of(&g->s, c->M), g->o->only_band));
}

static void gate_note_input_error(gate_summary_t *sum, const plan_item_t *it, const kr_error_t *cerr)
{
    fprintf(stderr, "kreplay: error: %s\n", cerr->msg);
    if (sum->n_failed_keys < 16)
        kr_strlcpy(sum->failed_keys[sum->n_failed_keys++], it->key, sizeof sum->failed_keys[0]);
    sum->input_errors++;
}

/* What became of one plan item. */
enum { ITEM_SKIPPED, ITEM_RESUMED, ITEM_INPUT_ERROR, ITEM_FILTERED, ITEM_REPLAY_ERROR, ITEM_RUN,
       ITEM_LOST };

/* The case loop's state: where each item's outcome goes. */
typedef struct {
    gate_state_t *g;
    const results_meta_t *meta;
    result_list_t *rows;
    gate_summary_t *sum;
    progress_t prog;
    int64_t todo, done_count;
} gate_loop_t;

/* Plan item i read (a file or a synthetic case), filtered by shape and band,
 * and replayed into rows. */
static void gate_item_run(gate_state_t *g, int64_t i, result_list_t *rows, int *outcome,
                          kr_error_t *cerr)
{
    const plan_item_t *it = &g->plan[i];
    case_t c;
    if (!gate_plan_selected(g, i)) {
        *outcome = ITEM_SKIPPED;
    } else if (key_done(g->done, g->n_done, it->key)) {
        *outcome = ITEM_RESUMED;
    } else if (load_plan_case(&g->s, it, &c, cerr)) {
        *outcome = ITEM_INPUT_ERROR;
    } else {
        /* a file case's shape is known only now (in a GPU lane's process it
         * reaches the parent's count through the outcome, not this list) */
        gate_seen_add(&g->seen, c.N, c.K, suite_band_of(&g->s, c.M));
        *outcome = gate_case_filtered_out(g, &c) ? ITEM_FILTERED
                   : replay_case(&c, &g->ropt, rows, cerr) ? ITEM_REPLAY_ERROR
                                                            : ITEM_RUN;
        case_free(&c);
    }
}

/* Item i's outcome in the run: the summary, its partial (the rows of a case
 * as soon as it is done), the progress line. */
static int gate_item_apply(gate_loop_t *lp, int64_t i, int outcome, const kr_error_t *cerr,
                           const result_t *rows, int64_t n_rows, kr_error_t *err)
{
    gate_state_t *g = lp->g;
    gate_summary_t *sum = lp->sum;
    switch (outcome) {
    case ITEM_SKIPPED:
        return 0;
    case ITEM_FILTERED:
        sum->cases_planned--;
        lp->prog.total = --lp->todo;
        return 0;
    case ITEM_RESUMED:
        sum->cases_resumed++;
        break;
    case ITEM_INPUT_ERROR:
        gate_note_input_error(sum, &g->plan[i], cerr);
        break;
    case ITEM_REPLAY_ERROR:
    case ITEM_LOST:
        fprintf(stderr, "kreplay: error: %s%s%s\n", outcome == ITEM_LOST ? g->plan[i].key : "",
                outcome == ITEM_LOST ? ": " : "", cerr->msg);
        sum->input_errors++;
        break;
    default:
        if (results_store_append_case(g->o->run_dir, g->plan[i].key, rows, n_rows, lp->meta, err))
            return -1;
        sum->cases_run++;
        break;
    }
    progress_update(&lp->prog, ++lp->done_count);
    return 0;
}

/* ---- the same loop over several GPUs (gate_lanes.h) ---- */

static int lane_begin(void *ctx, int device, kr_error_t *err)
{
    gate_loop_t *lp = ctx;
    lp->g->ropt.progress = NULL;    /* the gate's process draws the progress line */
    return gpu_setup_open(&lp->g->ropt, device, err) || gpu_setup_ready(&lp->g->ropt, err) ? -1 : 0;
}

static void lane_end(void *ctx)
{
    gpu_setup_close(&((gate_loop_t *)ctx)->g->ropt);
}

static void lane_run_item(void *ctx, int64_t i, result_list_t *rows, int *outcome, kr_error_t *cerr)
{
    gate_item_run(((gate_loop_t *)ctx)->g, i, rows, outcome, cerr);
}

static int lane_apply(void *ctx, int64_t i, int outcome, const kr_error_t *cerr, const result_t *rows,
                      int64_t n_rows, kr_error_t *err)
{
    gate_loop_t *lp = ctx;
    for (int64_t r = 0; r < n_rows; r++) {
        result_t *row = result_list_add(lp->rows);
        if (!row)
            return kr_fail(err, "out of memory for results");
        *row = rows[r];
    }
    return gate_item_apply(lp, i, outcome, cerr, rows, n_rows, err);
}

/* Replays every selected case not resumed, appending each case's rows to
 * its partial as soon as it is done: here, or over the GPUs' lanes. */
static int gate_run_cases(gate_state_t *g, const results_meta_t *meta, result_list_t *rows,
                          gate_summary_t *sum, kr_error_t *err)
{
    gate_loop_t lp = {.g = g, .meta = meta, .rows = rows, .sum = sum};
    for (int64_t i = 0; i < g->n_plan; i++) {
        lp.todo += gate_plan_selected(g, i);
        if (g->plan[i].N)
            gate_seen_add(&g->seen, g->plan[i].N, g->plan[i].K, suite_band_of(&g->s, g->plan[i].M));
    }
    sum->cases_planned = lp.todo;
    /* Every input is good: only now is the earlier run's work discarded. */
    if (!g->o->resume)
        run_dir_clear_partials(g->o->run_dir);
    if (remove_stale_outputs(g->o->run_dir, err))
        return -1;
    progress_start(&lp.prog, "kreplay gate", lp.todo);
    g->ropt.progress = &lp.prog;
    int status = 0, devices[GPU_LIST_MAX];
    const int lanes = gate_gpu_lanes(&g->ropt, &g->gpus, devices);
    if (lanes > 1) {
        gpu_setup_close(&g->ropt);  /* each lane opens its own */
        const gate_lanes_t l = {.ctx = &lp, .n_items = g->n_plan, .lane_begin = lane_begin,
                                .lane_end = lane_end, .run_item = lane_run_item, .apply = lane_apply,
                                .lost_outcome = ITEM_LOST};
        status = gate_lanes_run(&l, devices, lanes, err);
    }
    for (int64_t i = 0; lanes == 1 && i < g->n_plan && status == 0; i++) {
        const int64_t first = rows->count;
        int outcome;
        kr_error_t cerr = {{0}};
        gate_item_run(g, i, rows, &outcome, &cerr);
        status = gate_item_apply(&lp, i, outcome, &cerr, rows->rows + first, rows->count - first, err);
    }
    if (status == 0)
        progress_finish(&lp.prog);
    g->ropt.progress = NULL;
    return status;
}

/* Is key a case of the plan that this run selects?  (partials_validate) */
static int gate_key_planned(const void *ctx, const char *key)
{
    const gate_state_t *g = ctx;
    for (int64_t i = 0; i < g->n_plan; i++)
        if (!strcmp(g->plan[i].key, key))
            return gate_plan_selected(g, i);
    return 0;
}

/* --resume: the partials' rows are what this run would have written. */
static int gate_check_partials(const gate_state_t *g, const result_list_t *rows, kr_error_t *err)
{
    const partials_plan_t plan = {
        .run_dir = g->o->run_dir, .kernel_patterns = g->ropt.kernel_patterns,
        .extra_kernels = g->ropt.extra_kernels, .n_extra_kernels = g->ropt.n_extra_kernels,
        .planned = gate_key_planned, .planned_ctx = g,
    };
    return partials_validate(&plan, rows, g->done, g->n_done, err);
}

/* The run's rows against --baseline: the counts and the missing and new
 * rows go into the summary. */
static int gate_compare_baseline(const gate_state_t *g, result_list_t *rows, gate_summary_t *sum,
                                 kr_error_t *err)
{
    const gate_options_t *o = g->o;
    result_list_t base = {0};
    results_meta_t base_meta;
    if (results_store_read(o->baseline_path, &base, &base_meta, err) ||
        baseline_check_identity(&base, o->baseline_path, err) ||
        baseline_check_usable(&base, &base_meta, o->baseline_path, g->s.name,
                              o->baseline_other_suite, err)) {
        result_list_free(&base);
        return -1;
    }
    if (g->only_n) /* a one-shape run is compared with that shape's baseline rows */
        keep_shape(&base, g->only_n, g->only_k);
    baseline_report_t rep;
    if (baseline_compare(rows, &base, NULL, &rep) == 0) {
        sum->regressed = rep.n[BASELINE_REGRESSED];
        sum->improved = rep.n[BASELINE_IMPROVED];
        sum->new_rows = rep.n[BASELINE_NEW];
        sum->missing = rep.n[BASELINE_MISSING];
        sum->baseline_failed = baseline_gate_failed(&rep, o->allow_missing);
        for (int64_t i = 0; i < rep.count; i++) {
            const baseline_entry_t *e = &rep.entries[i];
            result_t *m;
            if (e->cls == BASELINE_MISSING && (m = result_list_add(&sum->missing_rows)))
                *m = base.rows[e->base_index];
            else if (e->cls == BASELINE_NEW && (m = result_list_add(&sum->added_rows)))
                *m = rows->rows[e->run_index];
        }
        baseline_report_free(&rep);
    }
    result_list_free(&base);
    return 0;
}

/* results.h5, its copy into --history, and the baseline a first run makes. */
static int gate_write_outputs(const gate_state_t *g, const result_list_t *rows, const results_meta_t *meta,
                              gate_summary_t *sum, kr_error_t *err)
{
    const gate_options_t *o = g->o;
    char path[4400];
    snprintf(path, sizeof path, "%s/results.h5", o->run_dir);
    if (results_store_write(path, rows, meta, err))
        return -1;
    if (o->history_dir) {
        char hist[4400];
        if (make_dirs(o->history_dir, err))
            return -1;
        char when[64], commit[96];
        path_component(meta->time_utc, when, sizeof when);
        path_component(meta->git_commit, commit, sizeof commit);
        snprintf(hist, sizeof hist, "%s/%s_%s.h5", o->history_dir, when, commit);
        if (copy_file_atomic(path, hist, err))
            return -1;
    }
    if (g->baseline_missing && sum->input_errors == 0) {
        if (make_parent_dirs(o->baseline_path, err) || copy_file_atomic(path, o->baseline_path, err))
            return -1;
        sum->baseline_created = 1;
    }
    return 0;
}

/* Everything after the suite is loaded, in order; stops at the first step
 * that fails. */
static int gate_steps(gate_state_t *g, results_meta_t *meta, result_list_t *rows, gate_summary_t *sum,
                      kr_error_t *err)
{
    const gate_options_t *o = g->o;
    /* Everything the run needs is checked before its first case. */
    if (suite_check_case_count(&g->s, err)) {
        kr_error_t e = *err;
        return kr_fail(err, "%s: %s", g->s.path, e.msg);
    }
    const run_dir_request_t rq = {.dir = o->run_dir, .suite_name = g->s.name, .resume = o->resume, .force = o->force};
    if (gate_preflight(o, &g->baseline_missing, err) || run_dir_check(&rq, err) ||
        build_plan(&g->s, &g->plan, &g->n_plan, err))
        return -1;
    gate_fill_meta(g, meta);
    if (o->resume && gate_resume(g, meta, rows, sum, err))
        return -1;
    if (gate_replay_options(g, err) || (o->resume && gate_check_partials(g, rows, err)) ||
        gate_run_cases(g, meta, rows, sum, err))
        return -1;
    result_list_sort(rows);
    if (o->baseline_path && !g->baseline_missing && gate_compare_baseline(g, rows, sum, err))
        return -1;
    /* A run that selected no case writes nothing: gate_run refuses it, and an
     * empty results.h5 left behind could pass for a run. */
    if (sum->cases_planned > 0 && gate_write_outputs(g, rows, meta, sum, err))
        return -1;
    sum->rows = rows->count;
    for (int64_t i = 0; i < rows->count; i++)
        sum->failing += verdict_is_failure(rows->rows[i].verdict);
    return 0;
}

int gate_run(const gate_options_t *o, result_list_t *rows_out, results_meta_t *meta_out,
             gate_summary_t *sum, kr_error_t *err)
{
    memset(sum, 0, sizeof *sum);
    memset(rows_out, 0, sizeof *rows_out);
    const double t0 = now_seconds();
    gate_state_t g;
    memset(&g, 0, sizeof g);
    g.o = o;
    if (gate_load_suite(&g, err))
        return -1;
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    result_list_t rows = {0};
    int status = gate_steps(&g, &meta, &rows, sum, err);
    if (status == 0)
        sum->seconds = now_seconds() - t0;
    if (status == 0 && sum->input_errors)
        status = kr_fail(err, "%lld case(s) could not be read (see the errors above)",
                         (long long)sum->input_errors);
    if (status == 0)
        status = gate_check_selected(o, g.s.name, sum->cases_planned, &g.seen, &rows, err);
    results_store_free_keys(g.done, g.n_done);
    *rows_out = rows;
    *meta_out = meta;
    free(g.plan);
    if (g.have_policy)
        policy_free(&g.pol);
    suite_free(&g.s);
    gpu_setup_close(&g.ropt);
    if (g.py)
        plugin_unload(g.py);
    return status;
}

static void add_word(char *list, size_t cap, const char *word)
{
    char padded[80];
    snprintf(padded, sizeof padded, ",%s,", word);
    char wrapped[160];
    snprintf(wrapped, sizeof wrapped, ",%s,", list);
    if (strstr(wrapped, padded))
        return;
    size_t len = strlen(list);
    snprintf(list + len, cap - len, "%s%s", len ? "," : "", word);
}

typedef struct {
    int64_t N, K;
    char bands[64];
    char families[128];   /* of the kernels that can run some case of the shape */
    struct {
        char band[16];
        char families[128];   /* of the kernels that can run some case of the shape x band */
    } per[8];
    int n_per;
} shape_entry_t;

/* Adds the families of the suite's kernels that can run (M, N, K) to e and to band b of it. */
static void add_families(const suite_t *s, shape_entry_t *e, const char *band, int64_t M)
{
    int b = 0;
    while (b < e->n_per && strcmp(e->per[b].band, band) != 0)
        b++;
    if (b == e->n_per) {
        if (e->n_per == (int)(sizeof e->per / sizeof e->per[0]))
            return;
        snprintf(e->per[e->n_per++].band, sizeof e->per[0].band, "%s", band);
    }
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        char why[256];
        if (!kernel_name_matches(k->name, s->kernels[0] ? s->kernels : NULL) ||
            kernel_unsupported_reason(k, M, e->N, e->K, why, sizeof why))
            continue;
        add_word(e->families, sizeof e->families, k->family);
        add_word(e->per[b].families, sizeof e->per[b].families, k->family);
    }
}


int gate_list_shapes(const char *suite_path, kr_error_t *err)
{
    suite_t s;
    if (suite_load(suite_path, &s, err))
        return -1;
    plan_item_t *plan = NULL;
    int64_t n_plan = 0;
    if (build_plan(&s, &plan, &n_plan, err)) {
        suite_free(&s);
        return -1;
    }
    shape_entry_t *shapes = calloc((size_t)(n_plan > 0 ? n_plan : 1), sizeof *shapes);
    int n_shapes = 0;
    int status = shapes ? 0 : kr_fail(err, "out of memory");
    for (int64_t i = 0; status == 0 && i < n_plan; i++) {
        int64_t N = plan[i].N, K = plan[i].K, M = plan[i].M;
        if (plan[i].file) {
            case_t c;
            if (case_load_safe(plan[i].file, &c, NULL, 0, err)) {
                status = -1;
                break;
            }
            N = c.N;
            K = c.K;
            M = c.M;
            case_free(&c);
        }
        int j = 0;
        while (j < n_shapes && !(shapes[j].N == N && shapes[j].K == K))
            j++;
        if (j == n_shapes) {
            shapes[j].N = N;
            shapes[j].K = K;
            n_shapes++;
        }
        add_word(shapes[j].bands, sizeof shapes[j].bands, suite_band_of(&s, M));
        add_families(&s, &shapes[j], suite_band_of(&s, M), M);
    }
    /* A line per shape, then one per shape x band: what ctest labels each test with. */
    for (int j = 0; status == 0 && j < n_shapes; j++) {
        printf("%lldx%lld bands=%s families=%s\n", (long long)shapes[j].N, (long long)shapes[j].K,
               shapes[j].bands, shapes[j].families);
        for (int b = 0; b < shapes[j].n_per; b++)
            printf("%lldx%lld band=%s families=%s\n", (long long)shapes[j].N,
                   (long long)shapes[j].K, shapes[j].per[b].band, shapes[j].per[b].families);
    }
    free(shapes);
    free(plan);
    suite_free(&s);
    return status;
}
