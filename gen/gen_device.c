/*
 * gen_device.c -- the device limits templates read as mmt.device: the defaults of each
 * architecture, and the read-only table constraints and emit see.
 *
 * A template checks its configs against the GPU they will run on (shared memory, SM count,
 * grid limits); mmtune knows that GPU when it tunes or dispatches on it (the runtime reads
 * the limits from the driver), and only its architecture when it compiles ahead (`mmtune
 * compile --arch`).  The table below answers the second case.
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

#define KIB 1024

/* Each architecture's limits, from the NVIDIA CUDA C++ Programming Guide's "Technical
 * Specifications per Compute Capability" (shared memory per SM and per block with opt-in, the
 * 48 KiB without it, the 1 KiB the system reserves per block from 8.0 on, registers and
 * threads per SM, grid size), and the SM count of the part named, from NVIDIA's data sheet.
 * An architecture not listed takes the row of the newest one before it. */
static const struct {
  const char *part; /* the GPU whose SM count the row holds */
  gen_device limits;
} arch_rows[] = {
    {"V100 SXM2", {70, 80, 96 * KIB, 48 * KIB, 96 * KIB, 0, 65536, 2048, {INT_MAX, 65535, 65535}}},
    {"T4", {75, 40, 64 * KIB, 48 * KIB, 64 * KIB, 0, 65536, 1024, {INT_MAX, 65535, 65535}}},
    {"A100", {80, 108, 163 * KIB, 48 * KIB, 164 * KIB, KIB, 65536, 2048, {INT_MAX, 65535, 65535}}},
    {"A10", {86, 72, 99 * KIB, 48 * KIB, 100 * KIB, KIB, 65536, 1536, {INT_MAX, 65535, 65535}}},
    {"L40S", {89, 142, 99 * KIB, 48 * KIB, 100 * KIB, KIB, 65536, 1536, {INT_MAX, 65535, 65535}}},
    {"H100 SXM",
     {90, 132, 227 * KIB, 48 * KIB, 228 * KIB, KIB, 65536, 2048, {INT_MAX, 65535, 65535}}},
    {"B200", {100, 148, 227 * KIB, 48 * KIB, 228 * KIB, KIB, 65536, 2048, {INT_MAX, 65535, 65535}}},
    {"RTX 5090",
     {120, 170, 99 * KIB, 48 * KIB, 100 * KIB, KIB, 65536, 1536, {INT_MAX, 65535, 65535}}},
};
#define ARCH_ROWS ((int)(sizeof arch_rows / sizeof arch_rows[0]))

mmt_status gen_device_defaults(const char *arch, gen_device *out, ut_err *err) {
  const char *a = arch ? arch : GEN_DEFAULT_ARCH;
  size_t digits = strncmp(a, "sm_", 3) == 0 ? strspn(a + 3, "0123456789") : 0;
  /* sm_90, sm_90a, sm_100f: the digits are the compute capability */
  if (digits < 2 || digits > 3 || strlen(a + 3 + digits) > 1)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "'%.32s' is not an architecture like sm_90", a);
  const int cc = atoi(a + 3);
  int row = -1;
  for (int i = 0; i < ARCH_ROWS; i++)
    if (arch_rows[i].limits.cc <= cc) row = i;
  if (row < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "no device limits known for %.32s (sm_%d and newer)",
                   a, arch_rows[0].limits.cc);
  *out = arch_rows[row].limits;
  out->cc = cc;
  return MMT_OK;
}

mmt_status gen_set_device(gen_template *t, const gen_device *dev, ut_err *err) {
  if (!t || !dev) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_set_device: NULL argument");
  bool ok = dev->cc >= 10 && dev->sm_count >= 1 && dev->max_shared_static >= 1 &&
            dev->max_shared >= dev->max_shared_static && dev->sm_shared >= 1 &&
            dev->reserved_shared >= 0 && dev->regs_per_sm >= 1 && dev->max_threads_sm >= 1;
  for (int i = 0; i < 3; i++) ok = ok && dev->max_grid[i] >= 1;
  if (!ok)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "gen_set_device: limits out of range for template '%s' (cc %d, %d SMs)", t->name,
                   dev->cc, dev->sm_count);
  t->device = *dev;
  gen_memo_clear(t); /* the constraints' answers were the old device's */
  return MMT_OK;
}

const gen_device *gen_device_of(const gen_template *t) { return &t->device; }

/* The fields of mmt.device, by name. */
static const struct {
  const char *key;
  size_t offset;
} device_fields[] = {
    {"cc", offsetof(gen_device, cc)},
    {"sm_count", offsetof(gen_device, sm_count)},
    {"max_shared", offsetof(gen_device, max_shared)},
    {"max_shared_static", offsetof(gen_device, max_shared_static)},
    {"sm_shared", offsetof(gen_device, sm_shared)},
    {"reserved_shared", offsetof(gen_device, reserved_shared)},
    {"regs_per_sm", offsetof(gen_device, regs_per_sm)},
    {"max_threads_sm", offsetof(gen_device, max_threads_sm)},
    {"max_grid_x", offsetof(gen_device, max_grid[0])},
    {"max_grid_y", offsetof(gen_device, max_grid[1])},
    {"max_grid_z", offsetof(gen_device, max_grid[2])},
};

/* mmt.device[key]: the template's device's limit, read when asked, so that gen_set_device
 * after loading is seen by every later constraints and emit call.  Not while the file loads:
 * a value kept from then would go stale.  An unknown key is an error (like a global). */
static int device_index(lua_State *L) {
  gen_template *t = lua_touserdata(L, lua_upvalueindex(1));
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  if (t->loading)
    return luaL_error(L,
                      "mmt.device.%s: read it in constraints or emit, not while the template "
                      "loads (the device is set after loading)",
                      key);
  for (size_t i = 0; i < sizeof device_fields / sizeof device_fields[0]; i++)
    if (strcmp(key, device_fields[i].key) == 0) {
      int v;
      memcpy(&v, (const char *)&t->device + device_fields[i].offset, sizeof v);
      lua_pushinteger(L, v);
      return 1;
    }
  return luaL_error(L,
                    "mmt.device has no field '%s' (cc, sm_count, max_shared, "
                    "max_shared_static, sm_shared, reserved_shared, regs_per_sm, "
                    "max_threads_sm, max_grid_x, max_grid_y, max_grid_z)",
                    key);
}

static int device_newindex(lua_State *L) { return luaL_error(L, "mmt.device is read-only"); }

void gen_push_device(lua_State *L, gen_template *t) {
  lua_newtable(L); /* empty: every read goes through __index */
  lua_createtable(L, 0, 3);
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, device_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, device_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
}
