/* Checks of one `kreplay` run that many tests make: its exit code, a phrase
 * of its output, a file it wrote.  Each fails the calling test with the
 * command line and the whole output, so a failure says what kreplay said.
 * Include after <cmocka.h> and its prerequisites. */
#ifndef KR_KREPLAY_CHECKS_H
#define KR_KREPLAY_CHECKS_H
#include <jansson.h>

/* Runs `kreplay ARGS` (stdout and stderr together); fails unless it exits
 * with RC and, when WANT is not NULL, its output contains WANT. */
void test_kreplay_expect(const char *args, int rc, const char *want);

/* As test_kreplay_expect with no phrase, returning the output for further
 * checks (malloc'd, caller frees). */
char *test_kreplay_output(const char *args, int rc);

/* Fails unless TEXT contains each phrase of the NULL-terminated list PHRASES,
 * naming the first missing one and printing TEXT (TEST_EXPECT_PHRASES lists
 * them in place). */
void test_expect_phrases(const char *text, const char *const *phrases);
#define TEST_EXPECT_PHRASES(text, ...) \
    test_expect_phrases((text), (const char *const[]){__VA_ARGS__, NULL})

/* The file DIR/NAME, NUL-terminated and malloc'd (caller frees); fails the
 * test naming the path when it cannot be read. */
char *test_read_in_dir(const char *dir, const char *name);

/* The command printed after PREFIX in a console's TEXT, its continuation
 * lines (each ending in " \\" where the console fits its width) joined into
 * one line, as a shell pasted it would read it.  Fails the test when PREFIX
 * is not there. */
void test_console_command(const char *text, const char *prefix, char *cmd, size_t cap);

/* Runs the shell command CMD and parses its stdout as one JSON document
 * (caller json_decref's it); fails the test naming CMD when there is none. */
json_t *test_command_json(const char *cmd);

/* The string member KEY of OBJ; "" when it is absent or not a string. */
const char *test_json_str(const json_t *obj, const char *key);

#endif
