/* rt_dl.c -- see rt_dl.h. */
#include "rt_dl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void *rt_dl_open(const char *env, const char *const *names, int n, const char **lib,
                 const char **why) {
  const char *chosen = getenv(env);
  void *handle = NULL;
  *why = NULL;
  if (chosen && *chosen) {
    if (!(handle = dlopen(chosen, RTLD_NOW | RTLD_LOCAL))) *why = dlerror();
  } else {
    chosen = names[0];
    for (int i = 0; i < n && !handle; i++) {
      if ((handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
        chosen = names[i];
      else if (i == 0)
        *why = dlerror(); /* the message tells of the library we want */
    }
  }
  *lib = chosen;
  return handle;
}

const char *rt_dl_symbol(void *handle, const char *name, void *field) {
  dlerror();
  void *sym = dlsym(handle, name);
  /* POSIX guarantees that dlsym's result converts to a function pointer. */
  memcpy(field, &sym, sizeof sym);
  if (sym) return NULL;
  const char *why = dlerror();
  return why ? why : "symbol is NULL";
}
