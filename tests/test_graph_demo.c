/* scripts/capture/graph_demo.py on this machine's CPU: the capture hook dumps the eager
 * calls of a two-linear torch module, the eager window of a graph-replaying serving loop
 * dumps exactly the decode-band steps it covers (M 1, 16, 64) and not the step after it,
 * and the dumps inspect and replay with kreplay.  The CUDA-graph and torch.compile phases
 * must say they are skipped without a GPU.  Skipped (77) when /usr/bin/python3 has no torch. */
/* ctest-labels: interop */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreplay_checks.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

static void test_graph_demo_on_cpu(void **state)
{
    (void)state;
    char dir[1024], cmd[4096];
    test_tmp_path(dir, sizeof dir, "graph_demo");
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/scripts/capture/graph_demo.py' --device cpu --out '%s' "
             "--kreplay '%s'",
             KREPLAY_SOURCE_DIR, dir, KREPLAY_BINARY);
    char *out;
    const int rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("graph_demo exit %d:\n%s", rc, out);
    TEST_EXPECT_PHRASES(out, "ok    eager calls of both layers at both M are dumped",
                        "decode-band M dumped [1, 16, 64]", "ok    the window's 3 steps",
                        "== 2 graph: torch.cuda.CUDAGraph at M=8\n  skipped: no CUDA device",
                        "ok    the dumps inspect and replay");
    assert_null(strstr(out, "FAIL"));
    free(out);
}

KR_TEST_MAIN_UNLESS(
    test_python_lacks("torch, numpy", "torch/numpy are not available to /usr/bin/python3: skipped"),
    test_graph_demo_on_cpu);
