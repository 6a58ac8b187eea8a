/*
 * gen_memo.c -- the constraints' decision trees: what a template's constraints answered on a
 * config alone (no problem), kept per dtype and layout, so that a config whose answer follows
 * from those kept is not asked again.
 *
 * The constraints are a function of their arguments and mmt.device (templates/README.md).
 * With no problem and a given dtype and layout, the only arguments left are p's fields, so a
 * call reads some of them, one after another, each read deciding what the call does next,
 * until it answers.  Its `p` here is a table that records its reads (gen_memo_push_params):
 * the parameters in the order it first read them, and their values, are a path through a tree
 * whose leaves are answers.  Any config that agrees with that path on those parameters gets
 * the same answer, whatever its other parameters: the call could not have told them apart.
 * So one call answers for every config down its path -- a template that rejects a config for
 * its tile shape before reading its block order answers once for every block order -- and
 * gen_memo_find walks the tree with a config's values instead of calling the template.
 *
 * A tree that contradicts itself (the same values read, another answer or another read) says
 * the template is not such a function; that pair's tree is dropped and not kept again.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

/* A node: not reached yet, an answer, or the parameter the constraints read next. */
enum { NODE_UNKNOWN = -1, NODE_LEAF = -2 };
typedef struct {
  int8_t param;  /* NODE_UNKNOWN, NODE_LEAF, or the parameter read next */
  uint8_t valid; /* a leaf's answer */
  int32_t kids;  /* a parameter's node: its values' children from kid[kids] (-1: unknown) */
} memo_node;

struct gen_memo {
  memo_node *node; /* node[0] is the root */
  int32_t nnodes, node_cap;
  int32_t *kid;
  int32_t nkids, kid_cap;
  bool broken; /* contradicted itself: nothing is found or kept */
};

/* What a template's trees may hold together (each node takes 8 bytes, and each child 4): past
 * it, answers are found along what was kept, and nothing more is kept. */
#define MEMO_BYTES_MAX ((size_t)64 << 20)

static struct gen_memo *memo_new(void) {
  struct gen_memo *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->node = malloc(64 * sizeof *m->node);
  if (!m->node) {
    free(m);
    return NULL;
  }
  m->node_cap = 64;
  m->nnodes = 1;
  m->node[0] = (memo_node){.param = NODE_UNKNOWN, .kids = -1};
  return m;
}

static void memo_free(struct gen_memo *m) {
  if (!m) return;
  free(m->node);
  free(m->kid);
  free(m);
}

void gen_memo_clear(gen_template *t) {
  for (int i = 0; i < GEN_MAX_DTYPES * GEN_LAYOUTS; i++) {
    memo_free(t->memo[i]);
    t->memo[i] = NULL;
  }
  t->memo_bytes = 0;
}

void gen_memo_values(const gen_template *t, const gen_config *cfg, uint8_t vi[GEN_MAX_PARAMS]) {
  for (int p = 0; p < t->nparams; p++) {
    int j = 0;
    while (j < t->params[p].nvalues - 1 && t->params[p].values[j] != cfg->v[p]) j++;
    vi[p] = (uint8_t)j; /* the config was checked: its values are among the parameters' */
  }
}

int gen_memo_find(const gen_template *t, int pair, const uint8_t vi[GEN_MAX_PARAMS]) {
  const struct gen_memo *m = t->memo[pair];
  if (!m || m->broken) return -1;
  int32_t n = 0;
  for (;;) {
    const memo_node *node = &m->node[n];
    if (node->param == NODE_LEAF) return node->valid;
    if (node->param == NODE_UNKNOWN) return -1;
    n = m->kid[node->kids + vi[node->param]];
    if (n < 0) return -1;
  }
}

/* Whether t's trees may take `bytes` more; if so they are counted. */
static bool room_for(gen_template *t, size_t bytes) {
  if (bytes > MEMO_BYTES_MAX - t->memo_bytes) return false;
  t->memo_bytes += bytes;
  return true;
}

/* A new node, or -1 without memory or room. */
static int32_t node_add(gen_template *t, struct gen_memo *m) {
  if (m->nnodes == m->node_cap) {
    if (!room_for(t, (size_t)m->node_cap * sizeof *m->node)) return -1;
    memo_node *grown = realloc(m->node, 2 * (size_t)m->node_cap * sizeof *grown);
    if (!grown) return -1;
    m->node = grown;
    m->node_cap *= 2;
  }
  m->node[m->nnodes] = (memo_node){.param = NODE_UNKNOWN, .kids = -1};
  return m->nnodes++;
}

/* Room for `count` children, all unknown: their first index, or -1. */
static int32_t kids_add(gen_template *t, struct gen_memo *m, int count) {
  if (m->nkids + count > m->kid_cap) {
    int32_t cap = m->kid_cap ? m->kid_cap : 256;
    while (cap < m->nkids + count) cap *= 2;
    if (!room_for(t, (size_t)(cap - m->kid_cap) * sizeof *m->kid)) return -1;
    int32_t *grown = realloc(m->kid, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    m->kid = grown;
    m->kid_cap = cap;
  }
  for (int i = 0; i < count; i++) m->kid[m->nkids + i] = -1;
  m->nkids += count;
  return m->nkids - count;
}

void gen_memo_keep(gen_template *t, int pair, const uint8_t vi[GEN_MAX_PARAMS], bool valid) {
  if (!t->memo[pair] && (!room_for(t, 64 * sizeof(memo_node)) || !(t->memo[pair] = memo_new())))
    return;
  struct gen_memo *m = t->memo[pair];
  if (m->broken) return;
  int32_t n = 0;
  for (int k = 0; k < t->reads.n; k++) {
    const int p = t->reads.order[k];
    if (m->node[n].param == NODE_UNKNOWN) {
      const int32_t kids = kids_add(t, m, t->params[p].nvalues);
      if (kids < 0) return;
      m->node[n].param = (int8_t)p;
      m->node[n].kids = kids;
    } else if (m->node[n].param != p) { /* another read where the same values were read */
      m->broken = true;
      return;
    }
    int32_t next = m->kid[m->node[n].kids + vi[p]];
    if (next < 0) {
      if ((next = node_add(t, m)) < 0) return;
      m->kid[m->node[n].kids + vi[p]] = next;
    }
    n = next;
  }
  memo_node *leaf = &m->node[n];
  if (leaf->param == NODE_UNKNOWN)
    *leaf = (memo_node){.param = NODE_LEAF, .valid = valid, .kids = -1};
  else if (leaf->param != NODE_LEAF || leaf->valid != valid) /* another answer, or more reads */
    m->broken = true;
}

/* ---- p, recording its reads ------------------------------------------------------------- */

/* The parameter named by the key at index k (upvalue 2 maps names to indices), or -1. */
static int param_of(lua_State *L, int k) {
  lua_pushvalue(L, k);
  const int i = lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER ? (int)lua_tointeger(L, -1) : -1;
  lua_pop(L, 1);
  return i;
}

/* A read of parameter i: its first one goes into the order of reads. */
static void note_read(gen_template *t, int i) {
  if (t->reads.read & (1u << i)) return;
  t->reads.read |= 1u << i;
  t->reads.order[t->reads.n++] = (int8_t)i;
}

/* __index(p, key): a parameter's value, as in a plain table; one the call assigned to (nil
 * then, since a value assigned is in p itself) is no read of the config. */
static int memo_index(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  const int i = param_of(L, 2);
  if (i < 0 || (t->reads.written & (1u << i))) return 0;
  note_read(t, i);
  lua_pushinteger(L, (lua_Integer)t->reads.cfg->v[i]);
  return 1;
}

/* __newindex(p, key, value): stored in p, as in a plain table; a parameter's is the call's
 * own from now on. */
static int memo_newindex(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  const int i = param_of(L, 2);
  if (i >= 0) t->reads.written |= 1u << i;
  lua_settop(L, 3);
  lua_rawset(L, 1);
  return 0;
}

/* __pairs(p): every field, as a plain table would list them (every parameter read). */
static int memo_pairs(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  lua_createtable(L, 0, t->nparams);
  lua_pushnil(L);
  while (lua_next(L, 1)) { /* what the call stored in p */
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
  for (int i = 0; i < t->nparams; i++) {
    if (t->reads.written & (1u << i)) continue;
    note_read(t, i);
    lua_pushinteger(L, (lua_Integer)t->reads.cfg->v[i]);
    lua_setfield(L, -2, t->params[i].name);
  }
  lua_getglobal(L, "next");
  lua_insert(L, -2);
  lua_pushnil(L);
  return 3;
}

/* The metatable of every recording p, made once (registry ref t->memo_mt_ref). */
static void push_metatable(lua_State *L, gen_template *t) {
  if (t->memo_mt_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->memo_mt_ref);
    return;
  }
  lua_createtable(L, 0, 4);
  lua_createtable(L, 0, t->nparams); /* name -> index, the closures' second upvalue */
  for (int i = 0; i < t->nparams; i++) {
    lua_pushinteger(L, i);
    lua_setfield(L, -2, t->params[i].name);
  }
  static const struct {
    const char *name;
    lua_CFunction fn;
  } methods[] = {{"__index", memo_index}, {"__newindex", memo_newindex}, {"__pairs", memo_pairs}};
  for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
    lua_pushlightuserdata(L, t);
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, methods[k].fn, 2);
    lua_setfield(L, -3, methods[k].name);
  }
  lua_pop(L, 1);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, -1);
  t->memo_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

void gen_memo_push_params(lua_State *L, gen_template *t, const gen_config *cfg) {
  t->reads.cfg = cfg;
  t->reads.read = t->reads.written = 0;
  t->reads.n = 0;
  lua_createtable(L, 0, 0);
  push_metatable(L, t);
  lua_setmetatable(L, -2);
}
