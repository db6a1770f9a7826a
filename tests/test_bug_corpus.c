/* The bug corpus (tests/bugs/buggy_kernels.c): each realistic kernel bug,
 * built as its own external plugin, replayed by `kreplay replay` alone on
 * the synthetic cases that exercise it -- a NaN head, M % 16 != 0 with zero
 * padding rows, N = 48, and the largest production shape (17408 x 5120 at
 * M = 4) -- must get the right verdict and a diagnosis that names the fault;
 * the correct plugin must pass every case with no diagnosis (POISONED_INPUT
 * where its quantizer hands it NaN operands, the quantizer named).  The
 * score table (bug, case, verdict, diagnosis) is printed. */
/* ctest-labels: slow;corpus */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kreplay_checks.h"
#include "test_main.h"
#include "test_support.h"

typedef struct {
    const char *bug;            /* tests/bugs/CMakeLists.txt's name */
    const char *cas;            /* "main", "n48", "nan", "large", "k2048" */
    const char *args;           /* extra replay options, or "" */
    const char *verdict;        /* expected */
    const char *phrase;         /* the diagnosis (or, for CRASHED, OOB_WRITE and
                                   NONDETERMINISTIC, whose note is the finding) must contain it;
                                   NULL = the diagnosis must be empty */
    const char *note_phrase;    /* the verdict's note must contain it too; NULL = not checked */
} entry_t;

static const entry_t corpus[] = {
    {"correct", "main", "", "PASS", NULL, NULL},
    {"correct", "n48", "", "PASS", NULL, NULL},
    {"correct", "nan", "", "PASS", NULL, NULL},
    {"correct", "large", "", "PASS", NULL, NULL},
    {"correct", "k2048", "", "PASS", NULL, NULL},
    /* the 'traced' quantizer hands the kernel NaN x_scale on rows 0-16: they are
     * judged apart, the finite rows pass, the quantizer is named */
    {"correct", "nan", "--fp8-quant traced --act-source quantize", "POISONED_INPUT", NULL,
     "x quantized per token (traced), which left them non-finite"},
    /* operand decoding */
    {"nibble_swap", "main", "", "WRONG", "misread 'nibble-order'", NULL},
    /* x has NaN on rows 0-16, the recorded fp8 codes (the kernel's operands)
     * are finite there: every row is judged, and the misread named on all */
    {"nibble_swap", "nan", "", "WRONG", "operand misread 'nibble-order'",
     "the kernel's activations (recorded x_fp8/x_scale) are finite there, so every row is judged"},
    {"nibble_swap", "large", "", "WRONG", "misread 'nibble-order'", NULL},
    {"e2m1_unsigned", "main", "", "WRONG", "misread 'e2m1-sign'", NULL},
    {"fp8_e5m2", "main", "", "NONFINITE_OUT", "misread 'fp8-e5m2'", NULL},
    {"e8m0_bias128", "main", "", "MAGNITUDE", "out = 2^-1 x R_exact", NULL},
    /* scale indexing */
    {"scale_next_block", "main", "", "WRONG", "misread 'scale-k-next'", NULL},
    {"scale_next_row", "main", "", "WRONG", "misread 'scale-n-next'", NULL},
    {"scale_layout_nk", "main", "", "WRONG", "misread 'scale-kn-read-as-nk'", NULL},
    {"scale_twice", "main", "", "WRONG", "misread 'scale-twice'", NULL},
    {"xscale_divided", "main", "", "WRONG", "misread 'x_scale-inverted'", NULL},
    {"xscale_by_column", "main", "", "WRONG", "misread 'x_scale-by-column'", NULL},
    /* K loops */
    {"drop_last_kblock", "main", "", "WRONG", "block 31 (k 992-1023) missing [the last]", NULL},
    {"drop_last_kblock", "large", "", "WRONG", "block 159 (k 5088-5119) missing [the last]",
     NULL},
    {"first_kblock_twice", "main", "", "WRONG", "block 0 (k 0-31) x 2^1 (counted twice)", NULL},
    /* output rounding and accumulation precision */
    {"bf16_truncate", "main", "", "WRONG", "fit truncation rounding of the reference", NULL},
    {"acc_bf16", "main", "", "WRONG", "running sum rounded to bf16 every 32-K block: residual", NULL},
    {"acc_bf16", "k2048", "", "WRONG", "running sum rounded to bf16 every 32-K block: residual",
     NULL},
    {"acc_bf16", "large", "", "WRONG", "running sum rounded to bf16 every 32-K block: residual",
     NULL},
    {"acc_fp16", "main", "", "WRONG", "running sum rounded to fp16 every 32-K block: residual", NULL},
    {"acc_fp16", "k2048", "", "WRONG", "running sum rounded to fp16 every 32-K block: residual",
     NULL},
    {"splitk_bf16", "main", "", "WRONG",
     "split-K in 2 parts, each partial stored as bf16 before the reduction: residual", NULL},
    {"splitk_bf16", "large", "", "WRONG",
     "split-K in 2 parts, each partial stored as bf16 before the reduction: residual", NULL},
    /* tiling and strides */
    {"negate_odd_rows", "main", "", "WRONG", "the odd rows are wrong (negated", NULL},
    {"m_tail_unwritten", "main", "", "NONFINITE_OUT",
     "rows 32-36 (the partial M tile: M=37 is not a multiple of 16) are wrong (all NaN", NULL},
    {"n_tail_zero", "n48", "", "WRONG",
     "columns 32-47 (the partial N tile: N=48 is not a multiple of 64) are wrong (all zero",
     NULL},
    {"tile_transposed", "main", "", "WRONG", "every full 16x16 output tile is transposed", NULL},
    {"col_stride_unwritten", "main", "", "NONFINITE_OUT",
     "every 4-th column from 3 (stride 4) are wrong (all NaN", NULL},
    {"tile_edge_row_copy", "main", "", "WRONG",
     "the last row of every 16-row tile) are wrong (each holds the previous row's result", NULL},
    /* NaN handling: handed NaN x_scale ('traced' quantizer), the kernel writes zeros */
    {"nan_masked_zero", "nan", "--fp8-quant traced --act-source quantize", "WRONG",
     "rows 0-16 (x: rows 0-16 x columns 128-255 (17 x 128 = 2176 NaN)): the operands give NaN (x "
     "quantized per token (traced): non-finite x_scale), the kernel wrote finite values there (all "
     "zero", "poison masked: the kernel's operands give 8704 non-finite R_exact values"},
    /* the 'vllm' quantizer sanitizes (NaN -> +448 codes): R_exact is finite there, and the
     * kernel that zeroes NaN outputs never sees one */
    {"nan_masked_zero", "nan", "--fp8-quant vllm --act-source quantize", "PASS", NULL,
     "the kernel's activations (x quantized per token (vllm)) are finite there, so every row is "
     "judged"},
    {"correct", "nan", "--fp8-quant vllm --act-source quantize", "PASS", NULL,
     "the kernel's activations (x quantized per token (vllm)) are finite there"},
    /* races and crashes */
    {"race_lost_update", "main", "", "NONDETERMINISTIC", "reruns differ", NULL},
    {"crash_n_tail", "n48", "", "CRASHED", "SIGSEGV", NULL},
    {"oob_m_tail", "main", "", "OOB_WRITE", "the first is element [37, 0]", NULL},
};

static char g_dir[512];

static void case_path(const char *cas, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.h5", g_dir, cas);
}

static void make_cases(void)
{
    test_tmp_path(g_dir, sizeof g_dir, "bug_corpus");
    mkdir(g_dir, 0755);
    static const char *const synth[][2] = {
        {"main", "--shape 256x1024 --m 37 --zero-rows 3 --seed 3"},
        {"n48", "--shape 48x5120 --m 5 --seed 4"},
        {"nan", "--shape 512x1024 --m 24 --nan-block 17x128@128 --seed 5"},
        {"large", "--shape mlp_gate_up --m 4 --seed 6"},
        {"k2048", "--shape 512x2048 --m 16 --seed 7"},
    };
    for (size_t i = 0; i < sizeof synth / sizeof synth[0]; i++) {
        char args[768], *out = NULL;
        snprintf(args, sizeof args, "synth %s --out '%s' --name %s", synth[i][1], g_dir,
                 synth[i][0]);
        if (test_run_kreplay(args, &out) != 0) {
            print_error("kreplay %s failed:\n%s\n", args, out ? out : "");
            fail();
        }
        free(out);
    }
}

/* The JSON of `kreplay replay ... --json` (stderr left out). */
static json_t *replay_json(const entry_t *e)
{
    char plugin[600], path[600], cmd[2048];
    const char *bin = KREPLAY_BINARY;
    const char *slash = strrchr(bin, '/');
    snprintf(plugin, sizeof plugin, "%.*s/plugins/libkr_bug_%s.so", (int)(slash - bin), bin, e->bug);
    case_path(e->cas, path, sizeof path);
    snprintf(cmd, sizeof cmd,
             "'%s' replay --plugin '%s' --kernels 'bug.*' --refs exact --no-recorded --json %s "
             "'%s' 2>/dev/null",
             bin, plugin, e->args, path);
    return test_command_json(cmd);
}

static void test_corpus(void **state)
{
    (void)state;
    make_cases();
    const size_t count = sizeof corpus / sizeof corpus[0];
    int caught = 0, bug_entries = 0, failures = 0;
    char bugs_seen[64][32];
    int n_bugs = 0;
    printf("\n| bug | case | verdict | diagnosis |\n|---|---|---|---|\n");
    for (size_t i = 0; i < count; i++) {
        const entry_t *e = &corpus[i];
        json_t *root = replay_json(e);
        json_t *rows = json_object_get(root, "results");
        assert_true(json_array_size(rows) == 1);
        json_t *row = json_array_get(rows, 0);
        const char *verdict = test_json_str(row, "verdict");
        const char *diag = test_json_str(row, "diagnosis"), *note = test_json_str(row, "note");
        const int note_is_finding = strcmp(e->bug, "bf16_truncate") == 0 ||
                                    strcmp(e->verdict, "CRASHED") == 0 ||
                                    strcmp(e->verdict, "OOB_WRITE") == 0 ||
                                    strcmp(e->verdict, "NONDETERMINISTIC") == 0;
        const char *said = note_is_finding ? note : diag;
        int ok = strcmp(verdict, e->verdict) == 0 &&
                 (e->phrase ? strstr(said, e->phrase) != NULL : diag[0] == '\0') &&
                 (!e->note_phrase || strstr(note, e->note_phrase) != NULL);
        const int is_bug = strcmp(e->bug, "correct") != 0;
        bug_entries += is_bug;
        caught += ok && is_bug;
        if (!ok) {
            failures++;
            print_error("%s on %s: verdict %s (expected %s), diagnosis \"%s\" (expected \"%s\"), "
                        "note \"%s\"\n",
                        e->bug, e->cas, verdict, e->verdict, diag, e->phrase ? e->phrase : "", note);
        }
        printf("| %s | %s | %s%s | %s |\n", e->bug, e->cas, verdict, ok ? "" : " (WRONG SCORE)",
               note_is_finding || !diag[0] ? note : diag);
        int seen = 0;
        for (int b = 0; b < n_bugs; b++)
            seen |= strcmp(bugs_seen[b], e->bug) == 0;
        if (!seen && is_bug && n_bugs < 64)
            snprintf(bugs_seen[n_bugs++], sizeof bugs_seen[0], "%s", e->bug);
        json_decref(root);
    }
    printf("\n%d bug classes; %d of %d bug entries caught with the right verdict and the fault "
           "named; %d of %d entries scored as expected\n",
           n_bugs, caught, bug_entries, (int)count - failures, (int)count);
    fflush(stdout);
    static const char *const cases[] = {"main", "n48", "nan", "large", "k2048"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[600];
        case_path(cases[i], path, sizeof path);
        remove(path);
    }
    rmdir(g_dir);
    assert_true(n_bugs >= 20);
    assert_int_equal(failures, 0);
}

KR_TEST_MAIN(test_corpus);
