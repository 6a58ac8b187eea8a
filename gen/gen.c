/*
 * gen.c -- loading a template file into its sandbox, and the template's accessors.
 * See gen.h; the sandbox is gen_sandbox.c, the declaration checks gen_decl.c.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

typedef struct {
  gen_template *t;
  const char *text;
  size_t len;
  ut_err *err;
  mmt_status rc; /* a malformed file (the Lua call itself succeeded) */
} load_ctx;

/* Protected: compiles the file as text, runs it, checks what it returns. */
static int load_protected(lua_State *L) {
  load_ctx *c = lua_touserdata(L, 1);
  /* "@path" makes Lua's messages read "path:line: ..." */
  const char *chunkname = lua_pushfstring(L, "@%s", c->t->path);
  int status = luaL_loadbufferx(L, c->text, c->len, chunkname, "t");
  if (status == LUA_ERRSYNTAX) {
    c->rc = ut_fail(c->err, MMT_ERR_TEMPLATE, "template '%s': %s", c->t->name, lua_tostring(L, -1));
    return 0;
  }
  if (status != LUA_OK) return lua_error(L); /* out of memory: gen_sb_pcall reports it */
  lua_call(L, 0, 1);
  c->rc = gen_decl_read(L, c->t, c->err);
  return 0;
}

/* The template's expected name: the file's base name without ".lua". */
static void base_name(const char *path, char out[GEN_NAME_MAX]) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t n = strlen(base);
  if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
  if (n >= GEN_NAME_MAX) n = GEN_NAME_MAX - 1; /* too long to be valid; the name check says so */
  memcpy(out, base, n);
  out[n] = '\0';
}

/* The default config must satisfy the template's own constraints: it is what the dispatcher
 * falls back to, so a template that gets it wrong is broken. */
static mmt_status check_default(gen_template *t, ut_err *err) {
  char why[256], text[512];
  bool valid = false;
  mmt_status rc = gen_check(t, &t->def, NULL, &valid, why, sizeof why, err);
  if (rc || valid) return rc;
  if (gen_config_format(t, &t->def, text, sizeof text, NULL)) text[0] = '\0';
  return ut_fail(err, MMT_ERR_TEMPLATE,
                 "template '%s' (%s): the default config %s fails its constraints%s%s", t->name,
                 t->path, text, why[0] ? ": " : "", why);
}

mmt_status gen_load(const char *path, gen_template **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  char *text = NULL;
  size_t len = 0;
  gen_template *t = NULL;
  if (!out) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_load: out is NULL");
  *out = NULL;
  if (!path) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_load: path is NULL");
  rc = ut_read_file(path, &text, &len, err);
  if (rc) goto cleanup;
  t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(path))) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory loading '%s'", path);
    goto cleanup;
  }
  t->constraints_ref = LUA_NOREF;
  t->emit_ref = LUA_NOREF;
  t->keys_ref = LUA_NOREF;
  t->memo_mt_ref = LUA_NOREF;
  base_name(path, t->name);
  t->hash_value = ut_hash64(text, len);
  rc = gen_device_defaults(NULL, &t->device, err);
  if (!rc) rc = gen_sb_open(t, err);
  if (rc) goto cleanup;
  load_ctx c = {t, text, len, err, MMT_OK};
  t->loading = true; /* mmt.snippet and mmt.lib fold each file into hash_value */
  rc = gen_sb_pcall(t, load_protected, &c, 0, err);
  t->loading = false;
  ut_hash64_hex(t->hash_value, t->hash);
  if (!rc) rc = c.rc;
  if (!rc) rc = check_default(t, err);
  if (!rc) {
    *out = t;
    t = NULL;
  }
cleanup:
  gen_free(t);
  free(text);
  return rc;
}

mmt_status gen_load_named(const char *name, gen_template **out, ut_err *err) {
  char path[4096];
  if (!out) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_load_named: out is NULL");
  *out = NULL;
  mmt_status rc = gen_find(name, path, sizeof path, err);
  if (rc) return rc;
  return gen_load(path, out, err);
}

void gen_free(gen_template *t) {
  if (!t) return;
  if (t->L) gen_sb_close(t);
  gen_lineage_free(t->lineage);
  gen_memo_clear(t);
  free(t->path);
  free(t);
}

const char *gen_name(const gen_template *t) { return t->name; }
const char *gen_description(const gen_template *t) { return t->description; }
bool gen_has_epilogues(const gen_template *t) { return t && t->epilogues; }
const char *gen_path(const gen_template *t) { return t->path; }
const char *gen_source_hash(const gen_template *t) { return t->hash; }
int gen_dtype_count(const gen_template *t) { return t->ndtypes; }

const char *gen_dtype(const gen_template *t, int i) {
  return i >= 0 && i < t->ndtypes ? t->dtypes[i] : NULL;
}

static const char *const layout_names[GEN_LAYOUTS] = {"nn", "nt", "tn", "tt"};

int gen_layout_index(const char *layout) {
  for (int i = 0; layout && i < GEN_LAYOUTS; i++)
    if (strcmp(layout, layout_names[i]) == 0) return i;
  return -1;
}

const char *gen_layout_name(int index) {
  return index >= 0 && index < GEN_LAYOUTS ? layout_names[index] : NULL;
}

void gen_min_ld(const char *layout, int64_t m, int64_t n, int64_t k, int64_t ld[3]) {
  bool ta = layout && layout[0] == 't', tb = layout && layout[0] && layout[1] == 't';
  ld[0] = ta ? m : k;
  ld[1] = tb ? k : n;
  ld[2] = n;
}

void gen_one_row_pitches(const char *layout, int64_t m, int64_t n, int64_t k, int64_t ld[3]) {
  int64_t width[3], rows[3];
  gen_min_ld(layout, m, n, k, width);
  gen_stored_rows(layout, m, n, k, rows);
  for (int i = 0; i < 3; i++) {
    if (rows[i] != 1) continue;
    /* a width past int (no kernel takes one) stays as it is; rounding it could overflow */
    int64_t w = width[i] > 0 ? width[i] : 1, rounded = w <= INT32_MAX ? (w + 15) / 16 * 16 : w;
    ld[i] = rounded <= INT32_MAX ? rounded : w;
  }
}

gen_problem gen_packed_problem(const char *dtype, const char *layout, int64_t m, int64_t n,
                               int64_t k) {
  int64_t ld[3];
  const uint64_t elem = (uint64_t)gen_dtype_size(dtype);
  gen_min_ld(layout, m, n, k, ld);
  gen_one_row_pitches(layout, m, n, k, ld);
  /* Unsigned: a size from a database may be anything up to 2^63 - 1, and a pitch in bytes
   * wrapped modulo 2^64 keeps its residue modulo the alignment (a power of two <= 16). */
  uint64_t pitches[] = {256, (uint64_t)ld[0] * elem, (uint64_t)ld[1] * elem,
                        (uint64_t)ld[2] * elem};
  return (gen_problem){.dtype = dtype, .layout = layout, .m = m, .n = n, .k = k, .lda = ld[0],
                       .ldb = ld[1], .ldc = ld[2], .align_bytes = gen_align_bytes(pitches, 4)};
}

gen_problem gen_packed_op_problem(const char *dtype, const char *layout, int64_t m, int64_t n,
                                  int64_t k, const gen_op *op, int64_t batch) {
  gen_problem p = gen_packed_problem(dtype, layout, m, n, k);
  if (!op) return p;
  p.op = op;
  p.batch = batch > 1 ? batch : 1;
  if (op->gated) p.ldc = n / 2 > 0 ? n / 2 : 1;
  int64_t rows[3];
  gen_stored_rows(layout, m, n, k, rows);
  const uint64_t elem = (uint64_t)gen_dtype_size(dtype);
  const uint64_t v[5] = {256, (uint64_t)p.lda * elem, (uint64_t)p.ldb * elem,
                         p.batch > 1 ? (uint64_t)(rows[0] * p.lda) * elem : 0,
                         p.batch > 1 ? (uint64_t)(rows[1] * p.ldb) * elem : 0};
  p.align_bytes = gen_align_bytes(v, 5);
  return p;
}

void gen_stored_rows(const char *layout, int64_t m, int64_t n, int64_t k, int64_t rows[3]) {
  bool ta = layout && layout[0] == 't', tb = layout && layout[0] && layout[1] == 't';
  rows[0] = ta ? k : m;
  rows[1] = tb ? n : k;
  rows[2] = m;
}

bool gen_supports_layout(const gen_template *t, const char *layout) {
  int i = gen_layout_index(layout);
  return i >= 0 && (t->layouts & (1u << i));
}

bool gen_supports_dtype(const gen_template *t, const char *dtype) {
  if (!dtype) return false;
  for (int i = 0; i < t->ndtypes; i++)
    if (strcmp(t->dtypes[i], dtype) == 0) return true;
  return false;
}
