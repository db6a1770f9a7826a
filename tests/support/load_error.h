/* How a YAML loader refuses a bad file (the suite and policy loaders, in
 * test_suite and test_policy): -1 and one line that starts PATH:LINE: with
 * the line of the fault and says what is wrong. */
#ifndef KR_LOAD_ERROR_H
#define KR_LOAD_ERROR_H

/* A bad file of a test's table, and how the loader must refuse it. */
typedef struct {
    const char *yaml;
    int line;               /* the line of the fault */
    const char *phrase;     /* what the message says is wrong */
} test_bad_yaml_t;

/* The loader gave RC and MSG for BAD, entry #I of a table of WHAT ("suite"),
 * written to PATH: fails unless RC is -1 and MSG is one line starting
 * "PATH:LINE: " and holding the phrase (the entry is printed first when not). */
void test_expect_load_error(const char *what, unsigned long i, const test_bad_yaml_t *bad,
                            const char *path, int rc, const char *msg);

#endif
