/*
 * gen_decl.c -- checks the table a template file returns and copies its declaration into C,
 * so that enumerating the space never needs Lua.
 *
 * Everything is read raw (no metamethods run): the declaration is data, and reading it must
 * not execute template code.  Each error names the field, e.g. params[2].values, because the
 * reader is a researcher looking at their file.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

typedef struct {
  lua_State *L;
  gen_template *t;
  ut_err *err;
  int decl; /* stack index of the declaration table */
} decl_reader;

static const char *const decl_fields[] = {
    "name",    "description", "dtypes", "layouts",   "params",
    "default", "constraints", "emit",   "epilogues", NULL,
};

__attribute__((format(printf, 2, 3))) static mmt_status decl_fail(decl_reader *d, const char *fmt,
                                                                  ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ut_fail(d->err, MMT_ERR_TEMPLATE, "template '%s' (%s): %s", d->t->name, d->t->path, msg);
}

/* Unknown top-level fields are errors: a misspelt "contraints" would otherwise silently
 * switch the constraints off. */
static mmt_status decl_known_fields(decl_reader *d) {
  lua_State *L = d->L;
  lua_pushnil(L);
  while (lua_next(L, d->decl)) {
    lua_pop(L, 1);
    bool known = false;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (const char *const *f = decl_fields; *f && !known; f++)
        known = strcmp(*f, lua_tostring(L, -1)) == 0;
    if (!known) {
      const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1);
      mmt_status rc = decl_fail(d,
                                "unknown field '%s' (fields: name, description, dtypes, "
                                "layouts, params, default, constraints, emit, epilogues)",
                                key);
      lua_pop(L, 1);
      return rc;
    }
  }
  return MMT_OK;
}

static mmt_status decl_name(decl_reader *d) {
  lua_State *L = d->L;
  mmt_status rc = MMT_OK;
  int ty = gen_raw_field(L, d->decl, "name");
  const char *name = ty == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (!gen_valid_name(name, false, GEN_NAME_MAX - 1))
    rc = decl_fail(d, "name must be a string of 1 to %d characters [A-Za-z0-9_]", GEN_NAME_MAX - 1);
  else if (strcmp(name, d->t->name) != 0)
    rc = decl_fail(d, "name '%s' must equal the file's base name '%s'", name, d->t->name);
  lua_pop(L, 1);
  return rc;
}

static mmt_status decl_description(decl_reader *d) {
  lua_State *L = d->L;
  mmt_status rc = MMT_OK;
  size_t len = 0;
  int ty = gen_raw_field(L, d->decl, "description");
  if (ty == LUA_TSTRING) {
    const char *s = lua_tolstring(L, -1, &len);
    if (len >= sizeof d->t->description)
      rc = decl_fail(d, "description is longer than %zu bytes", sizeof d->t->description - 1);
    else
      memcpy(d->t->description, s, len + 1);
  } else if (ty != LUA_TNIL) {
    rc = decl_fail(d, "description must be a string");
  }
  lua_pop(L, 1);
  return rc;
}

static mmt_status decl_dtype_at(decl_reader *d, int i) {
  lua_State *L = d->L;
  gen_template *t = d->t;
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (!s || gen_dtype_size(s) == 0)
    return decl_fail(d, "dtypes[%d] must be a known dtype name (f32, f64, f16, bf16, tf32)", i + 1);
  for (int j = 0; j < i; j++)
    if (strcmp(t->dtypes[j], s) == 0) return decl_fail(d, "dtypes[%d] repeats '%s'", i + 1, s);
  snprintf(t->dtypes[i], sizeof t->dtypes[i], "%s", s); /* known names are short */
  return MMT_OK;
}

static mmt_status decl_dtypes(decl_reader *d) {
  lua_State *L = d->L;
  mmt_status rc = MMT_OK;
  int top = lua_gettop(L);
  lua_Integer n = -1;
  if (gen_raw_field(L, d->decl, "dtypes") == LUA_TTABLE) n = gen_list_len(L, -1);
  if (n < 1 || n > GEN_MAX_DTYPES) {
    rc = decl_fail(d, "dtypes must be a list of 1 to %d dtype names, e.g. {\"f32\"}",
                   GEN_MAX_DTYPES);
    goto cleanup;
  }
  for (int i = 0; i < (int)n && !rc; i++) {
    lua_rawgeti(L, top + 1, i + 1);
    rc = decl_dtype_at(d, i);
    lua_pop(L, 1);
  }
  d->t->ndtypes = (int)n;
cleanup:
  lua_settop(L, top);
  return rc;
}

/* layouts: optional list of "nn", "nt", "tn", "tt"; absent means {"nn"} (a template written
 * before transposes existed emits the nn kernel only, whatever it is asked). */
static mmt_status decl_layouts(decl_reader *d) {
  lua_State *L = d->L;
  mmt_status rc = MMT_OK;
  int top = lua_gettop(L);
  int ty = gen_raw_field(L, d->decl, "layouts");
  d->t->layouts = 1u << gen_layout_index("nn");
  if (ty == LUA_TNIL) goto cleanup;
  lua_Integer n = ty == LUA_TTABLE ? gen_list_len(L, -1) : -1;
  if (n < 1 || n > 4) {
    rc = decl_fail(d, "layouts must be a list of 1 to 4 of \"nn\", \"nt\", \"tn\", \"tt\"");
    goto cleanup;
  }
  d->t->layouts = 0;
  for (int i = 0; i < (int)n && !rc; i++) {
    lua_rawgeti(L, top + 1, i + 1);
    int li = lua_type(L, -1) == LUA_TSTRING ? gen_layout_index(lua_tostring(L, -1)) : -1;
    if (li < 0)
      rc = decl_fail(d, "layouts[%d] must be one of \"nn\", \"nt\", \"tn\", \"tt\"", i + 1);
    else if (d->t->layouts & (1u << li))
      rc = decl_fail(d, "layouts[%d] repeats '%s'", i + 1, lua_tostring(L, -1));
    else
      d->t->layouts |= 1u << li;
    lua_pop(L, 1);
  }
cleanup:
  lua_settop(L, top);
  return rc;
}

/* Reads params[i].values (on top of the stack) into p. */
static mmt_status decl_values(decl_reader *d, int i, gen_param *p) {
  lua_State *L = d->L;
  lua_Integer n = lua_type(L, -1) == LUA_TTABLE ? gen_list_len(L, -1) : -1;
  if (n < 1 || n > GEN_MAX_VALUES)
    return decl_fail(d, "params[%d].values must be a non-empty list of integers (at most %d)",
                     i + 1, GEN_MAX_VALUES);
  for (int j = 0; j < (int)n; j++) {
    lua_rawgeti(L, -1, j + 1);
    bool ok = gen_lua_int(L, -1, &p->values[j]);
    lua_pop(L, 1);
    if (!ok)
      return decl_fail(d,
                       "params[%d].values must be a non-empty list of integers (values[%d] is not)",
                       i + 1, j + 1);
    for (int k = 0; k < j; k++)
      if (p->values[k] == p->values[j])
        return decl_fail(d, "params[%d].values lists %lld twice", i + 1, (long long)p->values[j]);
  }
  p->nvalues = (int)n;
  return MMT_OK;
}

/* Reads params[i] (on top of the stack). */
static mmt_status decl_param(decl_reader *d, int i) {
  lua_State *L = d->L;
  gen_param *p = &d->t->params[i];
  int top = lua_gettop(L);
  mmt_status rc = MMT_OK;
  if (lua_type(L, top) != LUA_TTABLE) {
    rc = decl_fail(d, "params[%d] must be a table {name = \"...\", values = {...}}", i + 1);
    goto cleanup;
  }
  const char *name = gen_raw_field(L, top, "name") == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (!gen_valid_name(name, true, GEN_NAME_MAX - 1)) {
    rc = decl_fail(d, "params[%d].name must be an identifier of at most %d characters", i + 1,
                   GEN_NAME_MAX - 1);
    goto cleanup;
  }
  if (gen_param_index(d->t, name) >= 0) {
    rc = decl_fail(d, "params[%d].name '%s' is used twice", i + 1, name);
    goto cleanup;
  }
  gen_raw_field(L, top, "values");
  rc = decl_values(d, i, p);
  if (!rc) snprintf(p->name, sizeof p->name, "%s", name); /* named only once complete */
cleanup:
  lua_settop(L, top);
  return rc;
}

static mmt_status decl_params(decl_reader *d) {
  lua_State *L = d->L;
  gen_template *t = d->t;
  mmt_status rc = MMT_OK;
  int top = lua_gettop(L);
  lua_Integer n = -1;
  if (gen_raw_field(L, d->decl, "params") == LUA_TTABLE) n = gen_list_len(L, -1);
  if (n < 1 || n > GEN_MAX_PARAMS) {
    rc = decl_fail(d, "params must be a list of 1 to %d tables {name = ..., values = {...}}",
                   GEN_MAX_PARAMS);
    goto cleanup;
  }
  uint64_t size = 1;
  for (int i = 0; i < (int)n && !rc; i++) {
    lua_rawgeti(L, top + 1, i + 1);
    t->nparams = i; /* gen_param_index sees only the parameters already read */
    rc = decl_param(d, i);
    lua_pop(L, 1);
    if (!rc && __builtin_mul_overflow(size, (uint64_t)t->params[i].nvalues, &size))
      rc = decl_fail(d, "the parameter space has more than 2^64 configs");
  }
  if (!rc) t->nparams = (int)n;
  for (int i = 0; i < t->nparams; i++) {
    const uint64_t count = (uint64_t)t->params[i].nvalues;
    t->params[i].recip = ((1ull << GEN_RECIP_SHIFT) + count - 1) / count;
  }
cleanup:
  lua_settop(L, top);
  return rc;
}

/* default = {name = value, ...}; every other parameter defaults to its first value. */
static mmt_status decl_default(decl_reader *d) {
  lua_State *L = d->L;
  gen_template *t = d->t;
  mmt_status rc = MMT_OK;
  int top = lua_gettop(L);
  t->def.n = t->nparams;
  for (int i = 0; i < t->nparams; i++) t->def.v[i] = t->params[i].values[0];
  int ty = gen_raw_field(L, d->decl, "default");
  if (ty == LUA_TNIL) goto cleanup;
  if (ty != LUA_TTABLE) {
    rc = decl_fail(d, "default must be a table {param = value, ...}");
    goto cleanup;
  }
  lua_pushnil(L);
  while (!rc && lua_next(L, top + 1)) {
    int i = lua_type(L, -2) == LUA_TSTRING ? gen_param_index(t, lua_tostring(L, -2)) : -1;
    int64_t v = 0;
    if (i < 0)
      rc = decl_fail(d, "default.%s is not a parameter",
                     lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "<non-string key>");
    else if (!gen_lua_int(L, -1, &v) || !gen_value_allowed(t, i, v))
      rc = decl_fail(d, "default.%s must be one of params[%d].values", t->params[i].name, i + 1);
    else
      t->def.v[i] = v;
    lua_pop(L, 1);
  }
cleanup:
  lua_settop(L, top);
  return rc;
}

/* Keeps the functions in the registry: the declaration table itself is not kept.  So are the
 * parameters' names as Lua strings, from which every call's `p` is built. */
static mmt_status decl_functions(decl_reader *d) {
  lua_State *L = d->L;
  lua_createtable(L, d->t->nparams, 0);
  for (int i = 0; i < d->t->nparams; i++) {
    lua_pushstring(L, d->t->params[i].name);
    lua_rawseti(L, -2, i + 1);
  }
  d->t->keys_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int ty = gen_raw_field(L, d->decl, "constraints");
  if (ty == LUA_TFUNCTION) {
    d->t->constraints_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  } else {
    lua_pop(L, 1);
    if (ty != LUA_TNIL) return decl_fail(d, "constraints must be a function(p, prob) or absent");
  }
  if (gen_raw_field(L, d->decl, "emit") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return decl_fail(d, "emit must be a function(p, dtype, layout) returning a table");
  }
  d->t->emit_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return MMT_OK;
}

/* epilogues = true: emit(p, dtype, layout, op) honours every op (gen.h, "Epilogues"). */
static mmt_status decl_epilogues(decl_reader *d) {
  const int ty = gen_raw_field(d->L, d->decl, "epilogues");
  d->t->epilogues = ty == LUA_TBOOLEAN && lua_toboolean(d->L, -1);
  lua_pop(d->L, 1);
  if (ty != LUA_TNIL && ty != LUA_TBOOLEAN) return decl_fail(d, "epilogues must be a boolean");
  return MMT_OK;
}

mmt_status gen_decl_read(lua_State *L, gen_template *t, ut_err *err) {
  decl_reader d = {L, t, err, lua_gettop(L)};
  if (!lua_istable(L, d.decl))
    return decl_fail(&d, "the file must return a table, not %s", luaL_typename(L, d.decl));
  mmt_status rc = decl_known_fields(&d);
  if (!rc) rc = decl_name(&d);
  if (!rc) rc = decl_description(&d);
  if (!rc) rc = decl_dtypes(&d);
  if (!rc) rc = decl_layouts(&d);
  if (!rc) rc = decl_params(&d);
  if (!rc) rc = decl_default(&d);
  if (!rc) rc = decl_epilogues(&d);
  if (!rc) rc = decl_functions(&d);
  return rc;
}
