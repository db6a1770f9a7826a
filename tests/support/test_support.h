/* Helpers shared by the unit tests: a seeded RNG, temporary paths, and
 * running the kreplay binary to check its exit code and output.
 * Include after <cmocka.h>'s prerequisites (stdarg, stddef, setjmp). */
#ifndef KR_TEST_SUPPORT_H
#define KR_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/* Exit code of a test executable whose preconditions are missing (no GPU,
 * no h5py): ctest reports it as skipped (SKIP_RETURN_CODE), never as passed. */
#define TEST_SKIPPED 77

/* splitmix64: tests must be reproducible, so every random draw is seeded. */
typedef struct { uint64_t s; } test_rng_t;
uint64_t test_rng_u64(test_rng_t *r);
double   test_rng_uniform(test_rng_t *r);      /* [0, 1) */
double   test_rng_normal(test_rng_t *r);       /* standard normal */

/* A fresh path under the build tree's tests/tmp: "<tmp>/<name>-<pid>-<n>". */
void test_tmp_path(char *buf, size_t cap, const char *name);

/* The whole file, NUL-terminated, malloc'd (caller frees); its length in
 * *len when len is not NULL.  NULL when it cannot be read. */
char *test_read_file(const char *path, size_t *len);

/* Runs `kreplay <args>` through /bin/sh, stdout+stderr captured into a
 * malloc'd string (*output, caller frees).  Returns the exit status (or -1). */
int test_run_kreplay(const char *args, char **output);

#endif
