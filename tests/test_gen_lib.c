/* test_gen_lib.c -- gen/: what templates share and what they are checked against: template
 * libraries (mmt.lib), the device limits (mmt.device, gen_device_defaults, gen_set_device) and
 * the checks of a config alone, for one dtype and layout (gen_check_for) or any (gen_check). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen.h"

static void make_dir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/mmt_genlib_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void write_text(const char *dir, const char *file, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  assert_int_equal(ut_write_file_atomic(path, text, strlen(text), NULL), MMT_OK);
}

static void rm_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static gen_template *load_ok(const char *path) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load(path, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", path, e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

/* Writes `text` as dir/file (its path into path) and loads it. */
static gen_template *write_and_load(const char *dir, const char *file, const char *text, char *path,
                                    size_t len) {
  write_text(dir, file, text);
  snprintf(path, len, "%s/%s", dir, file);
  return load_ok(path);
}

/* gen_load fails with MMT_ERR_TEMPLATE and a message holding `word`. */
static void load_fails(const char *path, const char *word) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  assert_int_equal(gen_load(path, &t, &e), MMT_ERR_TEMPLATE);
  if (!strstr(e.msg, word)) fprintf(stderr, "'%s' not in: %s\n", word, e.msg);
  assert_non_null(strstr(e.msg, word));
  assert_null(t);
}

/* ---- mmt.lib ----------------------------------------------------------------------------- */

/* A template that takes a library twice (the same table) and uses it in its constraints. */
static const char lib_user[] =
    "local h = mmt.lib(\"helper\")\n"
    "assert(mmt.lib(\"helper\") == h, \"one table per library\")\n"
    "return {name = \"lu\", dtypes = {\"f32\"}, params = {{name = \"x\", values = {1, 2}}},\n"
    "  description = h.word,\n"
    "  constraints = function(p) return h.small(p.x) end,\n"
    "  emit = function() return {source = \"k\", kernel = \"k\", block = {1}, grid = {x = 1}} "
    "end}\n";
static const char helper_lib[] =
    "local M = {word = \"one\"}\n"
    "function M.small(x) if x > 1 then return false, \"x over 1\" end return true end\n"
    "return M\n";

static void test_lib(void **state) {
  (void)state;
  char dir[64], sub[128], path[160], first[17];
  make_dir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/lib", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  write_text(dir, "lu.lua", lib_user);
  write_text(dir, "lib/helper.lua", helper_lib);
  snprintf(path, sizeof path, "%s/lu.lua", dir);
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  gen_template *t = load_ok(path);
  assert_string_equal(gen_description(t), "one");
  gen_config c;
  char why[128];
  bool valid = true;
  ut_err e;
  assert_int_equal(gen_config_parse(t, "x=2", &c, &e), MMT_OK);
  assert_int_equal(gen_check(t, &c, NULL, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "x over 1");
  ut_copy(first, sizeof first, gen_source_hash(t));
  gen_free(t);
  /* the library's text is in the template's hash */
  write_text(dir, "lib/helper.lua", "return {word = \"two\", small = function() return true end}");
  t = load_ok(path);
  assert_string_not_equal(gen_source_hash(t), first);
  gen_free(t);
  write_text(dir, "lib/helper.lua", helper_lib);
  t = load_ok(path);
  assert_string_equal(gen_source_hash(t), first);
  gen_free(t);
  /* a library is Lua of the sandbox: text only, strict globals, its errors name its file */
  write_text(dir, "lib/helper.lua", "local M = {}\nleaked = 1\nreturn M\n");
  load_fails(path, "helper.lua:2:");
  write_text(dir, "lib/helper.lua", "return io.open('/etc/passwd')\n");
  load_fails(path, "undefined global 'io'");
  write_text(dir, "lib/helper.lua", "return {\n");
  load_fails(path, "helper.lua:");
  /* one that takes itself is a cycle; a missing one, a bad name: errors naming them */
  write_text(dir, "lib/helper.lua", "return mmt.lib(\"helper\")\n");
  load_fails(path, "asks for itself");
  write_text(dir, "lu.lua", "local x = mmt.lib(\"nowhere\")\nreturn 1");
  load_fails(path, "lib 'nowhere' not found in lib/");
  write_text(dir, "lu.lua", "local x = mmt.lib(\"../lu\")\nreturn 1");
  load_fails(path, "invalid lib name");
  /* only while loading: the hash could not cover what a later call read */
  write_text(dir, "lib/helper.lua", helper_lib);
  write_text(dir, "lu.lua",
             "return {name = \"lu\", dtypes = {\"f32\"}, params = {{name = \"x\", values = "
             "{1}}},\n  emit = function() mmt.lib(\"helper\") end}\n");
  t = load_ok(path);
  gen_kernel k;
  gen_config_default(t, &c);
  assert_int_equal(gen_emit(t, &c, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "while the template loads"));
  gen_free(t);
  rm_dir(dir);
}

/* A template beside no lib/ folder finds one in a folder of the search path. */
static void test_lib_on_search_path(void **state) {
  (void)state;
  char dir[64], other[64], sub[128], path[160];
  make_dir(dir, sizeof dir);
  make_dir(other, sizeof other);
  snprintf(sub, sizeof sub, "%s/lib", other);
  assert_int_equal(mkdir(sub, 0755), 0);
  write_text(dir, "lu.lua", lib_user);
  write_text(other, "lib/helper.lua", helper_lib);
  snprintf(path, sizeof path, "%s/lu.lua", dir);
  setenv("MMTUNE_TEMPLATE_PATH", other, 1);
  gen_template *t = load_ok(path);
  assert_string_equal(gen_description(t), "one");
  gen_free(t);
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  rm_dir(dir);
  rm_dir(other);
}

/* ---- mmt.device -------------------------------------------------------------------------- */

static void test_device_defaults(void **state) {
  (void)state;
  gen_device d;
  ut_err e;
  assert_int_equal(gen_device_defaults(NULL, &d, &e), MMT_OK); /* GEN_DEFAULT_ARCH */
  assert_int_equal(d.cc, 90);
  assert_int_equal(d.sm_count, 132);
  assert_int_equal(d.max_shared, 227 * 1024);
  assert_int_equal(d.sm_shared, 228 * 1024);
  assert_int_equal(d.max_shared_static, 48 * 1024);
  assert_int_equal(d.max_grid[0], INT_MAX);
  assert_int_equal(d.max_grid[1], 65535);
  assert_int_equal(gen_device_defaults("sm_90a", &d, &e), MMT_OK);
  assert_int_equal(d.cc, 90);
  assert_int_equal(gen_device_defaults("sm_80", &d, &e), MMT_OK);
  assert_int_equal(d.sm_count, 108);
  assert_int_equal(d.max_shared, 163 * 1024);
  assert_int_equal(gen_device_defaults("sm_86", &d, &e), MMT_OK);
  assert_int_equal(d.max_shared, 99 * 1024);
  assert_int_equal(d.max_threads_sm, 1536);
  /* an architecture not in the table takes the newest before it, with its own cc */
  assert_int_equal(gen_device_defaults("sm_87", &d, &e), MMT_OK);
  assert_int_equal(d.cc, 87);
  assert_int_equal(d.max_shared, 99 * 1024);
  assert_int_equal(gen_device_defaults("sm_100f", &d, &e), MMT_OK);
  assert_int_equal(d.cc, 100);
  assert_int_equal(gen_device_defaults("sm_60", &d, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "sm_60"));
  assert_int_equal(gen_device_defaults("compute_90", &d, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_device_defaults("sm_9", &d, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_device_defaults("sm_90ab", &d, &e), MMT_ERR_INVALID_ARG);
}

/* Constraints that read the device: valid when x blocks of 90 KiB fit max_shared. */
static const char device_user[] =
    "return {name = \"du\", dtypes = {\"f32\"}, params = {{name = \"x\", values = {1, 2}}},\n"
    "  constraints = function(p)\n"
    "    if p.x * 90 * 1024 > mmt.device.max_shared then return false, 'too big' end\n"
    "    return true end,\n"
    "  emit = function() return {source = \"k\" .. mmt.device.sm_count, kernel = \"k\",\n"
    "                            block = {1}, grid = {x = 1}} end}\n";

static bool valid_x(gen_template *t, const char *text) {
  gen_config c;
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_config_parse(t, text, &c, &e), MMT_OK);
  assert_int_equal(gen_check(t, &c, NULL, &valid, NULL, 0, &e), MMT_OK);
  return valid;
}

static void test_device_table(void **state) {
  (void)state;
  char dir[64], path[160];
  make_dir(dir, sizeof dir);
  gen_template *t = write_and_load(dir, "du.lua", device_user, path, sizeof path);
  assert_int_equal(gen_device_of(t)->cc, 90);
  assert_true(valid_x(t, "x=2")); /* 180 KiB within sm_90's 227 */
  gen_device d;
  ut_err e;
  assert_int_equal(gen_device_defaults("sm_86", &d, &e), MMT_OK);
  d.sm_count = 7;
  assert_int_equal(gen_set_device(t, &d, &e), MMT_OK);
  assert_false(valid_x(t, "x=2")); /* not within 99 */
  assert_true(valid_x(t, "x=1"));
  gen_config c;
  gen_kernel k;
  gen_config_default(t, &c);
  assert_int_equal(gen_emit(t, &c, "f32", "nn", &k, &e), MMT_OK);
  assert_string_equal(k.source, "k7");
  gen_kernel_clear(&k);
  d.sm_count = 0;
  assert_int_equal(gen_set_device(t, &d, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_set_device(NULL, &d, &e), MMT_ERR_INVALID_ARG);
  gen_free(t);
  /* read-only, no unknown fields, not read while loading (a value kept then goes stale) */
  write_text(dir, "du.lua",
             "return {name = \"du\", dtypes = {\"f32\"}, params = {{name = \"x\", values = "
             "{1}}},\n  emit = function() mmt.device.sm_count = 1 end}\n");
  t = load_ok(path);
  gen_config_default(t, &c);
  assert_int_equal(gen_emit(t, &c, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "mmt.device is read-only"));
  gen_free(t);
  write_text(dir, "du.lua",
             "return {name = \"du\", dtypes = {\"f32\"}, params = {{name = \"x\", values = "
             "{1}}},\n  emit = function() return mmt.device.sm_cnt end}\n");
  t = load_ok(path);
  assert_int_equal(gen_emit(t, &c, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "mmt.device has no field 'sm_cnt'"));
  gen_free(t);
  write_text(dir, "du.lua", "local n = mmt.device.sm_count\nreturn 1");
  load_fails(path, "not while the template loads");
  rm_dir(dir);
}

/* ---- checks for a dtype and layout ------------------------------------------------------- */

/* x = 2 runs in f16 only, x = 3 in layout nt only, x = 4 nowhere (two reasons); the
 * constraints see the problem's dtype and layout with a problem. */
static const char target_user[] =
    "return {name = \"tu\", dtypes = {\"f32\", \"f16\"}, layouts = {\"nn\", \"nt\"},\n"
    "  params = {{name = \"x\", values = {1, 2, 3, 4}}},\n"
    "  constraints = function(p, prob, dtype, layout)\n"
    "    if prob then assert(prob.dtype == dtype and prob.layout == layout) end\n"
    "    if p.x == 2 and dtype ~= 'f16' then return false, 'x=2: f16 only' end\n"
    "    if p.x == 3 and layout ~= 'nt' then return false, 'x=3: nt only' end\n"
    "    if p.x == 4 then return false, 'x=4 in ' .. dtype end\n"
    "    return true end,\n"
    "  emit = function() return {source = \"k\", kernel = \"k\", block = {1}, grid = {x = 1}} "
    "end}\n";

static bool valid_for(gen_template *t, const char *text, const char *dtype, const char *layout,
                      char *why, size_t whylen) {
  gen_config c;
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_config_parse(t, text, &c, &e), MMT_OK);
  if (!dtype) {
    assert_int_equal(gen_check(t, &c, NULL, &valid, why, whylen, &e), MMT_OK);
  } else {
    assert_int_equal(gen_check_for(t, &c, dtype, layout, &valid, why, whylen, &e), MMT_OK);
  }
  return valid;
}

static void test_check_for(void **state) {
  (void)state;
  char dir[64], path[160], why[256];
  make_dir(dir, sizeof dir);
  gen_template *t = write_and_load(dir, "tu.lua", target_user, path, sizeof path);
  /* without a dtype and layout: valid for at least one pair */
  assert_true(valid_for(t, "x=2", NULL, NULL, why, sizeof why));
  assert_true(valid_for(t, "x=3", NULL, NULL, why, sizeof why));
  assert_false(valid_for(t, "x=4", NULL, NULL, why, sizeof why));
  assert_string_equal(why, "x=4 in f32 (f16 nn: x=4 in f16)");
  /* for one pair */
  assert_true(valid_for(t, "x=2", "f16", "nn", why, sizeof why));
  assert_false(valid_for(t, "x=2", "f32", "nt", why, sizeof why));
  assert_string_equal(why, "x=2: f16 only");
  assert_true(valid_for(t, "x=3", "f32", "nt", why, sizeof why));
  assert_false(valid_for(t, "x=3", "f16", "nn", why, sizeof why));
  assert_false(valid_for(t, "x=1", "bf16", "nn", why, sizeof why));
  assert_string_equal(why, "dtype bf16 not supported");
  assert_false(valid_for(t, "x=1", "f32", "tt", why, sizeof why));
  assert_string_equal(why, "layout tt not supported");
  /* with a problem, the constraints get its dtype and layout */
  gen_config c;
  bool valid = false;
  ut_err e;
  gen_problem p = gen_packed_problem("f16", "nt", 64, 64, 64);
  assert_int_equal(gen_config_parse(t, "x=2", &c, &e), MMT_OK);
  assert_int_equal(gen_check(t, &c, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_true(valid);
  p = gen_packed_problem("f32", "nn", 64, 64, 64);
  assert_int_equal(gen_check(t, &c, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_int_equal(gen_check_for(t, &c, "f32", "nn", NULL, NULL, 0, &e), MMT_ERR_INVALID_ARG);
  gen_free(t);
  rm_dir(dir);
}

/* Constraints whose answer depends on some parameters, read in an order that depends on the
 * values read before, through pairs(p) and after assigning to one: what gen_check_for and
 * gen_check answer on a config alone (from the decision trees once they know) is what the
 * function returns, every time. */
static const char tree_user[] =
    "return {name = \"tr\", dtypes = {\"f32\", \"f16\"}, layouts = {\"nn\", \"tt\"},\n"
    "  params = {{name = \"a\", values = {1, 2, 3}}, {name = \"b\", values = {1, 2}},\n"
    "            {name = \"c\", values = {1, 2, 3, 4}}},\n"
    "  default = {a = 3},\n"
    "  constraints = function(p, prob, dtype, layout)\n"
    "    if p.a == 1 then return false, 'a=1' end\n"
    "    if dtype == 'f16' and p.c > 2 then return false, 'c in f16' end\n"
    "    if p.b == 2 and layout == 'tt' then\n"
    "      local sum = 0\n"
    "      for _, v in pairs(p) do sum = sum + v end\n"
    "      return sum % 2 == 0, 'odd'\n"
    "    end\n"
    "    p.c = p.c + 10\n"
    "    return p.c > 12 or p.a == 3, 'small c'\n"
    "  end,\n"
    "  emit = function() return {source = \"k\", kernel = \"k\", block = {1}, grid = {x = 1}} "
    "end}\n";

/* tree_user's constraints, in C. */
static bool tree_expect(int a, int b, int c, const char *dtype, const char *layout) {
  if (a == 1) return false;
  if (strcmp(dtype, "f16") == 0 && c > 2) return false;
  if (b == 2 && strcmp(layout, "tt") == 0) return (a + b + c) % 2 == 0;
  return c + 10 > 12 || a == 3;
}

static void test_decision_trees(void **state) {
  (void)state;
  char dir[64], path[160];
  make_dir(dir, sizeof dir);
  gen_template *t = write_and_load(dir, "tr.lua", tree_user, path, sizeof path);
  static const char *const pairs[][2] = {
      {"f32", "nn"}, {"f32", "tt"}, {"f16", "nn"}, {"f16", "tt"}};
  for (int round = 0; round < 2; round++) /* the second from what the first kept */
    for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
      gen_config c;
      ut_err e;
      bool valid = false, any = false;
      gen_config_at(t, idx, &c);
      for (int k = 0; k < 4; k++) {
        const bool want =
            tree_expect((int)c.v[0], (int)c.v[1], (int)c.v[2], pairs[k][0], pairs[k][1]);
        assert_int_equal(gen_check_for(t, &c, pairs[k][0], pairs[k][1], &valid, NULL, 0, &e),
                         MMT_OK);
        assert_int_equal(valid, want);
        any = any || want;
      }
      assert_int_equal(gen_check(t, &c, NULL, &valid, NULL, 0, &e), MMT_OK);
      assert_int_equal(valid, any);
    }
  gen_free(t);
  rm_dir(dir);
}

int main(void) {
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lib),
      cmocka_unit_test(test_lib_on_search_path),
      cmocka_unit_test(test_device_defaults),
      cmocka_unit_test(test_device_table),
      cmocka_unit_test(test_check_for),
      cmocka_unit_test(test_decision_trees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
