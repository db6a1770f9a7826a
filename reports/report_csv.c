/* results.csv: every column of the field table (harness/results/result_fields.h),
 * under the same names as results.h5 and results.json; a missing value is
 * an empty cell, so pandas.read_csv gives NaN, never 0. */
#include "report.h"
#include "result_fields.h"

void report_csv_write(FILE *fp, const result_list_t *rows)
{
    result_fields_csv_write(fp, rows);
}
