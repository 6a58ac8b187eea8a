/*
 * gen_find.c -- the template search path: $MMTUNE_TEMPLATE_PATH, then the installed
 * share/mmtune/templates next to the executable, then the source tree's templates/.
 *
 * Paths are only ever built from names that passed gen_valid_name, so a name like
 * "../etc/passwd" can never leave the search folders.  Snippets and template libraries are
 * found the same way, in a folder of their own beside the templates.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen_int.h"

#define GEN_MAX_DIRS 64

typedef struct {
  char *env; /* owned copy of $MMTUNE_TEMPLATE_PATH, cut at the colons */
  char installed[PATH_MAX];
  const char *dirs[GEN_MAX_DIRS];
  int n;
} gen_search;

static void search_add(gen_search *s, const char *dir) {
  if (dir[0] && s->n < GEN_MAX_DIRS) s->dirs[s->n++] = dir;
}

/* <dir of /proc/self/exe>/../share/mmtune/templates, or "" when unknown. */
static void installed_dir(char *out, size_t outlen) {
  char exe[PATH_MAX];
  out[0] = '\0';
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = '\0';
  if (snprintf(out, outlen, "%s/../share/mmtune/templates", exe) >= (int)outlen) out[0] = '\0';
}

static mmt_status search_init(gen_search *s, ut_err *err) {
  memset(s, 0, sizeof *s);
  const char *env = getenv("MMTUNE_TEMPLATE_PATH");
  if (env && env[0]) {
    s->env = strdup(env);
    if (!s->env) return ut_fail(err, MMT_ERR_NOMEM, "out of memory reading MMTUNE_TEMPLATE_PATH");
    char *save = NULL;
    for (char *dir = strtok_r(s->env, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
      search_add(s, dir);
  }
  installed_dir(s->installed, sizeof s->installed);
  search_add(s, s->installed);
#ifdef MMT_INSTALL_TEMPLATE_DIR
  /* Where `cmake --install` put them: found by applications linking libmmtune too. */
  search_add(s, MMT_INSTALL_TEMPLATE_DIR);
#endif
#ifdef MMT_SOURCE_TEMPLATE_DIR
  search_add(s, MMT_SOURCE_TEMPLATE_DIR);
#endif
  return MMT_OK;
}

static void search_free(gen_search *s) {
  free(s->env);
  s->env = NULL;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* "a, b, c" for the not-found message. */
static void search_text(const gen_search *s, char *out, size_t outlen) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < s->n && used < outlen; i++) {
    int n = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", s->dirs[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

mmt_status gen_find(const char *name, char *path, size_t pathlen, ut_err *err) {
  if (!gen_valid_name(name, false, GEN_NAME_MAX - 1))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "invalid template name '%.64s': names are 1 to %d characters [A-Za-z0-9_]",
                   name ? name : "(null)", GEN_NAME_MAX - 1);
  gen_search s;
  char candidate[PATH_MAX + GEN_NAME_MAX + 8], dirs[768];
  mmt_status rc = search_init(&s, err);
  if (rc) return rc;
  for (int i = 0; i < s.n; i++) {
    if (snprintf(candidate, sizeof candidate, "%s/%s.lua", s.dirs[i], name) >=
        (int)sizeof candidate)
      continue; /* a folder too long to hold a file we could open */
    if (is_file(candidate)) {
      rc = ut_snprintf(path, pathlen, err, "%s", candidate);
      goto cleanup;
    }
  }
  search_text(&s, dirs, sizeof dirs);
  rc = ut_fail(err, MMT_ERR_NOT_FOUND, "template '%s' not found; searched: %s", name, dirs);
cleanup:
  search_free(&s);
  return rc;
}

mmt_status gen_find_shared(const char *template_path, const gen_shared_kind *kind, const char *name,
                           char *path, size_t pathlen, ut_err *err) {
  if (!gen_valid_name(name, false, GEN_NAME_MAX - 1))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "invalid %s name '%.64s': names are 1 to %d characters [A-Za-z0-9_]", kind->what,
                   name ? name : "(null)", GEN_NAME_MAX - 1);
  gen_search s;
  char own[PATH_MAX], candidate[PATH_MAX + GEN_NAME_MAX + 16], dirs[768];
  mmt_status rc = search_init(&s, err);
  if (rc) return rc;
  /* The template's own folder first: a template shipped with its snippets and libraries
   * finds its copy. */
  const char *slash = template_path ? strrchr(template_path, '/') : NULL;
  own[0] = '\0';
  if (slash && (size_t)(slash - template_path) < sizeof own) {
    memcpy(own, template_path, (size_t)(slash - template_path));
    own[slash - template_path] = '\0';
  } else if (template_path && !slash) {
    strcpy(own, ".");
  }
  for (int i = -1; i < s.n; i++) {
    const char *dir = i < 0 ? own : s.dirs[i];
    if (!dir[0]) continue;
    if (snprintf(candidate, sizeof candidate, "%s/%s/%s%s", dir, kind->dir, name, kind->ext) >=
        (int)sizeof candidate)
      continue;
    if (is_file(candidate)) {
      rc = ut_snprintf(path, pathlen, err, "%s", candidate);
      goto cleanup;
    }
  }
  search_text(&s, dirs, sizeof dirs);
  rc = ut_fail(err, MMT_ERR_NOT_FOUND, "%s '%s' not found in %s/ beside the template or in: %s",
               kind->what, name, kind->dir, dirs);
cleanup:
  search_free(&s);
  return rc;
}

typedef struct {
  char **names;
  int count, cap;
} name_list;

static bool list_has(const name_list *l, const char *name) {
  for (int i = 0; i < l->count; i++)
    if (strcmp(l->names[i], name) == 0) return true;
  return false;
}

static mmt_status list_add(name_list *l, const char *name, ut_err *err) {
  if (list_has(l, name)) return MMT_OK; /* an earlier folder shadows this one */
  if (l->count == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    char **grown = realloc(l->names, (size_t)cap * sizeof *grown);
    if (!grown) return ut_fail(err, MMT_ERR_NOMEM, "out of memory listing templates");
    l->names = grown;
    l->cap = cap;
  }
  if (!(l->names[l->count] = strdup(name)))
    return ut_fail(err, MMT_ERR_NOMEM, "out of memory listing templates");
  l->count++;
  return MMT_OK;
}

/* Adds the template names of one folder; a folder that cannot be read is skipped. */
static mmt_status list_dir(name_list *l, const char *dir, ut_err *err) {
  mmt_status rc = MMT_OK;
  DIR *d = opendir(dir);
  if (!d) return MMT_OK;
  char path[PATH_MAX + 256], stem[256];
  for (struct dirent *e = readdir(d); e && !rc; e = readdir(d)) {
    size_t n = strlen(e->d_name);
    if (n <= 4 || n - 4 >= sizeof stem || strcmp(e->d_name + n - 4, ".lua") != 0) continue;
    memcpy(stem, e->d_name, n - 4);
    stem[n - 4] = '\0';
    if (!gen_valid_name(stem, false, GEN_NAME_MAX - 1)) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || !is_file(path))
      continue;
    rc = list_add(l, stem, err);
  }
  closedir(d);
  return rc;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

mmt_status gen_list(char ***names, int *count, ut_err *err) {
  if (!names || !count) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_list: NULL output");
  *names = NULL;
  *count = 0;
  gen_search s;
  name_list l = {0};
  mmt_status rc = search_init(&s, err);
  if (rc) return rc;
  for (int i = 0; i < s.n && !rc; i++) rc = list_dir(&l, s.dirs[i], err);
  search_free(&s);
  if (rc) {
    gen_names_free(l.names, l.count);
    return rc;
  }
  if (l.count > 0) qsort(l.names, (size_t)l.count, sizeof *l.names, compare_names);
  *names = l.names;
  *count = l.count;
  return MMT_OK;
}

void gen_names_free(char **names, int count) {
  if (!names) return;
  for (int i = 0; i < count; i++) free(names[i]);
  free(names);
}
