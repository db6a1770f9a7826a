/* Case data built for tests: synthetic cases of a given shape and seed,
 * random field contents. */
#ifndef KR_TEST_CASES_H
#define KR_TEST_CASES_H

#include <stdint.h>

#include "synth.h"
#include "test_support.h"

/* The default synthetic-case parameters with shape M x N x K and SEED; tests
 * then set the few fields (NaN rows, outliers) they are about. */
synth_params_t test_synth_params(int64_t M, int64_t N, int64_t K, uint64_t seed);

/* synth_case() on P into *c; fails the running test with its error. */
void test_synth_or_fail(const synth_params_t *p, case_t *c);

/* N random bytes (malloc'd), never 0, so that "all zeros read back" cannot
 * pass; fails the running test when out of memory. */
void *test_rand_bytes(test_rng_t *r, size_t n);

#endif
