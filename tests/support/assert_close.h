/* Closeness of doubles for the metrics tests (test_metrics.c,
 * test_metrics_ulp.c): TOL, the relative tolerance they allow a metric
 * against its oracle, and assert_close. */
#ifndef KR_ASSERT_CLOSE_H
#define KR_ASSERT_CLOSE_H

#define TOL 1e-15

/* got within rtol * |want| (+1e-300, so a zero want asks for zero) of want;
 * both are printed when not, and the test fails. */
void assert_close(double got, double want, double rtol);

#endif
