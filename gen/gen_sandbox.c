/*
 * gen_sandbox.c -- the Lua state a template runs in: capped memory, a counted instruction
 * budget, only the pure libraries, strict globals, and every call protected with a traceback.
 *
 * Templates are code written by others, so nothing here trusts them: all Lua work (even our
 * own table reads, which can run out of memory) happens inside lua_pcall, and no Lua error can
 * reach the panic function.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "gen_int.h"

/* The count hook fires every SB_HOOK_PERIOD VM instructions: often enough to stop a runaway
 * loop within microseconds of the budget, rarely enough to cost nothing measurable. */
#define SB_HOOK_PERIOD 10000
#define SB_INSN_MSG "instruction limit exceeded (infinite loop?)"

/* The libraries a template may use: pure computation, no files, processes or debug access
 * (our own copy of linit.c's list). */
static const luaL_Reg sb_libs[] = {
    {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL},
};

/* Base-library globals removed: they read files, compile text or bytecode at run time
 * (escaping the text-only rule), write to our stdout, or retune the collector. */
static const char *const sb_removed[] = {
    "dofile", "loadfile", "load", "require", "print", "collectgarbage", NULL,
};

/* lua_Alloc that refuses to grow past GEN_MEMORY_LIMIT_BYTES.  Lua answers a refusal with an
 * emergency collection and then a "not enough memory" error, which gen_sb_pcall reports. */
static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  gen_sandbox *sb = ud;
  size_t old = ptr ? osize : 0; /* when ptr is NULL, osize is a type tag, not a size */
  if (nsize == 0) {
    free(ptr);
    sb->used -= old;
    return NULL;
  }
  if (nsize > old && nsize - old > GEN_MEMORY_LIMIT_BYTES - sb->used) {
    sb->mem_hit = true;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (!p) return NULL;
  sb->used = sb->used - old + nsize;
  return p;
}

static gen_sandbox *sb_of(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* Count hook.  Once the budget is spent it re-arms itself to fire on every instruction, so a
 * template that catches the error with pcall meets it again at its very next instruction and
 * the error always reaches the host. */
static void sb_hook(lua_State *L, lua_Debug *ar) {
  gen_sandbox *sb = sb_of(L);
  if (!sb->insn_hit) {
    sb->count += SB_HOOK_PERIOD;
    if (sb->count <= GEN_INSTRUCTION_LIMIT) return;
    sb->insn_hit = true;
    lua_sethook(L, sb_hook, LUA_MASKCOUNT, 1);
  }
  if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
    lua_pushfstring(L, "%s:%d: " SB_INSN_MSG, ar->short_src, ar->currentline);
  else
    lua_pushliteral(L, SB_INSN_MSG);
  lua_error(L);
}

/* Message handler: adds a traceback to the error (lua.c's msghandler). */
static int sb_msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int sb_undefined_read(lua_State *L) {
  return luaL_error(L, "undefined global '%s'", luaL_tolstring(L, 2, NULL));
}

static int sb_undefined_write(lua_State *L) {
  return luaL_error(L, "assignment to undefined global '%s' (templates must use locals)",
                    luaL_tolstring(L, 2, NULL));
}

/* setmetatable without finalizers.  Lua runs __gc metamethods with debug hooks switched off,
 * so a finalizer would escape the instruction budget (a looping __gc would hang any call, or
 * lua_close).  An object is only marked for finalization if its metatable has __gc when it is
 * set, so checking here is enough.  The rest is lbaselib.c's setmetatable. */
static int sb_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: __gc finalizers are not allowed in templates");
    lua_pop(L, 1);
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
    return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/* Strict globals: reading or creating an undeclared global is an error, which turns the
 * typical typo into a message with file:line instead of a nil far away.  __metatable keeps a
 * template from removing the guard. */
static void sb_strict_globals(lua_State *L) {
  lua_pushglobaltable(L);
  lua_createtable(L, 0, 3);
  lua_pushcfunction(L, sb_undefined_read);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, sb_undefined_write);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

/* Protected: opens the allowed libraries, strips what escapes the sandbox, adds `mmt`. */
static int sb_setup(lua_State *L) {
  for (const luaL_Reg *lib = sb_libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  for (const char *const *name = sb_removed; *name; name++) {
    lua_pushnil(L);
    lua_setglobal(L, *name);
  }
  lua_pushcfunction(L, sb_setmetatable);
  lua_setglobal(L, "setmetatable");
  /* string.dump makes bytecode; nothing can load it here, but no template needs it either. */
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  gen_open_mmt(L, lua_touserdata(L, 1));
  sb_strict_globals(L);
  return 0;
}

mmt_status gen_sb_open(gen_template *t, ut_err *err) {
  t->L = lua_newstate(sb_alloc, &t->sb);
  if (!t->L)
    return ut_fail(err, MMT_ERR_NOMEM, "template '%s': cannot create a Lua state", t->name);
  return gen_sb_pcall(t, sb_setup, t, 0, err);
}

/* Turns a failed call into a status.  The budget flags decide first: a template that ran out
 * of memory or time may have caught the first error and failed differently afterwards. */
static mmt_status sb_error(gen_template *t, int status, ut_err *err) {
  lua_State *L = t->L;
  const char *msg = "(no message)";
  if (lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
  if (t->sb.insn_hit) /* the hook's own message, unless the template replaced it */
    return ut_fail(err, MMT_ERR_TEMPLATE_LIMIT, "template '%s': %s%s", t->name,
                   strstr(msg, SB_INSN_MSG) ? "" : SB_INSN_MSG ": ", msg);
  if (t->sb.mem_hit)
    return ut_fail(err, MMT_ERR_TEMPLATE_LIMIT, "template '%s': memory limit of %u MiB exceeded",
                   t->name, (unsigned)(GEN_MEMORY_LIMIT_BYTES >> 20));
  if (status == LUA_ERRMEM) /* the process, not the template, is out of memory */
    return ut_fail(err, MMT_ERR_NOMEM, "template '%s': out of memory", t->name);
  return ut_fail(err, MMT_ERR_TEMPLATE, "template '%s': %s", t->name, msg);
}

mmt_status gen_sb_pcall(gen_template *t, lua_CFunction fn, void *ctx, int nresults, ut_err *err) {
  lua_State *L = t->L;
  int base = lua_gettop(L);
  if (!lua_checkstack(L, 3 + nresults))
    return ut_fail(err, MMT_ERR_NOMEM, "template '%s': Lua stack overflow", t->name);
  lua_pushcfunction(L, sb_msghandler);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, ctx);
  /* A fresh budget per call: loading, each constraint check and each emit get the full one. */
  t->sb.mem_hit = false;
  t->sb.insn_hit = false;
  gen_sb_rearm(t);
  int status = lua_pcall(L, 1, nresults, base + 1);
  if (status != LUA_OK) {
    mmt_status rc = sb_error(t, status, err);
    lua_settop(L, base);
    return rc;
  }
  lua_remove(L, base + 1); /* the handler; the results stay */
  return MMT_OK;
}

void gen_sb_rearm(gen_template *t) {
  t->sb.count = 0;
  lua_sethook(t->L, sb_hook, LUA_MASKCOUNT, SB_HOOK_PERIOD); /* the period starts again too */
}

void gen_sb_close(gen_template *t) {
  /* No template code runs here: sb_setmetatable keeps templates from leaving finalizers. */
  if (t->L) lua_close(t->L);
  t->L = NULL;
}
