/* What kreplay says of its GPU build, in any build (none, CUDA, HIP):
 * 'kreplay --version' names the backend kr_gpu reports ("GPU backend: HIP
 * (runtime 5.2.21153, device code gfx1030)", "CUDA (runtime 13.0, ...)",
 * "none (built without GPU support)"), and on a machine without a device
 * 'kreplay replay --device gpu CASE' exits 2 saying "no ROCm device" (HIP),
 * "no CUDA device" (CUDA) or "no GPU support built" (none). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "kr_gpu.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLE KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5"

typedef struct {
    const char *backend;  /* kr_gpu_backend() */
    const char *version;  /* how the --version line starts */
    const char *no_device;
} backend_words_t;

static const backend_words_t WORDS[] = {
    {"hip", "GPU backend: HIP (runtime ", "no ROCm device"},
    {"cuda", "GPU backend: CUDA (runtime ", "no CUDA device"},
    {"none", "GPU backend: none (built without GPU support)", "no GPU support built"},
};

static const backend_words_t *words_for_this_build(void)
{
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (!strcmp(kr_gpu_backend(), WORDS[i].backend))
            return &WORDS[i];
    fail_msg("kr_gpu_backend() is '%s', not hip, cuda or none", kr_gpu_backend());
    return NULL;
}

static void test_version_names_the_backend(void **state)
{
    (void)state;
    const backend_words_t *w = words_for_this_build();
    char *out = NULL;
    assert_int_equal(test_run_kreplay("--version", &out), 0);
    const char *line = strstr(out, w->version);
    if (!line) {
        print_error("expected a line starting \"%s\", got:\n%s\n", w->version, out);
        fail();
    }
    if (strcmp(w->backend, "none") != 0) {
        /* "runtime MAJOR.MINOR..." then the device code list */
        const char *v = line + strlen(w->version);
        assert_true(isdigit((unsigned char)v[0]));
        assert_non_null(strchr(v, '.'));
        assert_non_null(strstr(v, ", device code "));
    }
    free(out);
}

static void test_no_device_is_said_by_platform(void **state)
{
    (void)state;
    const backend_words_t *w = words_for_this_build();
    int n = 0;
    if (kr_gpu_device_count(&n) == KR_GPU_OK && n > 0) {
        print_message("%d GPU device(s) present: the no-device message is not reachable\n", n);
        skip();
    }
    char *out = NULL;
    assert_int_equal(test_run_kreplay("replay --device gpu '" SAMPLE "'", &out), 2);
    if (!strstr(out, w->no_device) || !strstr(out, "--device")) {
        print_error("expected \"--device: gpu: %s\", got:\n%s\n", w->no_device, out);
        fail();
    }
    free(out);
}

KR_TEST_MAIN(test_version_names_the_backend, test_no_device_is_said_by_platform);
