/* bl_pool.c -- see bl.h: host copies split over a few threads (one thread's memcpy does not
 * reach the bandwidth of the host's memory).  The helpers sleep on a condition variable
 * between copies; a copy is cut into parts (bl_split) that the helpers and the calling thread
 * take one at a time, so a helper that wakes late only takes fewer parts. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "bl.h"

/* One 2D copy, cut into `parts` parts. */
typedef struct {
  void *dst;
  const void *src;
  size_t dst_pitch, src_pitch, width, total, parts;
} pool_copy;

struct bl_pool {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a copy was posted, or stop */
  pthread_cond_t done; /* the last part of the copy finished */
  pthread_t *helpers;
  int started;
  bool stop;
  unsigned long posted; /* copies posted: a helper works when this moved since it last saw */
  pool_copy copy;       /* the current one: written under lock when none of it is left */
  size_t next, finished; /* its parts taken, and finished */
};

/* Takes and copies parts of the current copy until none is left.  Called, and returns, with
 * pool->lock held. */
static void work(bl_pool *pool) {
  while (pool->next < pool->copy.parts) {
    pool_copy c = pool->copy;
    size_t begin, end;
    bl_split(c.total, c.parts, pool->next++, &begin, &end);
    pthread_mutex_unlock(&pool->lock);
    bl_copy_range(c.dst, c.dst_pitch, c.src, c.src_pitch, c.width, begin, end);
    pthread_mutex_lock(&pool->lock);
    if (++pool->finished == c.parts) pthread_cond_signal(&pool->done);
  }
}

static void *helper(void *arg) {
  bl_pool *pool = arg;
  unsigned long seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->stop && pool->posted == seen) pthread_cond_wait(&pool->wake, &pool->lock);
    if (pool->stop) break;
    seen = pool->posted;
    work(pool);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

bl_pool *bl_pool_create(int threads) {
  bl_pool *pool = calloc(1, sizeof *pool);
  int want = threads > 1 ? threads - 1 : 0, inited = 0;
  if (!pool) return NULL;
  if (want && !(pool->helpers = calloc((size_t)want, sizeof *pool->helpers))) goto fail;
  if (pthread_mutex_init(&pool->lock, NULL)) goto fail;
  inited++;
  if (pthread_cond_init(&pool->wake, NULL)) goto fail;
  inited++;
  if (pthread_cond_init(&pool->done, NULL)) goto fail;
  /* The helpers start with every signal blocked: the program's handlers run in its own
   * threads only. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  while (pool->started < want &&
         pthread_create(&pool->helpers[pool->started], NULL, helper, pool) == 0)
    pool->started++;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return pool;
fail:
  if (inited > 1) pthread_cond_destroy(&pool->wake);
  if (inited > 0) pthread_mutex_destroy(&pool->lock);
  free(pool->helpers);
  free(pool);
  return NULL;
}

void bl_pool_destroy(bl_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  pool->stop = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 0; i < pool->started; i++) pthread_join(pool->helpers[i], NULL);
  pthread_cond_destroy(&pool->done);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->lock);
  free(pool->helpers);
  free(pool);
}

int bl_pool_threads(const bl_pool *pool) { return pool ? pool->started + 1 : 1; }

void bl_pool_copy(bl_pool *pool, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                  size_t width, size_t lines) {
  size_t total = width * lines, parts = total / BL_POOL_MIN_PART;
  if (parts > (size_t)bl_pool_threads(pool)) parts = (size_t)bl_pool_threads(pool);
  if (parts < 2) {
    bl_copy_range(dst, dst_pitch, src, src_pitch, width, 0, total);
    return;
  }
  pthread_mutex_lock(&pool->lock);
  pool->copy = (pool_copy){dst, src, dst_pitch, src_pitch, width, total, parts};
  pool->next = pool->finished = 0;
  pool->posted++;
  pthread_cond_broadcast(&pool->wake);
  work(pool);
  while (pool->finished < parts) pthread_cond_wait(&pool->done, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
}
