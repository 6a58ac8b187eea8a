/*
 * rt_dl.h -- opening a shared library at run time and looking up its entry points: the CUDA
 * driver (rt_driver.c) and the tuner's peers, cuBLAS and cuBLASLt (tuner/gpu/vendor_lib.c),
 * are never linked, so that mmtune builds and runs without them.  The callers word the errors.
 */
#ifndef MMT_RT_DL_H
#define MMT_RT_DL_H

/* dlopen (RTLD_NOW | RTLD_LOCAL) of the library named by the environment variable `env` when it
 * is set and not empty, else of the first of names[0..n) found.  Returns the handle, *lib its
 * name; NULL when none opened, *lib then the library asked for (env's, else names[0]) and *why
 * dlopen's reason for it (NULL when dlopen gave none). */
void *rt_dl_open(const char *env, const char *const *names, int n, const char **lib,
                 const char **why);

/* Looks up `name` in handle into the function pointer stored at `field` (NULL when missing).
 * Returns NULL when found, else the reason it is missing. */
const char *rt_dl_symbol(void *handle, const char *name, void *field);

#endif
