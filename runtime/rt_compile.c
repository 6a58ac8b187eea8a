/* rt_compile.c -- see rt_compile.h.  NVRTC: create -> compile -> log -> cubin, plus the
 * on-disk cubin cache.  No mutable globals: every call owns its NVRTC program. */
#include "rt_compile.h"

#include <ctype.h>
#include <elf.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* mmtune's fixed NVRTC options besides the architecture. */
static const char *const k_fixed_options[] = {"-std=c++17", "-default-device"};
enum { k_fixed_count = sizeof k_fixed_options / sizeof k_fixed_options[0] };

int rt_compile_fixed_options(const char *const **opts) {
  *opts = k_fixed_options;
  return k_fixed_count;
}

void rt_cubin_free(rt_cubin *c) {
  if (!c) return;
  free(c->data);
  c->data = NULL;
  c->size = 0;
}

static mmt_status nvrtc_fail(ut_err *err, const char *what, nvrtcResult r) {
  mmt_status st = r == NVRTC_ERROR_OUT_OF_MEMORY ? MMT_ERR_NOMEM : MMT_ERR_COMPILE;
  return ut_fail(err, st, "%s: %s", what, nvrtcGetErrorString(r));
}

mmt_status rt_nvrtc_version(char *out, size_t outlen, ut_err *err) {
  int major = 0, minor = 0;
  nvrtcResult r = nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcVersion", r);
  return ut_snprintf(out, outlen, err, "%d.%d", major, minor);
}

/* "sm_" then two or three digits, then an optional 'a' (arch-specific features). */
static mmt_status check_arch(const char *arch, ut_err *err) {
  size_t digits = 0;
  if (!arch || strncmp(arch, "sm_", 3) != 0) goto bad;
  const char *p = arch + 3;
  while (isdigit((unsigned char)p[digits])) digits++;
  if (digits < 2 || digits > 3) goto bad;
  p += digits;
  if (*p == 'a') p++;
  if (*p != '\0') goto bad;
  return MMT_OK;
bad:
  return ut_fail(err, MMT_ERR_INVALID_ARG,
                 "bad GPU architecture '%s' (expected sm_ and digits, e.g. sm_90 or sm_90a)",
                 arch ? arch : "(null)");
}

/* The number of "sm_90a" (90); check_arch must have passed. */
static int arch_number(const char *arch) { return atoi(arch + 3); }

mmt_status rt_kernel_arch(const char *device_arch, const char *kernel_arch, char out[16],
                          ut_err *err) {
  mmt_status rc = check_arch(device_arch, err);
  if (rc) return rc;
  if (!kernel_arch || !*kernel_arch) return ut_snprintf(out, 16, err, "%s", device_arch);
  if ((rc = check_arch(kernel_arch, err))) return rc;
  int dev = arch_number(device_arch), need = arch_number(kernel_arch);
  bool specific = kernel_arch[strlen(kernel_arch) - 1] == 'a';
  if (specific && dev != need)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "the kernel needs %s (compute capability %d.%d exactly); the device is %s",
                   kernel_arch, need / 10, need % 10, device_arch);
  if (!specific && dev < need)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "the kernel needs %s (compute capability %d.%d or newer); the device is %s",
                   kernel_arch, need / 10, need % 10, device_arch);
  return ut_snprintf(out, 16, err, "%s", specific ? kernel_arch : device_arch);
}

/* The architecture option, "--gpu-architecture=sm_90", into out. */
static mmt_status arch_option(const char *arch, char *out, size_t outlen, ut_err *err) {
  mmt_status rc = check_arch(arch, err);
  if (rc) return rc;
  return ut_snprintf(out, outlen, err, "--gpu-architecture=%s", arch);
}

/* The program's log, or NULL when it is empty.  Owned by the caller. */
static mmt_status get_log(nvrtcProgram prog, char **log, ut_err *err) {
  size_t size = 0;
  *log = NULL;
  nvrtcResult r = nvrtcGetProgramLogSize(prog, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetProgramLogSize", r);
  if (size <= 1) return MMT_OK; /* just the NUL */
  char *buf = malloc(size);
  if (!buf) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for a %zu-byte NVRTC log", size);
  r = nvrtcGetProgramLog(prog, buf);
  if (r != NVRTC_SUCCESS) {
    free(buf);
    return nvrtc_fail(err, "nvrtcGetProgramLog", r);
  }
  buf[size - 1] = '\0';
  *log = buf;
  return MMT_OK;
}

/* err = the first log line that mentions "error" ("k.cu(3): error: ..."), or the NVRTC
 * status when there is none. */
static mmt_status compile_fail(ut_err *err, const char *log, nvrtcResult r) {
  const char *line = log;
  while (line && *line) {
    const char *end = strchr(line, '\n');
    int len = end ? (int)(end - line) : (int)strlen(line);
    if (memmem(line, (size_t)len, "error", 5))
      return ut_fail(err, MMT_ERR_COMPILE, "%.*s", len, line);
    line = end ? end + 1 : NULL;
  }
  return nvrtc_fail(err, "nvrtcCompileProgram", r);
}

static mmt_status get_cubin(nvrtcProgram prog, rt_cubin *cubin, ut_err *err) {
  size_t size = 0;
  nvrtcResult r = nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS) return nvrtc_fail(err, "nvrtcGetCUBINSize", r);
  if (size == 0) return ut_fail(err, MMT_ERR_COMPILE, "NVRTC produced an empty cubin");
  void *data = malloc(size);
  if (!data) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for a %zu-byte cubin", size);
  r = nvrtcGetCUBIN(prog, data);
  if (r != NVRTC_SUCCESS) {
    free(data);
    return nvrtc_fail(err, "nvrtcGetCUBIN", r);
  }
  cubin->data = data;
  cubin->size = size;
  return MMT_OK;
}

/* create -> compile -> log (always) -> cubin.  opts[0] is the architecture option. */
static mmt_status compile_with(const char *source, const char *name, const char *const *opts,
                               int nopts, rt_cubin *cubin, char **log, ut_err *err) {
  mmt_status rc = MMT_OK;
  nvrtcProgram prog = NULL;
  char *text = NULL;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    prog = NULL;
    rc = nvrtc_fail(err, "nvrtcCreateProgram", r);
    goto cleanup;
  }
  nvrtcResult cr = nvrtcCompileProgram(prog, nopts, opts);
  if ((rc = get_log(prog, &text, err))) goto cleanup;
  if (cr != NVRTC_SUCCESS) {
    rc = cr == NVRTC_ERROR_COMPILATION ? compile_fail(err, text, cr)
                                       : nvrtc_fail(err, "nvrtcCompileProgram", cr);
    goto cleanup;
  }
  rc = get_cubin(prog, cubin, err);
cleanup:
  if (prog) nvrtcDestroyProgram(&prog);
  if (log) {
    *log = text;
    text = NULL;
  }
  free(text);
  return rc;
}

/* Checks arguments and builds the option list: the architecture option then the fixed ones. */
static mmt_status prepare(const char *source, const char *arch, char archopt[64],
                          const char *opts[k_fixed_count + 1], ut_err *err) {
  if (!source) return ut_fail(err, MMT_ERR_INVALID_ARG, "no CUDA source to compile");
  mmt_status rc = arch_option(arch, archopt, 64, err);
  if (rc) return rc;
  opts[0] = archopt;
  for (int i = 0; i < k_fixed_count; i++) opts[i + 1] = k_fixed_options[i];
  return MMT_OK;
}

mmt_status rt_compile(const char *source, const char *name, const char *arch, rt_cubin *cubin,
                      char **log, ut_err *err) {
  char archopt[64];
  const char *opts[k_fixed_count + 1];
  cubin->data = NULL;
  cubin->size = 0;
  if (log) *log = NULL;
  mmt_status rc = prepare(source, arch, archopt, opts, err);
  if (rc) return rc;
  return compile_with(source, name ? name : "kernel.cu", opts, k_fixed_count + 1, cubin, log, err);
}

/* ---- the disk cache ---------------------------------------------------------------------- */

/* A cached file is used only if it is a whole 64-bit ELF: magic, class, and section and
 * program header tables inside the file (a torn or foreign file is a miss). */
static bool cubin_looks_whole(const void *data, size_t size) {
  const Elf64_Ehdr *h = data;
  if (size < sizeof *h || memcmp(h->e_ident, ELFMAG, SELFMAG) != 0) return false;
  if (h->e_ident[EI_CLASS] != ELFCLASS64) return false;
  if (h->e_shoff > size || (uint64_t)h->e_shnum * h->e_shentsize > size - h->e_shoff) return false;
  if (h->e_phoff > size || (uint64_t)h->e_phnum * h->e_phentsize > size - h->e_phoff) return false;
  return true;
}

/* <cache_dir>/<16 hex>.cubin for hash(source, NUL, options, NUL, NVRTC version). */
static mmt_status cache_path(const char *cache_dir, const char *source, const char *const *opts,
                             int nopts, char *out, size_t outlen, ut_err *err) {
  char version[32], hex[17];
  mmt_status rc = rt_nvrtc_version(version, sizeof version, err);
  if (rc) return rc;
  uint64_t h = ut_hash64(source, strlen(source) + 1);
  for (int i = 0; i < nopts; i++) {
    h = ut_hash64_more(h, opts[i], strlen(opts[i]));
    h = ut_hash64_more(h, " ", 1);
  }
  h = ut_hash64_more(h, "", 1);
  h = ut_hash64_more(h, version, strlen(version));
  ut_hash64_hex(h, hex);
  return ut_snprintf(out, outlen, err, "%s/%s.cubin", cache_dir, hex);
}

/* A hit fills *cubin; anything else (missing, unreadable, torn) is a miss. */
static bool cache_read(const char *path, rt_cubin *cubin) {
  char *data = NULL;
  size_t size = 0;
  if (ut_read_file(path, &data, &size, NULL) != MMT_OK) return false;
  if (!cubin_looks_whole(data, size)) {
    free(data);
    return false;
  }
  cubin->data = data;
  cubin->size = size;
  return true;
}

/* Best effort: a cache that cannot be written only costs a later compile. */
static void cache_write(const char *cache_dir, const char *path, const rt_cubin *cubin) {
  if (ut_mkdir_p(cache_dir, NULL) != MMT_OK) return;
  (void)ut_write_file_atomic(path, cubin->data, cubin->size, NULL);
}

mmt_status rt_compile_cached(const char *cache_dir, const char *source, const char *name,
                             const char *arch, rt_cubin *cubin, bool *hit, char **log,
                             ut_err *err) {
  char archopt[64], path[4096];
  const char *opts[k_fixed_count + 1];
  const int nopts = k_fixed_count + 1;
  cubin->data = NULL;
  cubin->size = 0;
  if (hit) *hit = false;
  if (log) *log = NULL;
  if (!cache_dir || !*cache_dir) return rt_compile(source, name, arch, cubin, log, err);
  mmt_status rc = prepare(source, arch, archopt, opts, err);
  if (rc) return rc;
  if ((rc = cache_path(cache_dir, source, opts, nopts, path, sizeof path, err))) return rc;
  if (cache_read(path, cubin)) {
    if (hit) *hit = true;
    return MMT_OK;
  }
  rc = compile_with(source, name ? name : "kernel.cu", opts, nopts, cubin, log, err);
  if (rc) return rc;
  cache_write(cache_dir, path, cubin);
  return MMT_OK;
}

mmt_status rt_compile_for_device(const char *cache_dir, const char *device_arch,
                                 const char *kernel_arch, const char *source, const char *name,
                                 rt_cubin *cubin, bool *hit, char arch_out[16], ut_err *err) {
  char arch[16];
  mmt_status rc = rt_kernel_arch(device_arch, kernel_arch, arch, err);
  if (!rc) rc = rt_compile_cached(cache_dir, source, name, arch, cubin, hit, NULL, err);
  if (!rc && arch_out) memcpy(arch_out, arch, sizeof arch);
  return rc;
}

/* ---- many compiles at once ---- */

typedef struct {
  const char *cache_dir;
  rt_compile_job *jobs;
  int count;
  atomic_int next; /* the next job to take */
} compile_queue;

static void *compile_worker(void *arg) {
  compile_queue *q = arg;
  for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->count;) {
    rt_compile_job *j = &q->jobs[i];
    j->rc = rt_compile_cached(q->cache_dir, j->source, j->name, j->arch, &j->cubin, NULL, &j->log,
                              &j->err);
  }
  return NULL;
}

void rt_compile_batch(const char *cache_dir, rt_compile_job *jobs, int count, int threads) {
  enum { max_threads = 64 };
  compile_queue q = {.cache_dir = cache_dir, .jobs = jobs, .count = count};
  atomic_init(&q.next, 0);
  if (threads <= 0) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cpus < 1 ? 1 : cpus > max_threads ? max_threads : (int)cpus;
  }
  if (threads > max_threads) threads = max_threads;
  if (threads > count) threads = count;
  pthread_t ids[max_threads];
  int started = 0;
  while (started < threads - 1 && pthread_create(&ids[started], NULL, compile_worker, &q) == 0)
    started++;
  compile_worker(&q); /* the calling thread takes jobs too (all of them if none started) */
  for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
}
