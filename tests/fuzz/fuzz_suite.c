/* libFuzzer target: the suite parser (suite_load_bytes in harness/gate/suite.h)
 * and, on the same bytes, the policy parser (policy_load_bytes).  The name
 * anchors relative globs at the source tree's cases/suites/, so file globs
 * and policy paths resolve against real files. */
#include <stdint.h>
#include <stdio.h>

#include "policy.h"
#include "suite.h"

#ifndef KREPLAY_SOURCE_DIR
#define KREPLAY_SOURCE_DIR "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kr_error_t err;
    suite_t s;
    if (suite_load_bytes(KREPLAY_SOURCE_DIR "/cases/suites/fuzz.yaml", (const char *)data, size, &s, &err) == 0) {
        for (int i = 0; i < s.n_synth; i++) {
            int64_t n = suite_synth_count(&s.synth[i]);
            for (int64_t j = 0; j < n && j < 64; j++) {
                synth_params_t p;
                (void)suite_synth_params(&s.synth[i], j, &p);
            }
        }
        (void)suite_band_of(&s, 17);
        suite_free(&s);
    }
    policy_t p;
    if (policy_load_bytes(KREPLAY_SOURCE_DIR "/cases/policies/fuzz.yaml", (const char *)data, size, &p, &err) == 0)
        policy_free(&p);
    return 0;
}
