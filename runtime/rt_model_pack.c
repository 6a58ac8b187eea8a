/* rt_model_pack.c -- see rt_model.h: a fitted model as bytes and back.
 *
 * Layout: a header (below), then the rows, the configs (their three string pointers stored as
 * offsets into the string pool), the templates (their bins pointer as NULL, their bin count
 * kept), every template's bins one after another, and the string pool.  The focus sums in
 * configs, templates and bins are scratch (rt_model_focus resets them) and travel as they
 * are; the config table is rebuilt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt_model_int.h"

#define PACK_MAGIC "mmtfit01"

/* What the fit computes with, as a number: the model's constants and the analytic part on a
 * few launches, so that a build whose constants or analytic time differ (without
 * RT_MODEL_PACK_FORMAT bumped) does not read another's fits. */
static uint64_t code_print(void) {
  const double constants[] = {
      RT_MODEL_BANDWIDTH,     RT_MODEL_MERIT_BANDWIDTH, RT_MODEL_MERIT_SHRINK,
      RT_MODEL_OTHER_LAYOUT,  RT_MODEL_OTHER_ALIGN,     RT_MODEL_PRIOR_WEIGHT,
      RT_MODEL_GLOBAL_WEIGHT, RT_MODEL_UNMEASURED,      RT_MODEL_UNKNOWN,
      RT_MODEL_LAUNCH_MS,     RT_MODEL_FILL_MS,         RT_MODEL_SM_THREADS,
      RT_MODEL_BUSY_WARPS,    RT_MODEL_DRAM_SMS,        RT_MODEL_DRAM_INFLIGHT,
      RT_MODEL_L2_FACTOR,     RT_MODEL_SECTOR_WASTE,    RT_MODEL_CLUSTER_WAIT,
      RT_MODEL_OTHER_DTYPE,   RT_MODEL_CVT_FMA_SHARE,   RT_MODEL_PROMOTE_COST};
  uint64_t h = ut_hash64(constants, sizeof constants);
  const rt_model_device dev = {132, 9};
  const db_launch launches[] = {
      {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384},
      {.tile_m = 64, .tile_n = 64, .slices = 4, .threads = 128},
      {.tile_m = 1, .tile_n = 512, .slices = 16, .threads = 128},
      {.tile_m = 16, .tile_n = 128, .slices = 1, .threads = 64, .shared_bytes = 96 << 10},
      {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384, .cluster = 2},
      {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384, .promote = 1}};
  const char *dtypes[] = {"f16", "f32", "f32", "f16", "f16", "e4m3"};
  const int ms_of[] = {1000, 1000, 1, 32, 3000, 4096}; /* M of each launch's problem */
  for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++) {
    const gen_problem p = gen_packed_problem(dtypes[i], "nn", ms_of[i], 4096, 3000);
    const double ms = rt_model_analytic_ms(&dev, &launches[i], &p);
    h = ut_hash64_more(h, &ms, sizeof ms);
  }
  return h;
}

/* The configs' string offsets: template_name, template_hash, params. */
typedef struct {
  uint64_t name, hash, params;
} pack_strings;

/* memcpy of n bytes where src may be NULL when n is 0: an empty model has no rows, configs,
 * templates or bins (a GPU model without rows, a device name of none), and memcpy's pointers
 * must be valid even for no bytes. */
static void copy_bytes(void *dst, const void *src, size_t n) {
  if (n) memcpy(dst, src, n);
}

static size_t packed_size(const pack_header *h) {
  return sizeof *h + (size_t)h->nrows * sizeof(model_row) +
         (size_t)h->ncfgs * (sizeof(model_cfg) + sizeof(pack_strings)) +
         (size_t)h->ntmpls * sizeof(model_tmpl) + (size_t)h->nbins * sizeof(model_bin) +
         (size_t)h->strings;
}

mmt_status rt_model_pack(const rt_model *m, void **data, size_t *len, ut_err *err) {
  *data = NULL;
  *len = 0;
  if (m->resolved > 0)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "the fit used launch shapes emitted from today's templates (%d configs)",
                   m->resolved);
  pack_header h = {.magic = PACK_MAGIC, .format = RT_MODEL_PACK_FORMAT,
                   .row_size = sizeof(model_row), .cfg_size = sizeof(model_cfg),
                   .tmpl_size = sizeof(model_tmpl), .bin_size = sizeof(model_bin),
                   .device_size = sizeof(rt_model_device), .nrows = m->nrows,
                   .ncfgs = m->ncfgs, .ntmpls = m->ntmpls, .dev = m->dev,
                   .code = code_print()};
  for (int t = 0; t < m->ntmpls; t++) h.nbins += m->tmpls[t].nbins;
  for (int c = 0; c < m->ncfgs; c++)
    h.strings += strlen(m->cfgs[c].template_name) + strlen(m->cfgs[c].template_hash) +
                 strlen(m->cfgs[c].params) + 3;
  char *buf = malloc(packed_size(&h));
  if (!buf) return ut_fail(err, MMT_ERR_NOMEM, "out of memory packing the model");
  char *p = buf;
  memcpy(p, &h, sizeof h);
  p += sizeof h;
  copy_bytes(p, m->rows, (size_t)m->nrows * sizeof(model_row));
  p += (size_t)m->nrows * sizeof(model_row);
  model_cfg *cfgs = (model_cfg *)p;
  copy_bytes(cfgs, m->cfgs, (size_t)m->ncfgs * sizeof *cfgs);
  p += (size_t)m->ncfgs * sizeof *cfgs;
  pack_strings *offs = (pack_strings *)p;
  p += (size_t)m->ncfgs * sizeof *offs;
  model_tmpl *tmpls = (model_tmpl *)p;
  copy_bytes(tmpls, m->tmpls, (size_t)m->ntmpls * sizeof *tmpls);
  p += (size_t)m->ntmpls * sizeof *tmpls;
  for (int t = 0; t < m->ntmpls; t++) {
    tmpls[t].bins = NULL;
    tmpls[t].bins_cap = 0;
    copy_bytes(p, m->tmpls[t].bins, (size_t)m->tmpls[t].nbins * sizeof(model_bin));
    p += (size_t)m->tmpls[t].nbins * sizeof(model_bin);
  }
  char *pool = p;
  uint64_t at = 0;
  for (int c = 0; c < m->ncfgs; c++) {
    const char *s[3] = {m->cfgs[c].template_name, m->cfgs[c].template_hash, m->cfgs[c].params};
    uint64_t *o[3] = {&offs[c].name, &offs[c].hash, &offs[c].params};
    for (int i = 0; i < 3; i++) {
      size_t n = strlen(s[i]) + 1;
      *o[i] = at;
      memcpy(pool + at, s[i], n);
      at += n;
    }
    cfgs[c].template_name = cfgs[c].template_hash = cfgs[c].params = NULL;
  }
  *data = buf;
  *len = packed_size(&h);
  return MMT_OK;
}

/* A string of the pool at offset o (NUL-terminated inside it), copied; NULL when not. */
static char *pool_string(const char *pool, uint64_t size, uint64_t o) {
  if (o >= size || !memchr(pool + o, 0, size - o)) return NULL;
  return strdup(pool + o);
}

/* Whether a bool's bytes (from a file) are false's or true's: any other is no value of the
 * type, and reading it as a bool is undefined. */
static bool bool_ok(const bool *b) {
  const bool no = false, yes = true;
  return !memcmp(b, &no, sizeof *b) || !memcmp(b, &yes, sizeof *b);
}

/* Whether the unpacked model's counts and indexes are in range (every later access is), and
 * its bools are bools. */
static const char *check(const rt_model *m) {
  for (int c = 0; c < m->ncfgs; c++) {
    const model_cfg *cfg = &m->cfgs[c];
    if (!bool_ok(&cfg->skip)) return "a config's skip flag";
    if (cfg->first < 0 || cfg->count < 0 || cfg->first > m->nrows - cfg->count)
      return "a config's rows out of range";
    if (cfg->tmpl < -1 || cfg->tmpl >= m->ntmpls) return "a config's template out of range";
    if (cfg->nbins < 0 || cfg->nbins > GEN_MAX_PARAMS) return "a config's bin count";
    for (int b = 0; b < cfg->nbins; b++)
      if (cfg->tmpl < 0 || cfg->bins[b] < 0 || cfg->bins[b] >= m->tmpls[cfg->tmpl].nbins)
        return "a config's bin out of range";
    if (!memchr(cfg->dtype, 0, sizeof cfg->dtype)) return "a config's dtype";
  }
  for (int i = 0; i < m->nrows; i++) {
    if (m->rows[i].cfg < 0 || m->rows[i].cfg >= m->ncfgs || m->rows[i].layout < 0 ||
        m->rows[i].layout >= GEN_LAYOUTS || m->rows[i].dt < 0 || m->rows[i].dt >= GEN_DTYPES)
      return "a row's config, layout or dtype out of range";
    if (!bool_ok(&m->rows[i].aligned)) return "a row's alignment flag";
  }
  for (int t = 0; t < m->ntmpls; t++)
    if (!memchr(m->tmpls[t].name, 0, sizeof m->tmpls[t].name) ||
        !memchr(m->tmpls[t].dtype, 0, sizeof m->tmpls[t].dtype))
      return "a template's name";
  return NULL;
}

/* rt_model_unpack; map (NULL: copy the rows): the mapping the bytes are in, map_len long,
 * which the model takes (rows read in place where aligned). */
static mmt_status unpack(const void *data, size_t len, void *map, size_t map_len, rt_model **out,
                         ut_err *err) {
  *out = NULL;
  pack_header h;
  if (len < sizeof h) return ut_fail(err, MMT_ERR_IO, "packed model: %zu bytes, no header", len);
  memcpy(&h, data, sizeof h);
  if (memcmp(h.magic, PACK_MAGIC, sizeof h.magic) != 0 || h.format != RT_MODEL_PACK_FORMAT ||
      h.row_size != sizeof(model_row) || h.cfg_size != sizeof(model_cfg) ||
      h.tmpl_size != sizeof(model_tmpl) || h.bin_size != sizeof(model_bin) ||
      h.device_size != sizeof(rt_model_device) || h.code != code_print())
    return ut_fail(err, MMT_ERR_IO, "packed model: another build's format");
  if (h.nrows < 0 || h.ncfgs < 0 || h.ntmpls < 0 || h.nbins < 0 || h.strings > len ||
      packed_size(&h) != len)
    return ut_fail(err, MMT_ERR_IO, "packed model: %zu bytes, its header says otherwise", len);
  rt_model *m = calloc(1, sizeof *m);
  if (!m) return ut_fail(err, MMT_ERR_NOMEM, "out of memory unpacking the model");
  m->dev = h.dev;
  const char *rows_at = (const char *)data + sizeof h;
  if (map && (uintptr_t)rows_at % _Alignof(model_row) == 0) {
    m->map = map, m->map_len = map_len;
    m->rows = (model_row *)rows_at; /* read only: nothing writes rows after a fit */
  } else {
    m->rows = malloc(((size_t)h.nrows + 1) * sizeof *m->rows);
  }
  m->cfgs = calloc((size_t)h.ncfgs + 1, sizeof *m->cfgs);
  m->tmpls = calloc((size_t)h.ntmpls + 1, sizeof *m->tmpls);
  mmt_status rc = MMT_OK;
  if (!m->rows || !m->cfgs || !m->tmpls) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory unpacking the model");
    goto done;
  }
  const char *p = (const char *)data + sizeof h;
  m->nrows = m->rows_cap = h.nrows;
  if (!m->map) memcpy(m->rows, p, (size_t)h.nrows * sizeof *m->rows);
  p += (size_t)h.nrows * sizeof *m->rows;
  memcpy(m->cfgs, p, (size_t)h.ncfgs * sizeof *m->cfgs);
  p += (size_t)h.ncfgs * sizeof *m->cfgs;
  /* read with memcpy: at an odd offset of a mapping (rt_model_unpack_map) they are not
   * aligned */
  const char *offs = p;
  p += (size_t)h.ncfgs * sizeof(pack_strings);
  memcpy(m->tmpls, p, (size_t)h.ntmpls * sizeof *m->tmpls);
  p += (size_t)h.ntmpls * sizeof *m->tmpls;
  /* the file's pointer fields are never used (NULL when packed, anything when corrupt) */
  for (int t = 0; t < h.ntmpls; t++) m->tmpls[t].bins = NULL;
  m->ntmpls = m->tmpls_cap = h.ntmpls;
  int64_t bins_left = h.nbins;
  for (int t = 0; t < m->ntmpls; t++) {
    model_tmpl *tm = &m->tmpls[t];
    int n = tm->nbins;
    tm->bins = NULL;
    tm->nbins = tm->bins_cap = 0;
    if (n < 0 || n > bins_left) {
      rc = ut_fail(err, MMT_ERR_IO, "packed model: a template's bins out of range");
      goto done;
    }
    if (!(tm->bins = malloc(((size_t)n + 1) * sizeof *tm->bins))) {
      rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory unpacking the model");
      goto done;
    }
    memcpy(tm->bins, p, (size_t)n * sizeof *tm->bins);
    p += (size_t)n * sizeof *tm->bins;
    tm->nbins = tm->bins_cap = n;
    bins_left -= n;
  }
  /* strings: every config's three, or the config count stops where one fails (so that
   * rt_model_free frees exactly what was made) */
  for (int c = 0; c < h.ncfgs; c++) {
    model_cfg *cfg = &m->cfgs[c];
    pack_strings o;
    memcpy(&o, offs + (size_t)c * sizeof o, sizeof o);
    cfg->template_name = pool_string(p, h.strings, o.name);
    cfg->template_hash = pool_string(p, h.strings, o.hash);
    cfg->params = pool_string(p, h.strings, o.params);
    m->ncfgs = c + 1;
    if (!cfg->template_name || !cfg->template_hash || !cfg->params) {
      rc = ut_fail(err, MMT_ERR_IO, "packed model: a config's strings out of range");
      goto done;
    }
  }
  m->cfgs_cap = h.ncfgs;
  const char *why = bins_left ? "bins left over" : check(m);
  if (why) rc = ut_fail(err, MMT_ERR_IO, "packed model: %s", why);
  if (!rc) rc = rt_model_index(m, err);
done:
  if (rc) {
    if (m->map) m->map = NULL, m->rows = NULL; /* the caller's still */
    rt_model_free(m);
    return rc;
  }
  *out = m;
  return MMT_OK;
}

mmt_status rt_model_unpack(const void *data, size_t len, rt_model **out, ut_err *err) {
  return unpack(data, len, NULL, 0, out, err);
}

mmt_status rt_model_unpack_map(void *map, size_t map_len, size_t offset, rt_model **out,
                               ut_err *err) {
  *out = NULL;
  if (offset > map_len) {
    munmap(map, map_len);
    return ut_fail(err, MMT_ERR_IO, "packed model: its offset %zu past the %zu bytes", offset,
                   map_len);
  }
  mmt_status rc = unpack((const char *)map + offset, map_len - offset, map, map_len, out, err);
  if (!rc && (*out)->map) return rc; /* the model owns the mapping */
  munmap(map, map_len);
  return rc;
}
