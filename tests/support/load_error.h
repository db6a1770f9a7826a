/* How a YAML loader refuses a bad file (the suite and policy loaders, in
 * test_suite and test_policy): -1 and one line that starts PATH:LINE: with
 * the line of the fault and says what is wrong. */
#ifndef KR_LOAD_ERROR_H
#define KR_LOAD_ERROR_H

/* The loader gave RC and MSG for bad file #I of a table of WHAT ("suite"),
 * TEXT written to PATH: fails unless RC is -1 and MSG is one line starting
 * "PATH:LINE: " and holding PHRASE (the case is printed first when not). */
void test_expect_load_error(const char *what, unsigned long i, const char *text, const char *path,
                            int line, const char *phrase, int rc, const char *msg);

#endif
