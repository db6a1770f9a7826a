/* The report in a real browser (headless Chromium, Debian's chromium
 * package): tests/browser/check_report.sh renders the page, reads the
 * self-test line the page's own script writes on load (plots counted, empty
 * ones, errors seen by window.onerror) and takes a screenshot of the
 * summary.  Two reports of the default suite:
 *   1. a clean gate run: every plot rendered, no error;
 *   2. a gate run with a drill fault (w4a8.folded=tile-scale:3) and the clean
 *      run as history: the same plots plus the trend, the diagnosis lines and
 *      the non-finite map of the NaN-head sample in the page.
 * In both, the browser counts the threshold lines and the failing and
 * regressed markers that hold data (not only their key entry): every
 * relative-error panel, the W4A8-vs-W4A4 bars and the trend have their
 * threshold drawn; the clean page has no failing marker, the faulted one has
 * them in the plots of the shapes it failed, and the heatmap frames its
 * failing cells.
 * The screenshots stay in the build tree: tests/tmp/browser/{clean,fault}/summary.png.
 * Exit 77 (skipped) when chromium is not installed. */
/* ctest-labels: browser */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gnuplot.h"
#include "test_main.h"
#include "test_support.h"

#define BROWSER_DIR KREPLAY_TEST_TMP "/browser"
#define SUITE KREPLAY_SOURCE_DIR "/cases/suites/default.yaml"
#define CHECK_SCRIPT KREPLAY_SOURCE_DIR "/tests/browser/check_report.sh"

static int have_chromium(void)
{
    return system("command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || "
                  "command -v google-chrome >/dev/null 2>&1") == 0;
}

#define read_all(path) test_read_file(path, NULL)


/* The number after "NAME=" in the self-test line of text, or -1. */
static int selftest_count(const char *text, const char *name)
{
    const char *line = strstr(text, "selftest: ");
    char key[64];
    snprintf(key, sizeof key, " %s=", name);
    const char *p = line ? strstr(line, key) : NULL;
    return p ? atoi(p + strlen(key)) : -1;
}

typedef struct {
    int thresholds_min, failing_min, failing_max;
} drawn_t;

/* Runs the browser check on DIR/report/report.html, keeping its output in DIR. */
static void browser_check(const char *dir, int expected, const drawn_t *drawn)
{
    char cmd[4096], log[1024];
    snprintf(log, sizeof log, "%s/check.log", dir);
    snprintf(cmd, sizeof cmd, "bash '%s' '%s/report/report.html' '%s' %d >'%s' 2>&1", CHECK_SCRIPT, dir, dir, expected,
             log);
    int st = system(cmd);
    char *text = read_all(log);
    print_message("%s", text ? text : "(no log)\n");
    int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc != 0)
        fail_msg("browser check of %s/report/report.html: exit %d: %s", dir, rc, text ? text : "");
    char want[128];
    snprintf(want, sizeof want, "selftest: plots=%d expected=%d empty=0 errors=0", expected, expected);
    assert_non_null(text);
    assert_non_null(strstr(text, want));
    if (gnuplot_available()) {
        const int thresholds = selftest_count(text, "thresholds"), failing = selftest_count(text, "failing");
        if (thresholds < drawn->thresholds_min || failing < drawn->failing_min || failing > drawn->failing_max)
            fail_msg("%s: thresholds=%d (at least %d), failing=%d (%d to %d)", dir, thresholds, drawn->thresholds_min,
                     failing, drawn->failing_min, drawn->failing_max);
    }
    free(text);
    char shot[1024];
    snprintf(shot, sizeof shot, "%s/summary.png", dir);
    assert_int_equal(access(shot, R_OK), 0);
}

static void run_ok(const char *args, int want_rc)
{
    char *out = NULL;
    int rc = test_run_kreplay(args, &out);
    if (rc != want_rc)
        fail_msg("kreplay %s: exit %d (wanted %d): %s", args, rc, want_rc, out ? out : "");
    free(out);
}

static void test_reports_in_chromium(void **state)
{
    (void)state;
    assert_int_equal(system("rm -rf '" BROWSER_DIR "' && mkdir -p '" BROWSER_DIR "/clean' '" BROWSER_DIR "/fault'"), 0);
    if (!gnuplot_available())
        print_message("gnuplot not installed: the pages have no plots; checking them anyway\n");

    /* 1. the default suite, clean */
    run_ok("gate '" SUITE "' -o '" BROWSER_DIR "/clean/run' > /dev/null", 0);
    run_ok("report '" BROWSER_DIR "/clean/run' -o '" BROWSER_DIR "/clean/report'", 0);
    int clean = test_count_files(BROWSER_DIR "/clean/report/plots", ".svg");
    if (gnuplot_available())
        assert_true(clean >= 9);   /* relerr per shape (4), ULP (3), W4A8 vs W4A4, heatmap, nfmap */
    /* 4 shapes x {R_exact, R_source} panels + W4A8 vs W4A4; nothing fails */
    const drawn_t clean_drawn = {9, 0, 0};
    browser_check(BROWSER_DIR "/clean", clean, &clean_drawn);

    /* 2. a drill fault, with the clean run as history */
    run_ok("gate '" SUITE "' -o '" BROWSER_DIR "/fault/run' --inject 'w4a8.folded=tile-scale:3' > /dev/null", 1);
    run_ok("report '" BROWSER_DIR "/fault/run' -o '" BROWSER_DIR "/fault/report' --history '" BROWSER_DIR
           "/clean/run/results.h5'",
           1);   /* its rows fail: report exits as the gate did */
    int fault = test_count_files(BROWSER_DIR "/fault/report/plots", ".svg");
    if (gnuplot_available())
        assert_int_equal(fault, clean + 1);   /* + the trend */
    /* the same thresholds + the trend's; failing markers in the 4 shapes' panels, the bars, the heatmap and the trend */
    const drawn_t fault_drawn = {10, 4, 1000};
    browser_check(BROWSER_DIR "/fault", fault, &fault_drawn);

    /* what the browser saw: the failing rows' diagnosis and the NaN head's map */
    char *dom = read_all(BROWSER_DIR "/fault/dom.html");
    assert_non_null(dom);
    assert_non_null(strstr(dom, "FAIL: "));
    assert_non_null(strstr(dom, "diagnosis: columns 0-31"));
    assert_non_null(strstr(dom, "block: rows 0-16 x columns 1024-1151"));
    if (gnuplot_available()) {
        assert_non_null(strstr(dom, "data-plot=\"nfmap_gdn_out_proj_slice_N512_K3072_M17_nanhead\""));
        assert_non_null(strstr(dom, "data-plot=\"trend\""));
    }
    free(dom);
}

KR_TEST_MAIN_UNLESS(have_chromium() ? NULL
                                    : "test_browser: chromium not installed (apt-get install chromium): skipped",
                    test_reports_in_chromium);
