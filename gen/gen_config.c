/*
 * gen_config.c -- a template's parameter space as plain C data: enumeration, defaults, and the
 * "name=value,..." text form.  Nothing here touches Lua (the lists were copied at load).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_int.h"

int gen_param_count(const gen_template *t) { return t->nparams; }

const char *gen_param_name(const gen_template *t, int i) {
  return i >= 0 && i < t->nparams ? t->params[i].name : NULL;
}

int gen_param_value_count(const gen_template *t, int i) {
  return i >= 0 && i < t->nparams ? t->params[i].nvalues : 0;
}

int64_t gen_param_value(const gen_template *t, int i, int j) {
  if (i < 0 || i >= t->nparams || j < 0 || j >= t->params[i].nvalues) return 0;
  return t->params[i].values[j];
}

uint64_t gen_space_size(const gen_template *t) {
  uint64_t size = 1; /* cannot overflow: gen_load rejected spaces that do */
  for (int i = 0; i < t->nparams; i++) size *= (uint64_t)t->params[i].nvalues;
  return size;
}

int gen_param_index(const gen_template *t, const char *name) {
  for (int i = 0; i < t->nparams; i++)
    if (strcmp(t->params[i].name, name) == 0) return i;
  return -1;
}

bool gen_value_allowed(const gen_template *t, int i, int64_t value) {
  for (int j = 0; j < t->params[i].nvalues; j++)
    if (t->params[i].values[j] == value) return true;
  return false;
}

mmt_status gen_config_check(const gen_template *t, const gen_config *cfg, ut_err *err) {
  if (!cfg || cfg->n != t->nparams)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s': config has %d values, expected %d",
                   t->name, cfg ? cfg->n : 0, t->nparams);
  for (int i = 0; i < t->nparams; i++)
    if (!gen_value_allowed(t, i, cfg->v[i]))
      return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s': %s=%lld is not one of its values",
                     t->name, t->params[i].name, (long long)cfg->v[i]);
  return MMT_OK;
}

void gen_config_at(const gen_template *t, uint64_t idx, gen_config *cfg) {
  /* Mixed radix with the last parameter as the fastest digit.  A search over a space decodes
   * every index of it, again and again, and a chain of divisions is most of that time: below
   * 2^GEN_RECIP_BITS (every space small enough to walk) each is a multiplication instead. */
  cfg->n = t->nparams;
  if (idx < (1ull << GEN_RECIP_BITS)) {
    for (int i = t->nparams - 1; i >= 0; i--) {
      const uint64_t rest = (idx * t->params[i].recip) >> GEN_RECIP_SHIFT; /* idx / nvalues */
      cfg->v[i] = t->params[i].values[idx - rest * (uint64_t)t->params[i].nvalues];
      idx = rest;
    }
    return;
  }
  for (int i = t->nparams - 1; i >= 0; i--) {
    uint64_t radix = (uint64_t)t->params[i].nvalues;
    cfg->v[i] = t->params[i].values[idx % radix];
    idx /= radix;
  }
}

void gen_config_default(const gen_template *t, gen_config *cfg) { *cfg = t->def; }

/* "8, 16, 32" into out, for messages. */
static void values_text(const gen_template *t, int i, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = '\0';
  for (int j = 0; j < t->params[i].nvalues && used < outlen; j++) {
    int n = snprintf(out + used, outlen - used, "%s%lld", j ? ", " : "",
                     (long long)t->params[i].values[j]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* One "name=value" token of n bytes. */
static mmt_status parse_one(const gen_template *t, const char *tok, size_t n, gen_config *cfg,
                            uint64_t *seen, ut_err *err) {
  char buf[128], list[512];
  if (n >= sizeof buf)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "'%.40s...' is too long for name=value", tok);
  memcpy(buf, tok, n);
  buf[n] = '\0';
  char *eq = strchr(buf, '=');
  if (!eq) return ut_fail(err, MMT_ERR_INVALID_ARG, "expected name=value, got '%s'", buf);
  *eq = '\0';
  const char *value = eq + 1;
  int i = gen_param_index(t, buf);
  if (i < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s' has no parameter '%s'", t->name, buf);
  if (*seen & (1ull << i))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "parameter '%s' is given twice", buf);
  char *end = NULL;
  errno = 0;
  long long v = strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno != 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s=%s: the value is not an integer", buf, value);
  if (!gen_value_allowed(t, i, v)) {
    values_text(t, i, list, sizeof list);
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s=%lld is not one of %s's values (%s)", buf, v, buf,
                   list);
  }
  cfg->v[i] = v;
  *seen |= 1ull << i;
  return MMT_OK;
}

mmt_status gen_config_parse(const gen_template *t, const char *text, gen_config *cfg, ut_err *err) {
  static const char seps[] = ", \t\r\n";
  gen_config c;
  uint64_t seen = 0;
  gen_config_default(t, &c);
  for (const char *p = text ? text : ""; *p;) {
    p += strspn(p, seps);
    size_t n = strcspn(p, seps);
    if (n == 0) break;
    mmt_status rc = parse_one(t, p, n, &c, &seen, err);
    if (rc) return rc;
    p += n;
  }
  *cfg = c;
  return MMT_OK;
}

mmt_status gen_config_format(const gen_template *t, const gen_config *cfg, char *out, size_t outlen,
                             ut_err *err) {
  if (!cfg || cfg->n != t->nparams)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s': config has %d values, expected %d",
                   t->name, cfg ? cfg->n : 0, t->nparams);
  if (outlen == 0) return ut_fail(err, MMT_ERR_INVALID_ARG, "no room for the config text");
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < t->nparams; i++) {
    mmt_status rc = ut_snprintf(out + used, outlen - used, err, "%s%s=%lld", i ? "," : "",
                                t->params[i].name, (long long)cfg->v[i]);
    if (rc) return rc;
    used += strlen(out + used);
  }
  return MMT_OK;
}
