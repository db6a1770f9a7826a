/* case_headline: one line per case that answers the question a replay is
 * for -- which party is at fault (the kernel, the case's input, the
 * reference, or none), the case's verdict, and the one diagnosis line that
 * explains it -- merged from the case's rows by the decision table below.
 *
 * The rules read only what the rows state as data: verdicts, references,
 * metrics and thresholds, the baseline's regressed_* fields, diag_party (the
 * party the row's own diagnosis blames, harness/judge/diag_party.h) and
 * poison_where.  The diagnosis line and the note are quoted, never parsed
 * (the note's leading "metric value > threshold" clause, the judgement's
 * own wording, is the only part taken from them).
 *
 * Row roles: the reference output is recorded.ref (the serve's in-process
 * reference, a reference that kreplay compares with R_exact); the rerun check
 * is the row against out_rerun; a note row has no reference ("-"); every
 * other row is a kernel output (kreplay's models, plugins, GPU kernels, the
 * recorded outputs recorded.out / out_rerun / aiter, the quantizers).
 *
 * The decision table, first rule that holds wins:
 *   harness-error     a row is ERROR                                   none
 *   reference-wrong   the reference output fails, a kernel output      reference
 *                     passes against R_exact
 *   reference-shared  a recorded kernel output fails and its diagnosis reference
 *                     blames the input (the case, as labelled, is not
 *                     what the kernel read), while the reference output
 *                     passes against R_exact (it read the case as
 *                     labelled: the same misreading)
 *   input-labels      a kernel output fails, its diagnosis blames the  input
 *                     input
 *   reference-diag    a kernel output fails, its diagnosis blames the  reference
 *                     reference
 *   kernel-rerun      the rerun check fails (reruns differ)            kernel
 *   kernel            a kernel output fails                            kernel
 *   reference-alone   the reference output fails                       reference
 *   input-poisoned    nothing fails, rows are POISONED_INPUT           input
 *   unsupported       no row compared anything                         none
 *   pass              every row passes                                 none
 * A failing row whose diagnosis blames another party than the headline's is
 * named after it, with the evidence the headline rests on (which to trust,
 * and why); the poisoned block is added whenever the case's x holds one. */
#ifndef KR_CASE_HEADLINE_H
#define KR_CASE_HEADLINE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "result.h"

typedef struct {
    party_t party;
    verdict_t verdict;          /* the case's: the cited row's, else PASS / POISONED_INPUT / ... */
    const char *rule;           /* the rule that held ("reference-wrong") */
    int64_t row;                /* the row the headline cites, -1 none */
    int64_t evidence;           /* the row its evidence cites, -1 none */
    int64_t first;              /* the case's first row */
    int64_t failing;            /* the case's failing rows */
    int contradicted;           /* a failing row's diagnosis blamed another party */
    char line[1400];            /* "CASE: ...": one line, no newline */
} case_headline_t;

/* The headline of the case whose rows are idx[0..n) of rows. */
void case_headline_of(const result_list_t *rows, const int64_t *idx, int64_t n, case_headline_t *h);

/* One headline per case (rows grouped by case_path and case_name), in the
 * order of the cases' first rows.  *out is malloc'd (free it); returns the
 * count, or -1 when out of memory. */
int64_t case_headlines(const result_list_t *rows, case_headline_t **out);

/* "kernel", "input", "reference", "none". */
const char *case_party_word(party_t p);

/* The headlines as a JSON array: {"case_name", "case_path", "party",
 * "verdict", "rule", "headline", "kernel", "reference" (of the cited row),
 * "poison" (the block, when x holds one)}. */
json_t *case_headlines_json(const result_list_t *rows);

/* The headlines of the cases with a party at fault (failing or poisoned),
 * each as pre, the line through esc, post; at most max of them (the rest
 * counted in *more), *clean: how many cases have no party at fault.
 * malloc'd; NULL when no case has a party at fault (or out of memory). */
char *case_headlines_text(const result_list_t *rows, void (*esc)(FILE *, const char *), const char *pre,
                          const char *post, int64_t max, int64_t *more, int64_t *clean);

/* Every headline, one line each (terminal-escaped), to fp: what replay
 * prints before its table.  width > 0 wraps each at that width, continuation
 * lines indented. */
void case_headlines_print(FILE *fp, const result_list_t *rows, int width);

#endif
