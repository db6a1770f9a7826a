/* A case's short name, as every table, report and file name shows it. */
#ifndef KR_CASE_NAME_H
#define KR_CASE_NAME_H

/* A short name for a case: its file name without directory and extension. */
void case_short_name(const char *path, char *buf, int cap);

#endif
