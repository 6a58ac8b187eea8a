/* sass.c -- see sass.h. */
#include "sass.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* One line of `cuobjdump -sass`: the address in a comment, the instruction up to " ;" (a
 * predicate first, as @!P0), its encoding in a comment after.  False for any other line
 * (headers, the encodings' second lines). */
static bool parse_line(const char *line, sass_insn *in) {
  const char *p = strstr(line, "/*");
  if (!p) return false;
  char *end;
  const unsigned long addr = strtoul(p + 2, &end, 16);
  if (end == p + 2 || strncmp(end, "*/", 2) != 0) return false;
  p = end + 2;
  while (*p == ' ' || *p == '\t') p++;
  const char *semi = strstr(p, " ;");
  if (!semi || semi == p) return false;
  memset(in, 0, sizeof *in);
  in->addr = (unsigned)addr;
  if (*p == '@') { /* a predicate: @P0, @!UP1, ... */
    in->predicated = true;
    while (p < semi && *p != ' ') p++;
    while (p < semi && *p == ' ') p++;
  }
  size_t n = 0;
  while (p < semi && *p != ' ' && n + 1 < sizeof in->op) in->op[n++] = *p++;
  while (p < semi && *p == ' ') p++;
  n = (size_t)(semi - p) < sizeof in->args - 1 ? (size_t)(semi - p) : sizeof in->args - 1;
  memcpy(in->args, p, n);
  return in->op[0] != '\0';
}

int sass_read(const rt_cubin *cubin, const char *cuobjdump, sass_insn **out, int *count, char *why,
              size_t whylen) {
  *out = NULL, *count = 0;
  char path[] = "/tmp/mmt-sass-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    snprintf(why, whylen, "mkstemp failed");
    return -1;
  }
  const bool written = write(fd, cubin->data, cubin->size) == (ssize_t)cubin->size;
  close(fd);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s' -sass '%s' 2>/dev/null", cuobjdump, path);
  FILE *f = written ? popen(cmd, "r") : NULL;
  if (!f) {
    unlink(path);
    snprintf(why, whylen, written ? "cannot run %s" : "cannot write the cubin for %s", cuobjdump);
    return -1;
  }
  int cap = 0, rc = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    sass_insn in;
    if (!parse_line(line, &in)) continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 4096;
      sass_insn *grown = realloc(*out, (size_t)cap * sizeof *grown);
      if (!grown) {
        rc = -1;
        snprintf(why, whylen, "out of memory");
        break;
      }
      *out = grown;
    }
    (*out)[(*count)++] = in;
  }
  const int status = pclose(f);
  unlink(path);
  if (!rc && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    rc = 1; /* not found */
  } else if (!rc && (status != 0 || *count == 0)) {
    rc = -1;
    snprintf(why, whylen, "%s -sass: status %d, %d instructions", cuobjdump, status, *count);
  }
  if (rc) {
    free(*out);
    *out = NULL, *count = 0;
  }
  return rc;
}

bool sass_loop_with(const sass_insn *insn, int count, const char *opcode, int *first, int *last) {
  int best = -1;
  for (int j = 0; j < count; j++) {
    if (strncmp(insn[j].op, "BRA", 3) != 0) continue;
    const char *hex = strstr(insn[j].args, "0x");
    if (!hex) continue;
    const unsigned target = (unsigned)strtoul(hex, NULL, 16);
    if (target >= insn[j].addr) continue; /* forward */
    int i = j;
    while (i > 0 && insn[i - 1].addr >= target) i--;
    bool has = false;
    for (int k = i; k <= j && !has; k++) has = strncmp(insn[k].op, opcode, strlen(opcode)) == 0;
    if (has && (best < 0 || j - i < *last - *first)) *first = i, *last = j, best = j;
  }
  return best >= 0;
}

/* Whether `args` holds register `reg` as a whole operand or part of one ("R212", "R212.reuse",
 * "[R212.64+0x4]"; not "R2120" or "UR212"). */
static bool mentions(const char *args, const char *reg) {
  const size_t n = strlen(reg);
  for (const char *p = strstr(args, reg); p; p = strstr(p + 1, reg)) {
    const bool start = p == args || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    const bool stop = !isalnum((unsigned char)p[n]);
    if (start && stop) return true;
  }
  return false;
}

bool sass_reads(const sass_insn *insn, const char *reg) {
  const char *sources = insn->args;
  /* every operand of a store is read; elsewhere the first is written (SHFL: the first two) */
  const bool store = strncmp(insn->op, "ST", 2) == 0 || strncmp(insn->op, "RED", 3) == 0;
  for (int skip = store ? 0 : strncmp(insn->op, "SHFL", 4) == 0 ? 2 : 1; skip > 0; skip--) {
    const char *comma = strchr(sources, ',');
    if (!comma) return false;
    sources = comma + 1;
  }
  return mentions(sources, reg);
}

bool sass_writes(const sass_insn *insn, const char *reg) {
  if (strncmp(insn->op, "ST", 2) == 0 || strncmp(insn->op, "RED", 3) == 0) return false;
  char first[sizeof insn->args];
  const char *comma = strchr(insn->args, ',');
  const size_t n = comma ? (size_t)(comma - insn->args) : strlen(insn->args);
  memcpy(first, insn->args, n);
  first[n] = '\0';
  return mentions(first, reg);
}
