/*
 * report/csv.h -- CSV records for `mmtune bench --csv` (RFC 4180).  Prefix tn_.  Part of
 * tn_report; needs nothing but stdio.
 */
#ifndef MMT_TN_REPORT_CSV_H
#define MMT_TN_REPORT_CSV_H

#include <stdio.h>

/* Writes one field: as it is, or in double quotes with each inner quote doubled when it holds
 * a comma, a quote, CR or LF, or begins or ends with a space ("tile=32,pad=0" ->
 * "\"tile=32,pad=0\"").  NULL writes an empty field. */
void tn_csv_field(FILE *f, const char *s);
/* Writes fields[0..n) as one record: separated by commas, ended by "\n". */
void tn_csv_row(FILE *f, const char *const *fields, int n);

#endif /* MMT_TN_REPORT_CSV_H */
