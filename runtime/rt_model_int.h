/*
 * rt_model_int.h -- what rt_model.c (the fit, the predictions) and rt_model_pack.c (the fit as
 * bytes, for the chooser's disk cache) share: the fitted model's layout, and the packed
 * bytes' header.  Private to runtime/ (and its tests).
 */
#ifndef MMT_RT_MODEL_INT_H
#define MMT_RT_MODEL_INT_H

#include "rt_model.h"

typedef struct {
  int64_t m, n, k, id;
  int cfg;  /* its config */
  float lm; /* log M, and below log N and log K: a focus over 10^5 rows takes no logs */
  double ms, y;
  double r; /* y less its template's mean y on the same problem: the config's own merit */
  int layout;
  bool aligned;   /* packed rows of this shape are 16-byte aligned (as the tuner measures) */
  signed char dt; /* its dtype: gen_dtype_index */
  float ln, lk;
  gen_op op; /* an op kernel's row (mmt_matmul's epilogue, batch 1): its op; else op.out "" */
} model_row;

typedef struct {
  char *template_name, *template_hash, *params;
  char dtype[8]; /* its dtype's class (rt_model_dtype_class): rows of f16 and bf16 alike */
  int tmpl;      /* its (template, class) in tmpls */
  db_launch launch; /* its first row's */
  /* per layout, its rows' (a template's grid may depend on the layout: skinny's bodies) */
  db_launch by_layout[GEN_LAYOUTS];
  unsigned layouts; /* bit l: by_layout[l] is known */
  int first, count; /* its rows */
  bool skip;        /* no launch shape: its rows are left out */
  bool overlap;     /* its kernels run an op's epilogue under the next tile's main loop */
  bool overlap_known; /* asked of the templates (at its first op row) */
  int nbins;
  int bins[GEN_MAX_PARAMS]; /* its parameter values: indexes into its template's bins */
  /* focus sums: near rows (own y), and far-reaching ones (own merit r) */
  double sw, swy, swr_w, swr;
  double wmax;
  int64_t basis;
  int used;
} model_cfg;

/* One value of one parameter of a template ("split=4"): the merit of the rows that have it. */
typedef struct {
  char text[40];
  double sw, swr; /* focus sums */
} model_bin;

typedef struct {
  char name[GEN_NAME_MAX];
  char dtype[8];
  double gy; /* mean y over all its rows */
  int gcount;
  double sw, swy, swyy; /* focus sums */
  double wmax;          /* focus: the weight of its nearest row */
  int used;
  model_bin *bins;
  int nbins, bins_cap;
} model_tmpl;

struct rt_model {
  rt_model_device dev;
  model_row *rows;
  int nrows, rows_cap;
  model_cfg *cfgs;
  int ncfgs, cfgs_cap;
  model_tmpl *tmpls;
  int ntmpls, tmpls_cap;
  int *table; /* config key -> index; -1 empty (open addressing, at most half full) */
  size_t table_mask;
  int resolved; /* configs whose launch shape the resolver gave (an emit of today's templates) */
  void *map;    /* rt_model_unpack_map's mapping, which rows point into (not malloc'd) */
  size_t map_len;
};

/* rt_model_pack's bytes start with this (rt_model_pack.c says the rest). */
typedef struct {
  char magic[8];
  uint32_t format, row_size, cfg_size, tmpl_size, bin_size, device_size;
  int32_t nrows, ncfgs, ntmpls, nbins;
  uint64_t strings; /* bytes of the string pool */
  rt_model_device dev;
  uint64_t code; /* code_print(): bytes fitted by other code are not read */
} pack_header;

/* Builds m->table afresh for m's configs (after rt_model_unpack).  Errors: MMT_ERR_NOMEM. */
mmt_status rt_model_index(rt_model *m, ut_err *err);

#endif /* MMT_RT_MODEL_INT_H */
