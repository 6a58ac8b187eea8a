/*
 * gen_emit.c -- calling a template's constraints and emit functions, checking what emit
 * returns, and the launch arithmetic on the result (grid, requirements).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

#define GEN_KERNEL_NAME_MAX 255

/* CUDA's launch limits, checked here so a bad template fails at emit, not at launch. */
static const int64_t grid_limit[3] = {INT32_MAX, 65535, 65535};
static const int64_t block_limit[3] = {1024, 1024, 64};
static const char *const axis_name[3] = {"x", "y", "z"};

/* p: {name = value, ...} for cfg; a fresh table per call, so a template cannot keep state in
 * it between calls.  The names come from the template's list of them (keys_ref) as Lua strings
 * already: a C string would be looked up (hashed and compared) again for every field. */
static void push_params(lua_State *L, const gen_template *t, const gen_config *cfg) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->keys_ref);
  const int keys = lua_gettop(L);
  lua_createtable(L, 0, t->nparams);
  for (int i = 0; i < t->nparams; i++) {
    lua_rawgeti(L, keys, i + 1);
    lua_pushinteger(L, (lua_Integer)cfg->v[i]);
    lua_rawset(L, -3);
  }
  lua_remove(L, keys);
}

static void push_problem(lua_State *L, const gen_problem *p) {
  const struct {
    const char *key;
    int64_t value;
  } ints[] = {{"M", p->m},
              {"N", p->n},
              {"K", p->k},
              {"lda", p->lda},
              {"ldb", p->ldb},
              {"ldc", p->ldc},
              {"align", p->align_bytes}};
  lua_createtable(L, 0, 9);
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    lua_pushinteger(L, (lua_Integer)ints[i].value);
    lua_setfield(L, -2, ints[i].key);
  }
  lua_pushstring(L, p->dtype ? p->dtype : "f32");
  lua_setfield(L, -2, "dtype");
  lua_pushstring(L, p->layout ? p->layout : "nn");
  lua_setfield(L, -2, "layout");
  lua_pushinteger(L, p->batch > 1 ? (lua_Integer)p->batch : 1);
  lua_setfield(L, -2, "batch");
  gen_push_op(L, p->op);
  lua_setfield(L, -2, "op");
}

#define CHECK_REASON_MAX 256

typedef struct {
  gen_template *t;
  const gen_config *cfg;
  const gen_problem *prob;
  /* The problem's dtype and layout, or the one pair the config alone is checked for; NULL:
   * every pair the template declares, until one is valid. */
  const char *dtype, *layout;
  const gen_op *op;           /* a config alone: checked for this op (NULL: plain GEMM) */
  bool want_why;              /* keep the reasons */
  uint8_t vi[GEN_MAX_PARAMS]; /* a config alone: its value indices (gen_memo) */
  bool called;                /* the constraints ran in this protected call */
  /* An invalid config's reason (for every pair: the first pair's); for every pair, also the
   * first different reason and the pair that gave it. */
  char reason[CHECK_REASON_MAX];
  char other[CHECK_REASON_MAX], other_at[32];
  bool valid;
  ut_err *err;
  mmt_status rc;
} check_ctx;

/* What the decision tree of pair (d, l) says of a config alone, where that is all the caller
 * needs: 1 valid, 0 invalid (no reason asked for), -1 ask the constraints. */
static int tree_says(const check_ctx *c, int d, int l) {
  if (c->prob || c->op) return -1; /* the trees hold plain configs alone */
  const int v = gen_memo_find(c->t, d * GEN_LAYOUTS + l, c->vi);
  return v == 0 && c->want_why ? -1 : v;
}

/* c->valid = constraints(p, prob, dtype, layout) for the template's dtype d and layout l, the
 * reason into `reason` (NULL: not wanted), from the decision tree where it knows.  A config
 * alone gets a p that records its reads, and its answer is kept in the tree.  False when the
 * template broke the contract (c->rc says how). */
static bool constraints_once(lua_State *L, check_ctx *c, int d, int l, char *reason) {
  if (reason) reason[0] = '\0';
  const int known = tree_says(c, d, l);
  if (known >= 0) {
    c->valid = known;
    return true;
  }
  if (c->called) gen_sb_rearm(c->t); /* each call gets the whole budget */
  c->called = true;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->t->constraints_ref);
  if (c->prob) {
    push_params(L, c->t, c->cfg);
    push_problem(L, c->prob);
  } else if (c->op) {
    push_params(L, c->t, c->cfg);
    lua_pushnil(L);
  } else {
    gen_memo_push_params(L, c->t, c->cfg);
    lua_pushnil(L);
  }
  lua_pushstring(L, c->t->dtypes[d]);
  lua_pushstring(L, gen_layout_name(l));
  gen_push_op(L, c->prob ? c->prob->op : c->op);
  lua_call(L, 5, 2);
  if (!lua_isboolean(L, -2) || (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)) {
    c->rc = ut_fail(c->err, MMT_ERR_TEMPLATE,
                    "template '%s' (%s): constraints must return a boolean and an optional reason "
                    "string, not %s, %s",
                    c->t->name, c->t->path, luaL_typename(L, -2), luaL_typename(L, -1));
    return false;
  }
  c->valid = lua_toboolean(L, -2);
  if (reason && !c->valid && lua_type(L, -1) == LUA_TSTRING)
    snprintf(reason, CHECK_REASON_MAX, "%s", lua_tostring(L, -1));
  lua_pop(L, 2);
  if (!c->prob && !c->op) gen_memo_keep(c->t, d * GEN_LAYOUTS + l, c->vi, c->valid);
  return true;
}

/* The template's index of dtype (supported: the caller checked). */
static int dtype_at(const gen_template *t, const char *dtype) {
  int d = 0;
  while (strcmp(t->dtypes[d], dtype) != 0) d++;
  return d;
}

/* Protected: the constraints for c's dtype and layout, or for each pair the template declares
 * until one is valid: every call within this one protected call, each with a fresh budget (a
 * protected call per pair cost more than most templates' constraints themselves).  The
 * reason is then the first pair's, and the first different one's after it. */
static int check_protected(lua_State *L) {
  check_ctx *c = lua_touserdata(L, 1);
  if (c->dtype) {
    constraints_once(L, c, dtype_at(c->t, c->dtype), gen_layout_index(c->layout),
                     c->want_why ? c->reason : NULL);
    return 0;
  }
  char reason[CHECK_REASON_MAX];
  for (int d = 0; d < c->t->ndtypes; d++)
    for (int l = 0; l < GEN_LAYOUTS; l++) {
      if (!(c->t->layouts & (1u << l))) continue;
      if (!constraints_once(L, c, d, l, c->want_why ? reason : NULL) || c->valid) return 0;
      if (!c->want_why) continue;
      if (!c->reason[0]) {
        snprintf(c->reason, sizeof c->reason, "%s", reason);
      } else if (!c->other[0] && strcmp(reason, c->reason) != 0) {
        snprintf(c->other, sizeof c->other, "%s", reason);
        snprintf(c->other_at, sizeof c->other_at, "%s %s", c->t->dtypes[d], gen_layout_name(l));
      }
    }
  return 0;
}

/* Whether the decision trees answer c without a call into Lua: a valid pair, or every pair
 * invalid where no reason is asked for.  Sets c->valid. */
static bool trees_decide(check_ctx *c) {
  const gen_template *t = c->t;
  const int d0 = c->dtype ? dtype_at(t, c->dtype) : 0, d1 = c->dtype ? d0 + 1 : t->ndtypes;
  bool all_invalid = true;
  c->valid = false;
  for (int d = d0; d < d1; d++)
    for (int l = 0; l < GEN_LAYOUTS; l++) {
      if (!(t->layouts & (1u << l)) || (c->layout && gen_layout_index(c->layout) != l)) continue;
      const int v = tree_says(c, d, l);
      if (v == 1) {
        c->valid = true;
        return true;
      }
      all_invalid = all_invalid && v == 0;
    }
  return all_invalid;
}

/* The constraints for one dtype and layout the template supports, or (dtype NULL) for the
 * config alone: valid for at least one dtype and layout the template declares. */
static mmt_status run_constraints(gen_template *t, const gen_config *cfg, const gen_problem *prob,
                                  const char *dtype, const char *layout, const gen_op *op,
                                  bool *valid, char *why, size_t whylen, ut_err *err) {
  if (t->constraints_ref == LUA_NOREF) {
    *valid = true;
    return MMT_OK;
  }
  check_ctx c = {.t = t,
                 .cfg = cfg,
                 .prob = prob,
                 .dtype = dtype,
                 .layout = layout,
                 .op = prob ? prob->op : op,
                 .want_why = why && whylen,
                 .err = err};
  if (!prob && !c.op) {
    gen_memo_values(t, cfg, c.vi);
    if (trees_decide(&c)) {
      *valid = c.valid;
      return MMT_OK;
    }
  }
  mmt_status rc = gen_sb_pcall(t, check_protected, &c, 0, err);
  if (!rc) rc = c.rc;
  if (rc) return rc;
  *valid = c.valid;
  if (!c.valid && why && whylen) {
    if (c.other[0])
      snprintf(why, whylen, "%s (%s: %s)", c.reason, c.other_at, c.other);
    else
      snprintf(why, whylen, "%s", c.reason);
  }
  return MMT_OK;
}

/* MMT_OK when t can emit op (NULL: always); MMT_ERR_UNSUPPORTED with the reason in why when
 * it has no epilogues; MMT_ERR_INVALID_ARG for an op that is not one for inputs of dtype. */
static mmt_status op_supported(const gen_template *t, const gen_op *op, const char *dtype,
                               char *why, size_t whylen, ut_err *err) {
  if (!op) return MMT_OK;
  if (!gen_op_valid(op, dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an epilogue op that is not one for %s inputs",
                   dtype ? dtype : "(null)");
  if (t->epilogues) return MMT_OK;
  if (why && whylen) snprintf(why, whylen, "template %s has no epilogues", t->name);
  return MMT_ERR_UNSUPPORTED;
}

mmt_status gen_check(gen_template *t, const gen_config *cfg, const gen_problem *problem,
                     bool *valid, char *why, size_t whylen, ut_err *err) {
  if (!valid) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_check: valid is NULL");
  *valid = false;
  if (why && whylen) why[0] = '\0';
  mmt_status rc = gen_config_check(t, cfg, err);
  if (rc) return rc;
  if (!problem) return run_constraints(t, cfg, NULL, NULL, NULL, NULL, valid, why, whylen, err);
  const char *dtype = problem->dtype ? problem->dtype : "f32";
  if (!gen_supports_dtype(t, dtype)) {
    if (why && whylen) snprintf(why, whylen, "dtype %s not supported", dtype);
    return MMT_OK;
  }
  const char *layout = problem->layout ? problem->layout : "nn";
  if (!gen_supports_layout(t, layout)) {
    if (why && whylen) snprintf(why, whylen, "layout %s not supported", layout);
    return MMT_OK;
  }
  rc = op_supported(t, problem->op, dtype, why, whylen, err);
  if (rc == MMT_ERR_UNSUPPORTED) return MMT_OK;
  if (rc) return rc;
  return run_constraints(t, cfg, problem, dtype, layout, NULL, valid, why, whylen, err);
}

mmt_status gen_check_for(gen_template *t, const gen_config *cfg, const char *dtype,
                         const char *layout, bool *valid, char *why, size_t whylen, ut_err *err) {
  return gen_check_op_for(t, cfg, dtype, layout, NULL, valid, why, whylen, err);
}

mmt_status gen_check_op_for(gen_template *t, const gen_config *cfg, const char *dtype,
                            const char *layout, const gen_op *op, bool *valid, char *why,
                            size_t whylen, ut_err *err) {
  if (!valid) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_check_for: valid is NULL");
  *valid = false;
  if (why && whylen) why[0] = '\0';
  mmt_status rc = gen_config_check(t, cfg, err);
  if (rc) return rc;
  if (!gen_supports_dtype(t, dtype)) {
    if (why && whylen) snprintf(why, whylen, "dtype %s not supported", dtype ? dtype : "(null)");
    return MMT_OK;
  }
  if (!gen_supports_layout(t, layout)) {
    if (why && whylen) snprintf(why, whylen, "layout %s not supported", layout ? layout : "(null)");
    return MMT_OK;
  }
  rc = op_supported(t, op, dtype, why, whylen, err);
  if (rc == MMT_ERR_UNSUPPORTED) return MMT_OK;
  if (rc) return rc;
  return run_constraints(t, cfg, NULL, dtype, layout, op, valid, why, whylen, err);
}

typedef struct {
  gen_template *t;
  const gen_config *cfg;
  const char *dtype, *layout;
  const gen_op *op;
  gen_kernel *out; /* numbers only: the strings come back as the call's results */
  char what[600];  /* "emit(tile=32,...)" for messages */
  ut_err *err;
  mmt_status rc;
} emit_ctx;

__attribute__((format(printf, 2, 3))) static mmt_status emit_fail(emit_ctx *c, const char *fmt,
                                                                  ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ut_fail(c->err, MMT_ERR_TEMPLATE, "template '%s' (%s): %s returned %s", c->t->name,
                 c->t->path, c->what, msg);
}

/* Pushes tbl.x (or tbl[1]) for axis i; returns its type. */
static int xyz_field(lua_State *L, int tbl, int i) {
  int ty = gen_raw_field(L, tbl, axis_name[i]);
  if (ty != LUA_TNIL) return ty;
  lua_pop(L, 1);
  return lua_rawgeti(L, tbl, i + 1);
}

/* block = {x, y, z} or {x = , y = , z = }; y and z default to 1. */
static mmt_status read_block(lua_State *L, int res, emit_ctx *c) {
  if (gen_raw_field(L, res, "block") != LUA_TTABLE)
    return emit_fail(c, "no block table: block = {x, y, z} is required");
  int tbl = lua_gettop(L);
  int64_t threads = 1;
  for (int i = 0; i < 3; i++) {
    int64_t v = 1;
    int ty = xyz_field(L, tbl, i);
    bool ok = (ty == LUA_TNIL && i > 0) || gen_lua_int(L, -1, &v);
    lua_pop(L, 1);
    if (!ok || v < 1 || v > block_limit[i])
      return emit_fail(c, "block.%s that is not an integer in [1, %lld]", axis_name[i],
                       (long long)block_limit[i]);
    c->out->block[i] = (unsigned)v;
    threads *= v;
  }
  lua_pop(L, 1);
  if (threads > 1024)
    return emit_fail(c, "a block of %lld threads (more than 1024)", (long long)threads);
  return MMT_OK;
}

/* One grid entry (on top of the stack): a constant, {"M"|"N"|"K", tile}, or {"SM", blocks}. */
static bool read_grid_dim(lua_State *L, int axis, gen_grid_dim *g) {
  int64_t v = 0;
  if (gen_lua_int(L, -1, &v)) {
    g->dim = 0;
    g->tile = v;
    return v >= 1 && v <= grid_limit[axis];
  }
  if (lua_type(L, -1) != LUA_TTABLE || gen_list_len(L, -1) != 2) return false;
  lua_rawgeti(L, -1, 1);
  const char *dim = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  const bool per_sm = strcmp(dim, "SM") == 0;
  bool ok = per_sm || (strlen(dim) == 1 && strchr("MNK", dim[0]));
  g->dim = per_sm ? 'S' : ok ? dim[0] : 0;
  lua_rawgeti(L, -2, 2);
  /* blocks per SM: a persistent kernel's few; a launch of at most 64 per SM */
  ok = ok && gen_lua_int(L, -1, &v) && v >= 1 && v <= (per_sm ? 64 : INT32_MAX);
  g->tile = v;
  lua_pop(L, 2);
  return ok;
}

static mmt_status read_grid(lua_State *L, int res, emit_ctx *c) {
  if (gen_raw_field(L, res, "grid") != LUA_TTABLE)
    return emit_fail(c, "no grid table: grid = {x = ..., y = ..., z = ...} is required");
  int tbl = lua_gettop(L);
  for (int i = 0; i < 3; i++) {
    gen_grid_dim g = {0, 1, 1};
    int ty = xyz_field(L, tbl, i);
    bool ok = (ty == LUA_TNIL && i > 0) || read_grid_dim(L, i, &g);
    lua_pop(L, 1);
    if (!ok)
      return emit_fail(
          c,
          "a bad grid.%s: expected an integer in [1, %lld], {\"M\"|\"N\"|\"K\", tile >= 1} or "
          "{\"SM\", blocks in [1, 64]}",
          axis_name[i], (long long)grid_limit[i]);
    c->out->grid[i] = g;
  }
  lua_pop(L, 1);
  return MMT_OK;
}

/* cluster = {x, y, z} or {x = , y = , z = }, optional, each 1 by default: the blocks of a
 * thread-block cluster along each axis, GEN_MAX_CLUSTER in all at most; the grid is rounded up
 * to whole clusters.  Not on a per-SM axis (a persistent grid is the device's, not the
 * problem's).  Clusters need compute capability 9.0: the kernel must name an arch of sm_90 or
 * newer (read after grid and arch). */
static mmt_status read_cluster(lua_State *L, int res, emit_ctx *c) {
  int ty = gen_raw_field(L, res, "cluster");
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return MMT_OK;
  }
  if (ty != LUA_TTABLE) return emit_fail(c, "cluster that is not a table {x, y, z}");
  int tbl = lua_gettop(L);
  int64_t blocks = 1;
  for (int i = 0; i < 3; i++) {
    int64_t v = 1;
    bool ok = xyz_field(L, tbl, i) == LUA_TNIL || gen_lua_int(L, -1, &v);
    lua_pop(L, 1);
    if (!ok || v < 1 || v > GEN_MAX_CLUSTER)
      return emit_fail(c, "cluster.%s that is not an integer in [1, %d]", axis_name[i],
                       GEN_MAX_CLUSTER);
    if (v > 1 && c->out->grid[i].dim == 'S')
      return emit_fail(c, "cluster.%s on a per-SM grid axis", axis_name[i]);
    c->out->grid[i].cluster = (int)v;
    blocks *= v;
  }
  lua_pop(L, 1);
  if (blocks > GEN_MAX_CLUSTER)
    return emit_fail(c, "a cluster of %lld blocks (more than %d)", (long long)blocks,
                     GEN_MAX_CLUSTER);
  const char *arch = c->out->arch;
  if (blocks > 1 && (strncmp(arch, "sm_", 3) != 0 || atoi(arch + 3) < 90))
    return emit_fail(c, "cluster without an arch of sm_90 or newer (clusters need compute "
                        "capability 9.0)");
  return MMT_OK;
}

/* shared_bytes: optional integer >= 0. */
static mmt_status read_shared(lua_State *L, int res, emit_ctx *c) {
  int64_t v = 0;
  int ty = gen_raw_field(L, res, "shared_bytes");
  bool ok = ty == LUA_TNIL || (gen_lua_int(L, -1, &v) && v >= 0 && v <= UINT_MAX);
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "shared_bytes that is not an integer >= 0");
  c->out->shared_bytes = (unsigned)v;
  return MMT_OK;
}

/* An optional boolean field (absent: false). */
static mmt_status read_flag(lua_State *L, int res, emit_ctx *c, const char *name, bool *out) {
  int ty = gen_raw_field(L, res, name);
  bool ok = ty == LUA_TNIL || ty == LUA_TBOOLEAN;
  *out = ty == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "%s that is not a boolean", name);
  return MMT_OK;
}

/* exclusive and dependent_launch: optional booleans, not both (an exclusive kernel's launch
 * waits for the one before it to finish); epilogue_overlap and walks_experts, optional
 * booleans. */
static mmt_status read_launch_flags(lua_State *L, int res, emit_ctx *c) {
  mmt_status rc;
  if ((rc = read_flag(L, res, c, "exclusive", &c->out->exclusive)) ||
      (rc = read_flag(L, res, c, "dependent_launch", &c->out->dependent_launch)))
    return rc;
  if (c->out->exclusive && c->out->dependent_launch)
    return emit_fail(c, "both exclusive and dependent_launch (an exclusive launch waits for "
                        "the previous one to finish)");
  if ((rc = read_flag(L, res, c, "epilogue_overlap", &c->out->epilogue_overlap)) ||
      (rc = read_flag(L, res, c, "walks_experts", &c->out->walks_experts)))
    return rc;
  if (c->out->walks_experts && !(c->op && c->op->group == 'm'))
    return emit_fail(c, "walks_experts for a kernel that is not a masked grouped op's");
  return MMT_OK;
}

/* workspace: optional fp32 bytes per block of the grid, a multiple of 16 up to
 * GEN_MAX_WORKSPACE_PER_BLOCK; only with exclusive (launches of the kernel share it). */
static mmt_status read_workspace(lua_State *L, int res, emit_ctx *c) {
  int64_t v = 0;
  int ty = gen_raw_field(L, res, "workspace");
  bool ok = ty == LUA_TNIL ||
            (gen_lua_int(L, -1, &v) && v >= 0 && v <= GEN_MAX_WORKSPACE_PER_BLOCK && v % 16 == 0);
  lua_pop(L, 1);
  if (!ok)
    return emit_fail(c, "workspace that is not a multiple of 16 in 0..%d (bytes per block)",
                     GEN_MAX_WORKSPACE_PER_BLOCK);
  if (v > 0 && !c->out->exclusive)
    return emit_fail(c, "workspace without exclusive (launches of the kernel share its "
                        "workspace, so they must not overlap)");
  c->out->workspace_per_block = (unsigned)v;
  return MMT_OK;
}

/* requires = {m_multiple =, n_multiple =, k_multiple =, align =}, all optional. */
static mmt_status read_requires(lua_State *L, int res, emit_ctx *c) {
  static const char *const keys[] = {"m_multiple", "n_multiple", "k_multiple", "align"};
  int elem = gen_dtype_size(c->dtype);
  int64_t v[4] = {1, 1, 1, elem};
  int ty = gen_raw_field(L, res, "requires");
  if (ty != LUA_TNIL && ty != LUA_TTABLE) return emit_fail(c, "requires that is not a table");
  for (int i = 0; i < 4 && ty == LUA_TTABLE; i++) {
    bool ok = gen_raw_field(L, -1, keys[i]) == LUA_TNIL ||
              (gen_lua_int(L, -1, &v[i]) && v[i] >= 1 && v[i] <= INT32_MAX);
    lua_pop(L, 1);
    if (!ok) return emit_fail(c, "requires.%s that is not an integer >= 1", keys[i]);
  }
  lua_pop(L, 1);
  if (v[3] < elem || v[3] > 16 || (v[3] & (v[3] - 1)))
    return emit_fail(c,
                     "requires.align = %lld: it must be a power of two from the element size "
                     "(%d) to 16",
                     (long long)v[3], elem);
  c->out->requires = (gen_requires){v[0], v[1], v[2], (int)v[3], false, false};
  return MMT_OK;
}

/* repack and store_any_align: optional booleans (kept in requires: they change what the problem
 * must satisfy and what the runtime copies); store_any_align only with repack. */
static mmt_status read_repack(lua_State *L, int res, emit_ctx *c) {
  gen_requires *r = &c->out->requires;
  mmt_status rc = read_flag(L, res, c, "repack", &r->repack);
  if (!rc) rc = read_flag(L, res, c, "store_any_align", &r->c_any_align);
  if (!rc && r->c_any_align && !r->repack)
    return emit_fail(c, "store_any_align without repack");
  return rc;
}

/* arch: optional "sm_<digits>" with an optional 'a' (architecture-specific features). */
static mmt_status read_arch(lua_State *L, int res, emit_ctx *c) {
  int ty = gen_raw_field(L, res, "arch");
  const char *a = ty == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  size_t digits = a && strncmp(a, "sm_", 3) == 0 ? strspn(a + 3, "0123456789") : 0;
  bool ok = ty == LUA_TNIL || (digits >= 2 && digits <= 3 &&
                               (a[3 + digits] == '\0' || strcmp(a + 3 + digits, "a") == 0));
  if (ok && a) snprintf(c->out->arch, sizeof c->out->arch, "%s", a);
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "arch that is not an architecture like \"sm_90a\"");
  return MMT_OK;
}

/* One entry of tensor_maps: {operand = "A"|"B", box = {inner, rows}, swizzle = 0|32|64|128}. */
static mmt_status read_tensor_map(lua_State *L, int i, emit_ctx *c, gen_tensor_map *tm) {
  int entry = lua_gettop(L);
  const char *op = gen_raw_field(L, entry, "operand") == LUA_TSTRING ? lua_tostring(L, -1) : "";
  bool ok = strcmp(op, "A") == 0 || strcmp(op, "B") == 0;
  tm->operand = ok ? op[0] : 0;
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "tensor_maps[%d].operand that is not \"A\" or \"B\"", i);
  int64_t box[2] = {0, 0}, swizzle = 0;
  ok = gen_raw_field(L, entry, "box") == LUA_TTABLE;
  for (int j = 0; j < 2 && ok; j++) {
    lua_rawgeti(L, -1, j + 1);
    ok = gen_lua_int(L, -1, &box[j]) && box[j] >= 1 && box[j] <= 256;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "tensor_maps[%d].box that is not {inner, rows} of 1..256", i);
  int ty = gen_raw_field(L, entry, "swizzle");
  ok = ty == LUA_TNIL || (gen_lua_int(L, -1, &swizzle) &&
                          (swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128));
  lua_pop(L, 1);
  if (!ok) return emit_fail(c, "tensor_maps[%d].swizzle that is not 0, 32, 64 or 128", i);
  int64_t inner_bytes = box[0] * gen_dtype_size(c->dtype);
  /* TMA copies rows of whole 16-byte units, and a swizzled row must fit the swizzle span. */
  if (inner_bytes % 16 || (swizzle && inner_bytes > swizzle))
    return emit_fail(c,
                     "tensor_maps[%d].box inner = %lld: %lld bytes must be a multiple of 16%s",
                     i, (long long)box[0], (long long)inner_bytes,
                     swizzle ? " and at most the swizzle" : "");
  tm->box[0] = (unsigned)box[0];
  tm->box[1] = (unsigned)box[1];
  tm->swizzle = (unsigned)swizzle;
  return MMT_OK;
}

/* tensor_maps: optional list of at most GEN_MAX_TENSOR_MAPS entries; TMA needs 16-byte
 * aligned bases and row pitches, so a kernel with maps must require align = 16. */
static mmt_status read_tensor_maps(lua_State *L, int res, emit_ctx *c) {
  int ty = gen_raw_field(L, res, "tensor_maps");
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return MMT_OK;
  }
  lua_Integer n = ty == LUA_TTABLE ? luaL_len(L, -1) : -1;
  if (n < 1 || n > GEN_MAX_TENSOR_MAPS) {
    lua_pop(L, 1);
    return emit_fail(c, "tensor_maps that is not a list of 1 to %d maps", GEN_MAX_TENSOR_MAPS);
  }
  mmt_status rc = MMT_OK;
  for (int i = 1; i <= n && !rc; i++) {
    if (lua_rawgeti(L, -1, i) != LUA_TTABLE)
      rc = emit_fail(c, "tensor_maps[%d] that is not a table", i);
    else
      rc = read_tensor_map(L, i, c, &c->out->tensor_maps[i - 1]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (rc) return rc;
  c->out->ntensor_maps = (int)n;
  if (c->out->requires.align_bytes != 16)
    return emit_fail(c, "tensor_maps without requires.align = 16 (TMA needs 16-byte alignment)");
  return MMT_OK;
}

/* source and kernel; leaves both strings on the stack (they outlive the table's checks). */
static mmt_status read_strings(lua_State *L, int res, emit_ctx *c) {
  size_t len = 0;
  const char *src = NULL, *kernel = NULL;
  if (gen_raw_field(L, res, "source") == LUA_TSTRING) src = lua_tolstring(L, -1, &len);
  if (!src || len == 0 || strlen(src) != len)
    return emit_fail(c, "no source: source must be a non-empty string without NUL bytes");
  if (gen_raw_field(L, res, "kernel") == LUA_TSTRING) kernel = lua_tostring(L, -1);
  if (!gen_valid_name(kernel, true, GEN_KERNEL_NAME_MAX))
    return emit_fail(c,
                     "a bad kernel: it must be the kernel's name, a C identifier of at most %d "
                     "characters",
                     GEN_KERNEL_NAME_MAX);
  if (!strstr(src, kernel))
    return emit_fail(c, "a source that does not contain kernel '%s'", kernel);
  if (c->out->requires.repack && !strstr(src, GEN_COPY_ROWS_KERNEL))
    return emit_fail(c, "repack without %s in the source (paste mmt.snippet(\"copy_rows\"): the "
                        "runtime's copies)",
                     GEN_COPY_ROWS_KERNEL);
  return MMT_OK;
}

static const char *const emit_fields[] = {"source",
                                          "kernel",
                                          "block",
                                          "grid",
                                          "shared_bytes",
                                          "requires",
                                          "exclusive",
                                          "dependent_launch",
                                          "arch",
                                          "tensor_maps",
                                          "repack",
                                          "store_any_align",
                                          "workspace",
                                          "cluster",
                                          "epilogue_overlap",
                                          "walks_experts",
                                          NULL};

static mmt_status emit_known_fields(lua_State *L, int res, emit_ctx *c) {
  lua_pushnil(L);
  while (lua_next(L, res)) {
    lua_pop(L, 1);
    bool known = false;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (const char *const *f = emit_fields; *f && !known; f++)
        known = strcmp(*f, lua_tostring(L, -1)) == 0;
    if (!known) {
      const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "<non-string key>";
      mmt_status rc = emit_fail(c,
                                "unknown field '%s' (fields: source, kernel, block, grid, "
                                "shared_bytes, requires, exclusive, dependent_launch, arch, "
                                "tensor_maps, repack, store_any_align, workspace, cluster, "
                                "epilogue_overlap, walks_experts)",
                                key);
      lua_pop(L, 1);
      return rc;
    }
  }
  return MMT_OK;
}

/* Protected: calls emit(p, dtype, layout) and checks the table.  Returns source, kernel. */
static int emit_protected(lua_State *L) {
  emit_ctx *c = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->t->emit_ref);
  push_params(L, c->t, c->cfg);
  lua_pushstring(L, c->dtype);
  lua_pushstring(L, c->layout);
  gen_push_op(L, c->op);
  lua_call(L, 4, 1);
  int res = lua_gettop(L);
  if (!lua_istable(L, res)) {
    c->rc = emit_fail(c, "a %s instead of a table", luaL_typename(L, res));
    return 0;
  }
  c->rc = emit_known_fields(L, res, c);
  if (!c->rc) c->rc = read_block(L, res, c);
  if (!c->rc) c->rc = read_grid(L, res, c);
  if (!c->rc) c->rc = read_shared(L, res, c);
  if (!c->rc) c->rc = read_requires(L, res, c);
  if (!c->rc) c->rc = read_launch_flags(L, res, c);
  if (!c->rc) c->rc = read_workspace(L, res, c);
  if (!c->rc) c->rc = read_arch(L, res, c);
  if (!c->rc) c->rc = read_cluster(L, res, c);
  if (!c->rc) c->rc = read_tensor_maps(L, res, c);
  if (!c->rc) c->rc = read_repack(L, res, c);
  if (!c->rc) c->rc = read_strings(L, res, c);
  return c->rc ? 0 : 2;
}

mmt_status gen_emit(gen_template *t, const gen_config *cfg, const char *dtype, const char *layout,
                    gen_kernel *out, ut_err *err) {
  return gen_emit_op(t, cfg, dtype, layout, NULL, out, err);
}

mmt_status gen_emit_op(gen_template *t, const gen_config *cfg, const char *dtype,
                       const char *layout, const gen_op *op, gen_kernel *out, ut_err *err) {
  if (!out) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_emit: out is NULL");
  mmt_status rc = gen_config_check(t, cfg, err);
  if (rc) return rc;
  if (!gen_supports_dtype(t, dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s' does not support dtype '%s'", t->name,
                   dtype ? dtype : "(null)");
  if (!gen_supports_layout(t, layout))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "template '%s' does not support layout '%s'", t->name,
                   layout ? layout : "(null)");
  char why[128];
  rc = op_supported(t, op, dtype, why, sizeof why, err);
  if (rc == MMT_ERR_UNSUPPORTED) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s", why);
  if (rc) return rc;
  gen_kernel k = {0};
  if (op && gen_op_format(op, k.op, sizeof k.op, err)) return MMT_ERR_INVALID_ARG;
  emit_ctx c = {
      .t = t, .cfg = cfg, .dtype = dtype, .layout = layout, .op = op, .out = &k, .err = err};
  char text[512];
  if (gen_config_format(t, cfg, text, sizeof text, NULL)) text[0] = '\0';
  snprintf(c.what, sizeof c.what, "emit(%s, %s, %s%s%s)", text, dtype, layout, op ? ", " : "",
           k.op);
  rc = gen_sb_pcall(t, emit_protected, &c, 2, err);
  if (rc) return rc;
  if (c.rc) {
    lua_pop(t->L, 2);
    return c.rc;
  }
  snprintf(k.dtype, sizeof k.dtype, "%s", dtype);
  snprintf(k.layout, sizeof k.layout, "%s", layout);
  k.source = strdup(lua_tostring(t->L, -2));
  k.kernel_name = strdup(lua_tostring(t->L, -1));
  lua_pop(t->L, 2);
  if (!k.source || !k.kernel_name) {
    gen_kernel_clear(&k);
    return ut_fail(err, MMT_ERR_NOMEM, "template '%s': out of memory copying the kernel", t->name);
  }
  *out = k;
  return MMT_OK;
}

void gen_kernel_clear(gen_kernel *k) {
  if (!k) return;
  free(k->source);
  free(k->kernel_name);
  memset(k, 0, sizeof *k);
}

mmt_status gen_grid_eval(const gen_grid_dim grid[3], int64_t m, int64_t n, int64_t k,
                         int sm_count, unsigned out[3], ut_err *err) {
  if (m < 0 || n < 0 || k < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "negative problem size %lldx%lldx%lld", (long long)m,
                   (long long)n, (long long)k);
  for (int i = 0; i < 3; i++) {
    const gen_grid_dim *g = &grid[i];
    if (g->tile < 1) return ut_fail(err, MMT_ERR_INVALID_ARG, "bad grid rule for %s", axis_name[i]);
    int64_t blocks;
    switch (g->dim) {
    case 0: blocks = g->tile; break;
    case 'M': blocks = m / g->tile + (m % g->tile != 0); break;
    case 'N': blocks = n / g->tile + (n % g->tile != 0); break;
    case 'K': blocks = k / g->tile + (k % g->tile != 0); break;
    case 'S':
      if (sm_count < 1)
        return ut_fail(err, MMT_ERR_INVALID_ARG,
                       "grid.%s is per SM: the device's SM count is needed (got %d)",
                       axis_name[i], sm_count);
      blocks = m == 0 || n == 0 ? 0 : (int64_t)sm_count * g->tile;
      break;
    default: return ut_fail(err, MMT_ERR_INVALID_ARG, "bad grid rule for %s", axis_name[i]);
    }
    const int64_t cluster = gen_grid_cluster(g);
    /* rounded only within the limit: near 2^63 (a size from a database) it would overflow */
    if (blocks <= grid_limit[i]) blocks = (blocks + cluster - 1) / cluster * cluster;
    if (blocks > grid_limit[i])
      return ut_fail(err, MMT_ERR_INVALID_ARG, "grid.%s = %lld blocks exceeds the limit of %lld",
                     axis_name[i], (long long)blocks, (long long)grid_limit[i]);
    out[i] = (unsigned)blocks;
  }
  return MMT_OK;
}

int gen_grid_cluster(const gen_grid_dim *g) { return g->cluster > 1 ? g->cluster : 1; }

bool gen_group_twin(gen_template *t, const gen_config *cfg, const gen_kernel *k,
                    const gen_problem *p) {
  const int gi = gen_param_index(t, "group");
  if (!t->tile_order || gi < 0 || cfg->v[gi] <= 1) return false;
  for (int d = 0; d < 3; d++)
    if (k->grid[d].dim == 'S') return false;
  unsigned g[3];
  ut_err e;
  if (gen_grid_eval(k->grid, p->m, p->n, p->k, 1, g, &e) != MMT_OK) return false;
  const unsigned rows = g[1] / (unsigned)gen_grid_cluster(&k->grid[1]);
  const unsigned cols = g[0] / (unsigned)gen_grid_cluster(&k->grid[0]);
  if (rows > GEN_SHORT_GRID && cols > GEN_SHORT_GRID) return false;
  gen_config twin = *cfg; /* gen_check refuses it (an error) where 1 is not a group value */
  twin.v[gi] = 1;
  bool valid = false;
  return gen_check(t, &twin, p, &valid, NULL, 0, &e) == MMT_OK && valid;
}

int gen_kernel_cluster_blocks(const gen_kernel *k) {
  return gen_grid_cluster(&k->grid[0]) * gen_grid_cluster(&k->grid[1]) *
         gen_grid_cluster(&k->grid[2]);
}

int gen_align_bytes(const uint64_t *values, int count) {
  uint64_t align = 16;
  for (int i = 0; i < count; i++)
    while (values[i] % align) align /= 2;
  return (int)align;
}

bool gen_requires_met(const gen_requires *r, const gen_problem *p) {
  /* A zero multiple in a hand-built struct means "any", like 1. */
  if (r->m_multiple > 1 && p->m % r->m_multiple != 0) return false;
  if (r->n_multiple > 1 && p->n % r->n_multiple != 0) return false;
  if (r->k_multiple > 1 && p->k % r->k_multiple != 0) return false;
  if (p->align_bytes < r->align_bytes && !r->repack) return false;
  if (p->layout && gen_layout_index(p->layout) < 0) return false;
  int64_t ld[3];
  gen_min_ld(p->layout, p->m, p->n, p->k, ld);
  if (p->op && p->op->gated) ld[2] = p->n / 2; /* C and D have the gated half of the columns */
  return p->lda >= ld[0] && p->ldb >= ld[1] && p->ldc >= ld[2];
}
