/* Checks of one `kreplay` run that many tests make: its exit code, a phrase
 * of its output, a file it wrote.  Each fails the calling test with the
 * command line and the whole output, so a failure says what kreplay said.
 * Include after <cmocka.h> and its prerequisites. */
#ifndef KR_KREPLAY_CHECKS_H
#define KR_KREPLAY_CHECKS_H

/* Runs `kreplay ARGS` (stdout and stderr together); fails unless it exits
 * with RC and, when WANT is not NULL, its output contains WANT. */
void test_kreplay_expect(const char *args, int rc, const char *want);

/* As test_kreplay_expect with no phrase, returning the output for further
 * checks (malloc'd, caller frees). */
char *test_kreplay_output(const char *args, int rc);

/* The file DIR/NAME, NUL-terminated and malloc'd (caller frees); fails the
 * test naming the path when it cannot be read. */
char *test_read_in_dir(const char *dir, const char *name);

#endif
