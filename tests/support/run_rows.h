/* kreplay runs whose rows a test compares: the JSON of a run, its rows by
 * (case, kernel, reference), and "the same rows" as a GPU test means it
 * (tests/test_gpu_worker.c, tests/test_gpu_plugin.c). */
#ifndef KR_RUN_ROWS_H
#define KR_RUN_ROWS_H

#include <jansson.h>

typedef struct {
    json_t *root;               /* the run's JSON (the caller frees it) */
    int rc;                     /* its exit code */
} run_json_t;

/* `ENV kreplay ARGS`, under KREPLAY_GPU_STANDIN=STANDIN ("1", "0"), its
 * stdout parsed as JSON (stderr to a log); fails the running test when it
 * printed none.  ARGS may end in more shell ("; cat FILE"). */
run_json_t run_json(const char *standin, const char *env, const char *args);

json_t *rows_of(json_t *root);
json_t *find_row(json_t *rows, const char *case_name, const char *kernel, const char *ref);
int count_verdict(json_t *rows, const char *verdict);

/* Every row of base is in run with the same verdict, note, metrics, ULP
 * histogram, digest, threshold, diagnosis and activations (the device,
 * reruns and times of a GPU run aside); fails the test otherwise.  Returns
 * how many rows run has beyond them, which must all be model rows unless
 * extra_ok. */
int rows_equal(json_t *base, json_t *run, int extra_ok);

#endif
