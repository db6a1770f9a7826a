/* Helpers shared by the unit tests: a seeded RNG, temporary paths, and
 * running the kreplay binary to check its exit code and output.
 * Include after <cmocka.h>'s prerequisites (stdarg, stddef, setjmp). */
#ifndef KR_TEST_SUPPORT_H
#define KR_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Exit code of a test executable whose preconditions are missing (no GPU,
 * no h5py): ctest reports it as skipped (SKIP_RETURN_CODE), never as passed. */
#define TEST_SKIPPED 77

/* 1 in a build with AddressSanitizer (what a test that must not run under
 * it, or must run less, asks), else 0. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

/* splitmix64: tests must be reproducible, so every random draw is seeded. */
typedef struct { uint64_t s; } test_rng_t;
uint64_t test_rng_u64(test_rng_t *r);
double   test_rng_uniform(test_rng_t *r);      /* [0, 1) */
double   test_rng_normal(test_rng_t *r);       /* standard normal */

/* A fresh path under the build tree's tests/tmp: "<tmp>/<name>-<pid>-<n>". */
void test_tmp_path(char *buf, size_t cap, const char *name);

/* A fresh, empty directory test_tmp_path(NAME) (its path in buf); mkdir's result. */
int test_tmp_dir(char *buf, size_t cap, const char *name);

/* PATH (re)written to hold TEXT; 0, or -1 when it could not be written. */
int test_write_text(const char *path, const char *text);

/* Runs `/usr/bin/python3 <source>/tests/python/SCRIPT ARGS` (ARGS already
 * quoted for the shell); returns system()'s status. */
int test_run_python(const char *script, const char *args);

/* Runs tests/python/SCRIPT with the arguments every tool script takes:
 * the kreplay binary, the source tree and a fresh directory
 * test_tmp_dir(TMP_NAME).  Returns system()'s status. */
int test_run_python_tool(const char *script, const char *tmp_name);

/* The whole file, NUL-terminated, malloc'd (caller frees); its length in
 * *len when len is not NULL.  NULL when it cannot be read. */
char *test_read_file(const char *path, size_t *len);

/* <build>/plugins/libkr_plugin_<name>.so, next to the kreplay binary. */
void test_plugin_file(char *buf, size_t cap, const char *name);

/* Runs CMD through /bin/sh exactly as given (add "2>&1" to capture stderr);
 * its stdout into a malloc'd string (*output, caller frees; "" when the shell
 * could not start).  Returns the raw wait status, -1 when it could not start. */
int test_shell(const char *cmd, char **output);

/* Runs the command line CMD, stdout and stderr captured into *output
 * (malloc'd, caller frees).  Returns its exit code (-1: did not exit). */
int test_sh(const char *cmd, char **output);

/* The exit code of a wait status from test_shell or system(); -1 when the
 * command did not exit normally. */
int test_exit_code(int status);

/* How many entries of DIR have a name ending in SUFFIX (0 if DIR is absent). */
int test_count_files(const char *dir, const char *suffix);

/* free() on each of the N pointers: a test's structure of separately malloc'd
 * buffers is released by one call that lists them (TEST_FREE_ALL). */
void test_free_each(void *const *ptrs, size_t n);
#define TEST_FREE_ALL(...) \
    test_free_each((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))

/* How many times NEEDLE (not empty) occurs in TEXT, without overlaps. */
int test_count_substr(const char *text, const char *needle);

/* Runs `kreplay replay --json ARGS TARGET` with the Python kernels' interpreter
 * (/usr/bin/python3): *root is its parsed JSON (NULL if none), err_text its
 * stderr (up to cap - 1 bytes).  Returns its exit code (-1: did not exit). */
int test_replay_json_py(const char *args, const char *target, json_t **root, char *err_text,
                        size_t cap);

/* Runs `kreplay <args>` through /bin/sh, stdout+stderr captured into a
 * malloc'd string (*output, caller frees).  Returns the exit status (or -1). */
int test_run_kreplay(const char *args, char **output);

#endif
