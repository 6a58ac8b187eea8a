/* fuzz_common.c -- see fuzz_common.h. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static char g_dir[64];
static char g_paths[8][128];
static int g_npaths;
static char *g_before; /* the destination's bytes */
static size_t g_before_len;

#define FZ_DST_MAX_BYTES (4 << 20) /* remade past this: inputs stay fast */

static void fz_die(const char *what, const char *why) {
  fprintf(stderr, "fuzz check failed: %s: %s\n", what, why);
  abort();
}

const char *fz_path(const char *name) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "%s/mmt_fuzz_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) fz_die("setup", "mkdtemp");
  }
  for (int i = 0; i < g_npaths; i++)
    if (!strcmp(strrchr(g_paths[i], '/') + 1, name)) return g_paths[i];
  if (g_npaths == 8) fz_die("setup", "too many paths");
  snprintf(g_paths[g_npaths], sizeof g_paths[0], "%s/%s", g_dir, name);
  return g_paths[g_npaths++];
}

bool fz_write(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

void fz_remove_db(const char *path) {
  static const char *const sides[] = {"", "-wal", "-shm", "-journal"};
  char p[160];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, sides[i]);
    (void)unlink(p);
  }
}

static void read_before(const char *path) {
  ut_err e;
  free(g_before);
  g_before = NULL;
  if (ut_read_file(path, &g_before, &g_before_len, &e)) fz_die("reading the destination", e.msg);
}

/* A destination with rows of two GPU models and a search time. */
static void make_dst(const char *path) {
  static const char seed[] =
      "{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [\n"
      "{\"device_name\": \"GPU A\", \"device_uuid\": \"GPU-1\", \"cc_major\": 9, \"cc_minor\": 0,"
      " \"sm_count\": 132, \"driver_version\": 13000, \"nvrtc_version\": \"13.0\","
      " \"template_name\": \"reg_tiled\", \"template_hash\": \"0123456789abcdef\","
      " \"params\": \"bm=64,bn=64\", \"dtype\": \"f32\", \"layout\": \"nn\", \"m\": 64, \"n\": 64,"
      " \"k\": 64, \"status\": \"ok\", \"error\": \"\", \"ms_min\": 0.01, \"ms_median\": 0.02,"
      " \"ms_max\": 0.03, \"runs\": 10, \"tflops\": 1.5, \"rel_err\": 1e-7, \"max_err\": null,"
      " \"regs\": 64, \"shared_bytes\": 16384, \"local_bytes\": 0, \"created_at\": 1764000000,"
      " \"tile_m\": 64, \"tile_n\": 64, \"slices\": 1, \"threads\": 256, \"per_sm\": 0}],\n"
      "\"searches\": [{\"device_name\": \"GPU A\", \"dtype\": \"f32\", \"layout\": \"nn\", \"m\": 64,"
      " \"n\": 64, \"k\": 64, \"candidates\": \"nvrtc 13.0\", \"seconds\": 2.5, \"updated_at\":"
      " 1764000000, \"origin\": \"0123456789abcdef\"}]}\n";
  ut_err e;
  fz_remove_db(path);
  if (db_import_json(path, "seed", seed, sizeof seed - 1, NULL, NULL, &e))
    fz_die("making the destination", e.msg);
  read_before(path);
}

const char *fz_dst_path(void) {
  const char *path = fz_path("dst.db");
  if (!g_before || g_before_len > FZ_DST_MAX_BYTES) make_dst(path);
  return path;
}

static void check_db(const char *path, const char *what) {
  db_check_report rep;
  ut_err e;
  if (db_check(path, NULL, &rep, &e)) fz_die(what, e.msg);
}

void fz_dst_after(mmt_status rc, const char *what) {
  const char *path = fz_path("dst.db");
  if (rc == MMT_OK) {
    check_db(path, what);
    read_before(path);
    return;
  }
  char *now = NULL;
  size_t len = 0;
  ut_err e;
  if (ut_read_file(path, &now, &len, &e)) fz_die(what, e.msg);
  if (len != g_before_len || memcmp(now, g_before, len) != 0)
    fz_die(what, "a refused input changed the destination");
  free(now);
}

void fz_fresh_after(const char *path, mmt_status rc, const char *what) {
  if (rc == MMT_OK) check_db(path, what);
  else if (access(path, F_OK) == 0) fz_die(what, "a refused input created the destination");
  fz_remove_db(path);
}
