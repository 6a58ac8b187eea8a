/*
 * gen_int.h -- private to gen/: the template struct and the sandbox calls the gen_*.c files
 * share.  Nothing outside gen/ includes this.
 */
#ifndef MMT_GEN_INT_H
#define MMT_GEN_INT_H

#include <lua.h>

#include "gen.h"

#define GEN_MAX_DTYPES 8
#define GEN_DTYPE_MAX 16
#define GEN_DESC_MAX 1024

/* Budget bookkeeping for one Lua state; the lua_Alloc and the count hook update it. */
typedef struct {
  size_t used;     /* bytes the state holds now */
  long long count; /* instructions run by the current call (in steps of the hook period) */
  bool mem_hit;    /* an allocation was refused during the current call */
  bool insn_hit;   /* the instruction budget ran out during the current call */
} gen_sandbox;

/* The lines of a template folder's lineage.txt that name the template and its hash
 * (gen_lineage.c). */
typedef struct gen_lineage gen_lineage;

typedef struct {
  char name[GEN_NAME_MAX];
  int nvalues;
  uint64_t recip; /* ceil(2^GEN_RECIP_SHIFT / nvalues): gen_config_at's division */
  int64_t values[GEN_MAX_VALUES];
} gen_param;

/* gen_config_at divides an index below 2^GEN_RECIP_BITS by a count of values (<= 64) as a
 * multiplication by gen_param.recip and a shift: exact there, since the error, under
 * 2^(GEN_RECIP_BITS - GEN_RECIP_SHIFT), stays below 1 / 64; and the product fits 64 bits. */
#define GEN_RECIP_SHIFT 40
#define GEN_RECIP_BITS 24

struct gen_template {
  lua_State *L;
  gen_sandbox sb; /* the allocator's ud: the template is heap-allocated, so this never moves */
  char *path;
  char name[GEN_NAME_MAX];
  char description[GEN_DESC_MAX];
  char hash[17];
  uint64_t hash_value; /* while loading: the file's hash with each snippet's folded in */
  bool loading;        /* the file's top level is running: mmt.snippet may be called */
  bool tile_order;     /* it loaded the tile_order snippet (gen_group_twin) */
  bool epilogues;      /* it declares epilogues = true: emit takes a gen_op */
  int ndtypes;
  char dtypes[GEN_MAX_DTYPES][GEN_DTYPE_MAX];
  unsigned layouts; /* bit gen_layout_index(l) set for each declared layout */
  int nparams;
  gen_param params[GEN_MAX_PARAMS];
  gen_config def;
  gen_device device;   /* mmt.device: the limits its configs must fit (gen_set_device) */
  int constraints_ref; /* registry refs; LUA_NOREF when the template has no constraints */
  int emit_ref;
  bool lineage_read;    /* gen_emits_as read lineage.txt (once) */
  gen_lineage *lineage; /* what it kept; NULL when it ran out of memory */
  int keys_ref;         /* registry ref: the list of the parameters' names, as Lua strings */
  /* The constraints' decision trees on configs alone, per dtype (index in dtypes) *
   * GEN_LAYOUTS + layout (gen_memo.c), and what the call running now has read of p. */
  struct gen_memo *memo[GEN_MAX_DTYPES * GEN_LAYOUTS];
  size_t memo_bytes; /* what the trees hold */
  int memo_mt_ref;   /* registry ref: the metatable of a p that records its reads */
  struct {
    const gen_config *cfg;
    uint32_t read, written; /* bit i: parameter i read from the config; assigned by the call */
    int n;
    int8_t order[GEN_MAX_PARAMS]; /* the parameters read, in the order first read */
  } reads;
};

/* gen_memo.c */

/* Forgets every decision tree (the device changed, or the template is freed). */
void gen_memo_clear(gen_template *t);
/* vi[p]: the index of cfg's value of parameter p among its values (cfg checked already). */
void gen_memo_values(const gen_template *t, const gen_config *cfg, uint8_t vi[GEN_MAX_PARAMS]);
/* What the constraints answer on the config of value indices vi for pair (dtype index *
 * GEN_LAYOUTS + layout) as the tree kept says: 1 valid, 0 invalid, -1 not known. */
int gen_memo_find(const gen_template *t, int pair, const uint8_t vi[GEN_MAX_PARAMS]);
/* Pushes a `p` for cfg that records the parameters the call reads (t->reads). */
void gen_memo_push_params(lua_State *L, gen_template *t, const gen_config *cfg);
/* After a call on such a p: its answer, kept along the path it read. */
void gen_memo_keep(gen_template *t, int pair, const uint8_t vi[GEN_MAX_PARAMS], bool valid);

/* gen_sandbox.c */

/* Creates a state whose memory is capped by t->sb and opens the sandboxed libraries.
 * Errors: MMT_ERR_NOMEM, MMT_ERR_TEMPLATE_LIMIT. */
mmt_status gen_sb_open(gen_template *t, ut_err *err);
/* Runs fn(ctx) (ctx as a light userdata argument) in protected mode with a traceback handler
 * and a fresh instruction budget.  On MMT_OK fn's nresults results are left on the stack; on
 * failure the stack is as before and err says what the template did. */
mmt_status gen_sb_pcall(gen_template *t, lua_CFunction fn, void *ctx, int nresults, ut_err *err);
/* A fresh budget inside a gen_sb_pcall, for the next of several template calls it makes (each
 * gets the whole budget, as if it were a call of its own). */
void gen_sb_rearm(gen_template *t);
/* Closes the state.  Safe when t->L is NULL. */
void gen_sb_close(gen_template *t);

/* gen_find.c */

/* What templates share: CUDA snippets (snippets/<name>.cu) and Lua libraries
 * (lib/<name>.lua); see templates/README.md. */
typedef struct {
  const char *what; /* "snippet", for messages */
  const char *dir;  /* "snippets": the folder beside the templates */
  const char *ext;  /* ".cu" */
} gen_shared_kind;

/* The file of shared piece `name` of kind: <dir>/<name><ext> in the folder of template_path,
 * else in each folder of the template search path.  Errors: MMT_ERR_INVALID_ARG (bad name),
 * MMT_ERR_NOT_FOUND (the folders searched). */
mmt_status gen_find_shared(const char *template_path, const gen_shared_kind *kind, const char *name,
                           char *path, size_t pathlen, ut_err *err);

/* gen_lib.c */

/* Opens the `mmt` helper library as a global for template t.  Called in protected mode. */
int gen_open_mmt(lua_State *L, gen_template *t);
/* The C type of dtype ("f32" -> "float"); NULL when unknown. */
const char *gen_dtype_ctype(const char *dtype);
/* True when s is 1..maxlen characters of [A-Za-z0-9_] (and, when ident, does not start
 * with a digit). */
bool gen_valid_name(const char *s, bool ident, size_t maxlen);
/* True when the value at idx is a number with an integer value (not a numeric string). */
bool gen_lua_int(lua_State *L, int idx, int64_t *v);
/* Pushes tbl[key] without running metamethods; returns its type. */
int gen_raw_field(lua_State *L, int tbl, const char *key);
/* Length of the list at idx, or -1 when it has keys other than 1..n. */
lua_Integer gen_list_len(lua_State *L, int idx);

/* gen_op.c */

/* Pushes the table `op` of templates/README.md for op (nil for NULL). */
void gen_push_op(lua_State *L, const gen_op *op);

/* gen_device.c */

/* Pushes the read-only table mmt.device, whose fields read t->device when asked. */
void gen_push_device(lua_State *L, gen_template *t);

/* gen_config.c */

/* True when value is in parameter i's list. */
bool gen_value_allowed(const gen_template *t, int i, int64_t value);
/* MMT_ERR_INVALID_ARG unless cfg has one listed value per parameter. */
mmt_status gen_config_check(const gen_template *t, const gen_config *cfg, ut_err *err);

/* gen_lineage.c */

/* gen_lineage_free(NULL) is a no-op. */
void gen_lineage_free(gen_lineage *g);

/* gen_decl.c */

/* Checks the declaration table at the top of the stack and copies it into t.  Called in
 * protected mode; a malformed declaration is reported through err and the return status. */
mmt_status gen_decl_read(lua_State *L, gen_template *t, ut_err *err);

#endif /* MMT_GEN_INT_H */
