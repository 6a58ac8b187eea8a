/* report/csv.c -- see report/csv.h. */
#include "report/csv.h"

#include <stdbool.h>
#include <string.h>

void tn_csv_field(FILE *f, const char *s) {
  if (!s) return;
  size_t len = strlen(s);
  bool quote = strpbrk(s, ",\"\r\n") || (len > 0 && (s[0] == ' ' || s[len - 1] == ' '));
  if (!quote) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void tn_csv_row(FILE *f, const char *const *fields, int n) {
  for (int i = 0; i < n; i++) {
    if (i) fputc(',', f);
    tn_csv_field(f, fields[i]);
  }
  fputc('\n', f);
}
