/* gpu/pool.c -- see gpu/pool.h.  Jobs live in a growing array indexed by submission order;
 * workers claim the lowest unclaimed job, the consumer waits on the lowest unreturned one. */
#include "gpu/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *source, *name;
  char kernel_arch[16]; /* the kernel's own ("" none): rt_kernel_arch picks the target */
  void *tag;
  bool done;
  tn_pool_result result;
} pool_job;

struct tn_pool {
  pthread_mutex_t lock;
  pthread_cond_t job_ready;  /* a job was submitted, or stopping */
  pthread_cond_t job_done;   /* a job finished */
  pool_job *jobs;
  int job_cap, job_count;
  int next_claim;  /* first job no worker has taken */
  int next_return; /* first job not handed back */
  bool stopping;
  char arch[16];
  char *cache_dir;
  pthread_t *threads;
  int thread_count;
};

static void compile_job(tn_pool *p, pool_job *job, tn_pool_result *res) {
  ut_err err = {{0}};
  bool hit = false;
  double t0 = ut_now_seconds();
  memset(res, 0, sizeof *res);
  res->tag = job->tag;
  res->rc = rt_compile_for_device(p->cache_dir, p->arch, job->kernel_arch, job->source, job->name,
                                  &res->cubin, &hit, NULL, &err);
  res->seconds = ut_now_seconds() - t0;
  res->cache_hit = hit;
  if (res->rc != MMT_OK) {
    /* Keep the first line: the full log would flood the table. */
    size_t n = strcspn(err.msg, "\n");
    if (n >= sizeof res->error) n = sizeof res->error - 1;
    memcpy(res->error, err.msg, n);
    res->error[n] = '\0';
  }
}

static void *worker_main(void *arg) {
  tn_pool *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stopping && p->next_claim >= p->job_count) pthread_cond_wait(&p->job_ready, &p->lock);
    if (p->stopping) break;
    int idx = p->next_claim++;
    pool_job job = p->jobs[idx]; /* the array may move while we compile: work on a copy */
    pthread_mutex_unlock(&p->lock);
    tn_pool_result res;
    compile_job(p, &job, &res);
    pthread_mutex_lock(&p->lock);
    p->jobs[idx].result = res;
    p->jobs[idx].done = true;
    free(p->jobs[idx].source);
    p->jobs[idx].source = NULL;
    pthread_cond_broadcast(&p->job_done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

mmt_status tn_pool_start(int threads, const char *arch, const char *cache_dir, tn_pool **out,
                         ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  if (threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  tn_pool *p = calloc(1, sizeof *p);
  if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of memory starting the compile pool");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->job_ready, NULL);
  pthread_cond_init(&p->job_done, NULL);
  if ((rc = ut_snprintf(p->arch, sizeof p->arch, err, "%s", arch))) goto cleanup;
  p->cache_dir = ut_strdup(cache_dir);
  p->threads = calloc((size_t)threads, sizeof *p->threads);
  if ((cache_dir && !p->cache_dir) || !p->threads) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory starting the compile pool");
    goto cleanup;
  }
  for (; p->thread_count < threads; p->thread_count++) {
    if (pthread_create(&p->threads[p->thread_count], NULL, worker_main, p) != 0) {
      if (p->thread_count > 0) break; /* fewer threads still work */
      rc = ut_fail(err, MMT_ERR_NOMEM, "cannot start a compile thread");
      goto cleanup;
    }
  }
  *out = p;
  p = NULL;
cleanup:
  tn_pool_free(p);
  return rc;
}

mmt_status tn_pool_submit(tn_pool *p, const char *source, const char *name,
                          const char *kernel_arch, void *tag, ut_err *err) {
  if (kernel_arch && strlen(kernel_arch) >= sizeof p->jobs[0].kernel_arch)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bad GPU architecture '%s'", kernel_arch);
  char *src = strdup(source), *nm = strdup(name);
  if (!src || !nm) goto nomem;
  pthread_mutex_lock(&p->lock);
  if (p->job_count == p->job_cap) {
    int cap = p->job_cap ? p->job_cap * 2 : 64;
    pool_job *jobs = realloc(p->jobs, (size_t)cap * sizeof *jobs);
    if (!jobs) {
      pthread_mutex_unlock(&p->lock);
      goto nomem;
    }
    p->jobs = jobs;
    p->job_cap = cap;
  }
  pool_job *job = &p->jobs[p->job_count++];
  *job = (pool_job){.source = src, .name = nm, .tag = tag};
  snprintf(job->kernel_arch, sizeof job->kernel_arch, "%s", kernel_arch ? kernel_arch : "");
  pthread_cond_signal(&p->job_ready);
  pthread_mutex_unlock(&p->lock);
  return MMT_OK;
nomem:
  free(src);
  free(nm);
  return ut_fail(err, MMT_ERR_NOMEM, "out of memory queueing a compile");
}

bool tn_pool_next(tn_pool *p, tn_pool_result *out) {
  pthread_mutex_lock(&p->lock);
  if (p->next_return >= p->job_count) {
    pthread_mutex_unlock(&p->lock);
    return false;
  }
  pool_job *job;
  while (!(job = &p->jobs[p->next_return])->done) pthread_cond_wait(&p->job_done, &p->lock);
  *out = job->result;
  memset(&job->result, 0, sizeof job->result); /* the cubin now belongs to the caller */
  free(job->name);
  job->name = NULL;
  p->next_return++;
  pthread_mutex_unlock(&p->lock);
  return true;
}

int tn_pool_pending(tn_pool *p) {
  pthread_mutex_lock(&p->lock);
  int n = p->job_count - p->next_return;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void tn_pool_free(tn_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_cond_broadcast(&p->job_ready);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->thread_count; i++) pthread_join(p->threads[i], NULL);
  for (int i = 0; i < p->job_count; i++) {
    free(p->jobs[i].source);
    free(p->jobs[i].name);
    rt_cubin_free(&p->jobs[i].result.cubin);
  }
  free(p->jobs);
  free(p->threads);
  free(p->cache_dir);
  pthread_cond_destroy(&p->job_ready);
  pthread_cond_destroy(&p->job_done);
  pthread_mutex_destroy(&p->lock);
  free(p);
}
