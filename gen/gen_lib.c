/*
 * gen_lib.c -- the `mmt` helper library templates see, the dtype table, and small Lua value
 * helpers the declaration and emit checks share.
 *
 * The library stays small on purpose: each helper is something nearly every template needs
 * and would otherwise get subtly wrong (ceil division, ${name} substitution).  What templates
 * share with each other (CUDA snippets, Lua libraries) is read from files at load time, so
 * that the template's hash covers it; the device's limits are mmt.device (gen_device.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>

#include "gen_int.h"

typedef struct {
  const char *name;
  const char *ctype; /* spelling in CUDA C.  NVRTC has no fp16 headers: f16/bf16 templates
                        declare these types themselves (templates/README.md) */
  int bytes;
} gen_dtype_info;

static const gen_dtype_info gen_dtypes[] = {
    {"f32", "float", 4},
    {"f64", "double", 8},
    {"f16", "__half", 2},
    {"bf16", "__nv_bfloat16", 2},
    {"tf32", "float", 4}, /* f32 data, tf32 tensor-core math: chosen only when asked for */
    /* FP8 (OCP 8-bit floats): inputs of op kernels only, whose D has a wider type */
    {"e4m3", "__nv_fp8_e4m3", 1},
    {"e5m2", "__nv_fp8_e5m2", 1},
    {NULL, NULL, 0},
};
_Static_assert(sizeof gen_dtypes / sizeof gen_dtypes[0] == GEN_DTYPES + 1, "GEN_DTYPES");

static const gen_dtype_info *dtype_find(const char *dtype) {
  if (!dtype) return NULL;
  for (const gen_dtype_info *d = gen_dtypes; d->name; d++)
    if (strcmp(d->name, dtype) == 0) return d;
  return NULL;
}

int gen_dtype_size(const char *dtype) {
  const gen_dtype_info *d = dtype_find(dtype);
  return d ? d->bytes : 0;
}

bool gen_dtype_fp8(const char *dtype) {
  return dtype && (!strcmp(dtype, "e4m3") || !strcmp(dtype, "e5m2"));
}

const char *gen_dtype_fp8_other(const char *dtype) {
  return !gen_dtype_fp8(dtype) ? NULL : !strcmp(dtype, "e4m3") ? "e5m2" : "e4m3";
}

int gen_dtype_index(const char *dtype) {
  const gen_dtype_info *d = dtype_find(dtype);
  return d ? (int)(d - gen_dtypes) : -1;
}

const char *gen_dtype_name(int i) { return i >= 0 && i < GEN_DTYPES ? gen_dtypes[i].name : NULL; }

const char *gen_dtype_ctype(const char *dtype) {
  const gen_dtype_info *d = dtype_find(dtype);
  return d ? d->ctype : NULL;
}

bool gen_valid_name(const char *s, bool ident, size_t maxlen) {
  if (!s || !s[0]) return false;
  if (ident && s[0] >= '0' && s[0] <= '9') return false;
  size_t n = 0;
  for (; s[n]; n++) {
    char c = s[n];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok || n >= maxlen) return false;
  }
  return true;
}

bool gen_lua_int(lua_State *L, int idx, int64_t *v) {
  /* lua_tointegerx alone would also accept the string "8"; a list of integers means numbers. */
  if (lua_type(L, idx) != LUA_TNUMBER) return false;
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  if (!ok) return false;
  *v = (int64_t)i;
  return true;
}

int gen_raw_field(lua_State *L, int tbl, const char *key) {
  tbl = lua_absindex(L, tbl);
  lua_pushstring(L, key);
  return lua_rawget(L, tbl);
}

lua_Integer gen_list_len(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx), keys = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
      lua_pop(L, 1);
      return -1;
    }
    keys++;
  }
  return keys == n ? n : -1;
}

/* mmt.ceil_div(a, b): ceil(a / b) for integers, b >= 1. */
static int mmt_ceil_div(lua_State *L) {
  lua_Integer a = luaL_checkinteger(L, 1);
  lua_Integer b = luaL_checkinteger(L, 2);
  luaL_argcheck(L, b >= 1, 2, "divisor must be >= 1");
  /* C division truncates toward zero, which is already the ceiling for a <= 0. */
  lua_pushinteger(L, a / b + (a % b > 0 ? 1 : 0));
  return 1;
}

/* mmt.is_pow2(x): true for 1, 2, 4, ... */
static int mmt_is_pow2(lua_State *L) {
  lua_Integer x = luaL_checkinteger(L, 1);
  lua_pushboolean(L, x > 0 && (x & (x - 1)) == 0);
  return 1;
}

/* mmt.split_k_refusal(blocks, split, bytes): nil when a split-K launch of `blocks` blocks a
 * slice, `split` slices and `bytes` of workspace a block fits the split_k snippet's arrival
 * counters (GEN_SPLITK_TILES) and GEN_MAX_SPLITK_WORKSPACE; else the reason. */
static int mmt_split_k_refusal(lua_State *L) {
  lua_Integer blocks = luaL_checkinteger(L, 1);
  lua_Integer split = luaL_checkinteger(L, 2);
  lua_Integer bytes = luaL_checkinteger(L, 3);
  luaL_argcheck(L, blocks >= 0, 1, "must be >= 0");
  luaL_argcheck(L, split >= 1, 2, "must be >= 1");
  luaL_argcheck(L, bytes >= 0, 3, "must be >= 0");
  if (blocks > GEN_SPLITK_TILES)
    lua_pushfstring(L, "split-K: more than %d tiles of C", GEN_SPLITK_TILES);
  else if ((double)blocks * (double)split * (double)bytes > (double)GEN_MAX_SPLITK_WORKSPACE)
    lua_pushfstring(L, "split-K workspace over %d MiB", GEN_MAX_SPLITK_WORKSPACE >> 20);
  else
    lua_pushnil(L);
  return 1;
}

/* Adds tostring(vars[name]) to the buffer; vars is argument 2.  Only strings and numbers:
 * anything else in generated C is a template bug worth stopping on. */
static void subst_value(lua_State *L, luaL_Buffer *b, const char *name, size_t len) {
  char key[GEN_NAME_MAX];
  if (len == 0 || len >= sizeof key)
    luaL_error(L, "mmt.subst: bad placeholder name of length %d", (int)len);
  memcpy(key, name, len);
  key[len] = '\0';
  if (!gen_valid_name(key, true, sizeof key - 1))
    luaL_error(L, "mmt.subst: bad placeholder '${%s}'", key);
  int ty = lua_getfield(L, 2, key);
  if (ty == LUA_TNIL) luaL_error(L, "mmt.subst: no value for '${%s}'", key);
  if (ty != LUA_TSTRING && ty != LUA_TNUMBER)
    luaL_error(L, "mmt.subst: '${%s}' is a %s (expected a string or a number)", key,
               lua_typename(L, ty));
  luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);
  luaL_addvalue(b);
}

/* mmt.subst(text, vars): text with every ${name} replaced by tostring(vars[name]). */
static int mmt_subst(lua_State *L) {
  size_t len = 0;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *end = s + len;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  while (s < end) {
    const char *open = s;
    while (open + 1 < end && !(open[0] == '$' && open[1] == '{')) open++;
    if (open + 1 >= end) {
      luaL_addlstring(&b, s, (size_t)(end - s));
      break;
    }
    luaL_addlstring(&b, s, (size_t)(open - s));
    const char *close = memchr(open + 2, '}', (size_t)(end - open - 2));
    if (!close) return luaL_error(L, "mmt.subst: '${' without a closing '}'");
    subst_value(L, &b, open + 2, (size_t)(close - open - 2));
    s = close + 1;
  }
  luaL_pushresult(&b);
  return 1;
}

/* mmt.dtype(d): {ctype = "float", bytes = 4} for "f32". */
static int lib_dtype(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const gen_dtype_info *d = dtype_find(name);
  if (!d) return luaL_error(L, "mmt.dtype: unknown dtype '%s' (known: f32, f64, f16, bf16, tf32)", name);
  lua_createtable(L, 0, 2);
  lua_pushstring(L, d->ctype);
  lua_setfield(L, -2, "ctype");
  lua_pushinteger(L, d->bytes);
  lua_setfield(L, -2, "bytes");
  return 1;
}

/* The most a snippet or library file may hold. */
#define GEN_SHARED_MAX (256u << 10)

static const gen_shared_kind k_snippet = {"snippet", "snippets", ".cu"};
static const gen_shared_kind k_lib = {"lib", "lib", ".lua"};

/* Pushes the text of the shared file `name` of kind (gen_find_shared; its path into path) and
 * folds it into the template's hash: hash := H(hash, tag, 0, text), the tag being the name (a
 * snippet) or "lib/<name>" (a library), so that stored rows of a template whose snippet or
 * library changed are stale, as if the template itself had changed.  At load time only: what
 * is read later would not be covered by the hash. */
static void push_shared_text(lua_State *L, gen_template *t, const gen_shared_kind *kind,
                             const char *name, char path[PATH_MAX]) {
  if (!t->loading)
    luaL_error(L,
               "mmt.%s('%s'): call it while the template loads (at the file's top level), "
               "so that the template's hash covers it",
               kind->what, name);
  ut_err e = {{0}};
  if (gen_find_shared(t->path, kind, name, path, PATH_MAX, &e))
    luaL_error(L, "mmt.%s: %s", kind->what, e.msg);
  /* The text is read straight into a Lua buffer, so that a Lua error (out of memory) never
   * leaves C memory or a file behind: nothing C-owned is held across a Lua call. */
  struct stat st;
  if (stat(path, &st) != 0 || st.st_size > (off_t)GEN_SHARED_MAX)
    luaL_error(L, "mmt.%s: %s cannot be read or is over %d KiB", kind->what, path,
               (int)(GEN_SHARED_MAX >> 10));
  const size_t len = (size_t)st.st_size;
  luaL_Buffer b;
  char *text = luaL_buffinitsize(L, &b, len + 1);
  FILE *f = fopen(path, "rb");
  const size_t got = f ? fread(text, 1, len + 1, f) : 0;
  if (f) fclose(f);
  if (!f || got != len || memchr(text, '\0', len))
    luaL_error(L, "mmt.%s: %s cannot be read as text", kind->what, path);
  unsigned char seed[8];
  for (int i = 0; i < 8; i++) seed[i] = (unsigned char)(t->hash_value >> (8 * i));
  uint64_t h = ut_hash64(seed, sizeof seed);
  if (kind == &k_lib) h = ut_hash64_more(h, "lib/", 4);
  h = ut_hash64_more(h, name, strlen(name) + 1);
  t->hash_value = ut_hash64_more(h, text, len);
  luaL_pushresultsize(&b, len);
}

/* mmt.snippet(name): the text of snippets/<name>.cu, at load time only (push_shared_text). */
static int mmt_snippet(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  char path[PATH_MAX];
  push_shared_text(L, t, &k_snippet, name, path);
  if (!strcmp(name, "tile_order")) t->tile_order = true;
  return 1;
}

/* Registry key of the table of libraries loaded so far: name -> what the file returned, or
 * false while it runs (a library that asks for itself, directly or not, is a cycle). */
#define GEN_LIBS_KEY "mmt.libs"

/* mmt.lib(name): runs lib/<name>.lua once, in the template's own sandbox (its globals, its
 * budget: it is part of loading the template), and returns what the file returns (true for
 * nothing), the same value to every later call.  At load time only (push_shared_text). */
static int mmt_lib(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, GEN_LIBS_KEY);
  const int libs = lua_gettop(L);
  const int ty = lua_getfield(L, libs, name);
  if (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1))
    return luaL_error(L, "mmt.lib('%s'): the library asks for itself (a cycle)", name);
  if (ty != LUA_TNIL) return 1;
  lua_pop(L, 1);
  char path[PATH_MAX];
  push_shared_text(L, t, &k_lib, name, path);
  size_t len = 0;
  const char *text = lua_tolstring(L, -1, &len);
  lua_pushboolean(L, 0);
  lua_setfield(L, libs, name);
  const char *chunkname = lua_pushfstring(L, "@%s", path);
  if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK) return lua_error(L);
  lua_call(L, 0, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, libs, name);
  return 1;
}

static const luaL_Reg mmt_funcs[] = {
    {"ceil_div", mmt_ceil_div},
    {"is_pow2", mmt_is_pow2},
    {"split_k_refusal", mmt_split_k_refusal},
    {"subst", mmt_subst},
    {"dtype", lib_dtype},
    {NULL, NULL},
};

int gen_open_mmt(lua_State *L, gen_template *t) {
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, GEN_LIBS_KEY);
  luaL_newlib(L, mmt_funcs);
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, mmt_snippet, 1);
  lua_setfield(L, -2, "snippet");
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, mmt_lib, 1);
  lua_setfield(L, -2, "lib");
  gen_push_device(L, t);
  lua_setfield(L, -2, "device");
  lua_setglobal(L, "mmt");
  return 0;
}
