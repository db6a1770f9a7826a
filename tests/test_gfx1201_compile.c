/* The gfx1201 device code compiles with Debian's clang-19 + lld-19, and the
 * WMMA variant really is on the fp8 matrix instruction.
 *
 * Compiles the HIP sources of kernels/gpu/ device-only for gfx1201, with no
 * HIP headers and no device libraries (vendor.h's bare mode):
 *   clang-19 -x hip --offload-arch=gfx1201 -nogpulib -nogpuinc --cuda-device-only
 * into a code object (linked by ld.lld-19), disassembles it with
 * llvm-objdump-19 (or, where that is missing, reads clang's -S output) and
 * checks that
 *   - kr_gpu_wmma_gfx12.hip contains v_wmma_f32_16x16x16_fp8_fp8;
 *   - the SIMT sources (kr_gpu_kernels.hip, kr_gpu_decode.hip,
 *     kr_gpu_runtime.hip: every SIMT kernel) compile for gfx1201 too.
 * Skipped (exit 77) when clang-19 or ld.lld-19 is not installed
 * (scripts/setup.sh --tests installs both). */
/* ctest-labels: gfx1201 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_main.h"
#include "test_support.h"

static int have_tool(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* Runs cmd through the shell; returns its exit status, output in *out (malloc'd). */
static int run_capture(const char *cmd, char **out)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 4096) {
            char *b = realloc(buf, cap * 2);
            if (!b)
                break;
            buf = b;
            cap *= 2;
        }
    }
    if (buf)
        buf[len] = '\0';
    *out = buf;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define CLANG_DEVICE_FLAGS                                                                   \
    "-x hip --offload-arch=gfx1201 -nogpulib -nogpuinc --cuda-device-only -DKR_GPU_FORCE_BARE " \
    "-O3 -ffp-contract=off -Wall -Wextra -Werror"

/* Compiles src device-only for gfx1201 and returns its disassembly (malloc'd). */
static char *compile_and_disassemble(const char *src)
{
    char obj[1024], cmd[4096];
    char *log = NULL;
    test_tmp_path(obj, sizeof obj, "gfx1201.o");
    snprintf(cmd, sizeof cmd, "clang-19 " CLANG_DEVICE_FLAGS " --no-gpu-bundle-output -c %s/kernels/gpu/%s -o %s",
             KREPLAY_SOURCE_DIR, src, obj);
    int rc = run_capture(cmd, &log);
    if (rc != 0)
        fail_msg("%s\nfailed (%d):\n%s", cmd, rc, log ? log : "");
    free(log);
    log = NULL;
    if (have_tool("llvm-objdump-19")) {
        snprintf(cmd, sizeof cmd, "llvm-objdump-19 -d --mcpu=gfx1201 %s", obj);
    } else {
        char asmf[1024];
        test_tmp_path(asmf, sizeof asmf, "gfx1201.s");
        snprintf(cmd, sizeof cmd, "clang-19 " CLANG_DEVICE_FLAGS " -S %s/kernels/gpu/%s -o %s && cat %s",
                 KREPLAY_SOURCE_DIR, src, asmf, asmf);
    }
    rc = run_capture(cmd, &log);
    if (rc != 0)
        fail_msg("%s\nfailed (%d):\n%s", cmd, rc, log ? log : "");
    unlink(obj);
    return log;
}

static void test_wmma_kernel_uses_fp8_wmma(void **state)
{
    (void)state;
    char *dis = compile_and_disassemble("kr_gpu_wmma_gfx12.hip");
    assert_non_null(dis);
    if (!strstr(dis, "v_wmma_f32_16x16x16_fp8_fp8"))
        fail_msg("no v_wmma_f32_16x16x16_fp8_fp8 in the gfx1201 code object:\n%.4000s", dis);
    print_message("  kr_gpu_wmma_gfx12.hip: v_wmma_f32_16x16x16_fp8_fp8 present\n");
    free(dis);
}

/* Each SIMT source with the kernels it must hold. */
static const struct {
    const char *source;
    const char *kernels[8];
} simt_sources[] = {
    {"kr_gpu_kernels.hip",
     {"kr_k_quant_fp8_token", "kr_k_quant_mxfp4", "kr_k_w4a8_perblock", "kr_k_w4a8_folded",
      "kr_k_w4a4_aiter", "kr_k_bf16_skinny", NULL}},
    {"kr_gpu_decode.hip", {"kr_k_w4a8_decode", NULL}},
    {"kr_gpu_runtime.hip", {"kr_k_fill_u16", NULL}},
};

static void test_simt_kernels_compile(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof simt_sources / sizeof simt_sources[0]; s++) {
        char *dis = compile_and_disassemble(simt_sources[s].source);
        assert_non_null(dis);
        for (const char *const *k = simt_sources[s].kernels; *k; k++)
            if (!strstr(dis, *k))
                fail_msg("%s missing from the gfx1201 code object of %s", *k, simt_sources[s].source);
        print_message("  %s: every SIMT kernel compiled for gfx1201\n", simt_sources[s].source);
        free(dis);
    }
}

int main(void)
{
    if (!have_tool("clang-19") || !have_tool("ld.lld-19")) {
        printf("test_gfx1201_compile: skipped: clang-19 and ld.lld-19 are needed "
               "(scripts/setup.sh --tests installs them)\n");
        return TEST_SKIPPED;
    }
    KR_RUN_TESTS(NULL, NULL, test_wmma_kernel_uses_fp8_wmma, test_simt_kernels_compile);
}
