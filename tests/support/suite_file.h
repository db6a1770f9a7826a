/* A gate suite written by a test: one `files` case entry and one synth
 * block, as the gate tests use them, so each states only its values. */
#ifndef KR_SUITE_FILE_H
#define KR_SUITE_FILE_H
#include <stddef.h>

typedef struct {
    const char *name;       /* suite: NAME */
    const char *files;      /* the one entry of `files: ["..."]` */
    const char *shapes;     /* synth shapes, as the list's inside: "64x256, gdn_in_proj_ba_tp2" */
    const char *m;          /* synth m list's inside: "1, 8" */
    const char *seeds;      /* synth seeds list's inside; NULL: no seeds line */
    const char *kernels;    /* the kernels list's inside, quoted: "\"w4a8.folded\"" */
} test_suite_spec_t;

/* Writes the suite of SPEC to PATH; fails the test when it cannot. */
void test_write_suite(const char *path, const test_suite_spec_t *spec);

#endif
