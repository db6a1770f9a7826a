/* Threshold calibration: the clean models over many seeds of a suite's
 * synthetic cases, each metric's distribution per (kernel, reference, band),
 * and a policy whose thresholds are the largest value seen times a margin.
 *
 * Only rows whose input is finite and whose verdict is about metrics enter
 * the distributions (poisoned inputs and unsupported shapes say nothing
 * about a clean kernel's error). */
#ifndef KR_CALIBRATE_H
#define KR_CALIBRATE_H

#include <stdint.h>
#include <stdio.h>

#include "kr_error.h"
#include "result.h"

typedef struct {
    char kernel[64], reference[32], band[16];
    int64_t n;
    double *rel, *worst;        /* n values each */
    double *identical;          /* identical fraction */
    int64_t min_count;          /* fewest elements in one row: one element's share of identical */
    int64_t cap;
} calib_group_t;

typedef struct {
    calib_group_t *groups;
    int count;
    int64_t cap;
} calibration_t;

int calibration_add_rows(calibration_t *cal, const result_t *rows, int64_t n, kr_error_t *err);
void calibration_free(calibration_t *cal);

/* The calibration table (Markdown): per group n, p50, p99, max of rel_fro and
 * worst_row_rel, min identical fraction, and the thresholds chosen. */
void calibration_write_table(FILE *fp, const calibration_t *cal, double margin, const char *how);

/* A policy file: one rule per group, rel_fro = margin x max, worst_row_rel =
 * margin x max, identical_min = 1 - margin x (1 - min identical) - 1/n for
 * R_exact rows, n the fewest elements a row of the group compared (one
 * element is the identical fraction's granularity: without it a 48-element
 * output trips on its first differing element), rounded down to 1e-4 and
 * clamped at 0; everything else falls back to derived rules. */
void calibration_write_policy(FILE *fp, const calibration_t *cal, double margin, const char *name,
                              const char *how);

#endif
