/*
 * cli/emit.c -- `mmtune emit TEMPLATE [NAME=VALUE ...]`: the CUDA C of one config, alone on
 * stdout, and with --info its launch description.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/opts.h"
#include "gen.h"

static const tn_opt emit_opts[] = {
    {"dtype", 0, "DTYPE", "element type (default f32)"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"info", 'i', NULL, "append the launch description to stdout as a trailing /* comment */"},
    {"epilogue", 'e', "OP",
     "the op kernel of this epilogue, e.g. out=f32,bias=col,act=silu (docs/library.md)"},
};
static const tn_cmd_spec emit_spec = {
    "emit", "TEMPLATE [NAME=VALUE ...] [--dtype DTYPE] [--layout LAYOUT] [--epilogue OP] [--info]",
    "Prints the CUDA C of one config of TEMPLATE on stdout and nothing else, so\n"
    "'mmtune emit smem_tiled > k.cu' gives a file that compiles on its own.  The config is the\n"
    "template's default with the NAME=VALUE overrides (see mmtune templates for the\n"
    "parameters).  --info appends the kernel name, block, grid rule, shared memory and\n"
    "requirements as a comment block after the source.  --epilogue emits the op kernel of an\n"
    "epilogue (fields: out=f32|f16|bf16|e4m3|e5m2, bias=col|row, bias_type=f32,\n"
    "scale=row|col|row+col|tensor|block, act=relu|gelu_tanh|gelu_erf|silu, gated, fast_accum,\n"
    "mixed, group=contiguous|masked, residual) for a template that has epilogues; the FP8\n"
    "dtypes (e4m3, e5m2: wgmma and skinny_mma, layout nt) have op kernels only, mixed makes B\n"
    "the other FP8 type than the dtype, A's, an FP8 out= (after FP8 inputs) stores D scaled\n"
    "and saturated, with its amax, group= emits a grouped (mixture-of-experts) kernel, whose\n"
    "tile rows are its experts' (mma_sync, reg_tiled, wgmma; skinny and skinny_mma on side\n"
    "0), and residual (beta != 0) emits the kernel that reads C (its name ends _r).",
    emit_opts, 4};

static void print_launch_info(const gen_template *t, const char *params, const gen_kernel *k) {
  printf("\n/* mmtune emit %s %s\n", gen_name(t), params);
  printf(" *   kernel:       %s\n", k->kernel_name);
  printf(" *   block:        %u x %u x %u\n", k->block[0], k->block[1], k->block[2]);
  printf(" *   grid:        ");
  for (int i = 0; i < 3; i++) {
    const gen_grid_dim *g = &k->grid[i];
    printf("%s", i ? " x " : " ");
    if (g->dim == 'S')
      printf("%lld per SM", (long long)g->tile);
    else if (g->dim)
      printf("ceil(%c/%lld)", g->dim, (long long)g->tile);
    else
      printf("%lld", (long long)g->tile);
  }
  printf("\n *   shared bytes: %u (dynamic)\n *   requires:    ", k->shared_bytes);
  const gen_requires *r = &k->requires;
  if (r->m_multiple > 1) printf(" M %% %lld == 0,", (long long)r->m_multiple);
  if (r->n_multiple > 1) printf(" N %% %lld == 0,", (long long)r->n_multiple);
  if (r->k_multiple > 1) printf(" K %% %lld == 0,", (long long)r->k_multiple);
  printf(" %d-byte aligned A, B, C and rows\n */\n", r->align_bytes);
}

/* Default config of t with the NAME=VALUE overrides of pos[0..n-1]; exit 2 when it is not
 * valid for dtype and layout. */
static int emit_config(gen_template *t, char **pos, int n, const char *dtype, const char *layout,
                       const gen_op *op, gen_config *cfg) {
  char text[2048] = "";
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    int w = snprintf(text + used, sizeof text - used, "%s%s", i ? "," : "", pos[i]);
    if (w < 0 || (size_t)w >= sizeof text - used)
      return tn_usage_error("emit", "overrides too long");
    used += (size_t)w;
  }
  ut_err e;
  gen_config_default(t, cfg);
  if (n > 0 && gen_config_parse(t, text, cfg, &e) != MMT_OK)
    return tn_usage_error("emit", "%s", e.msg);
  bool valid = false;
  char why[512] = "";
  if (gen_check_op_for(t, cfg, dtype, layout, op, &valid, why, sizeof why, &e) != MMT_OK)
    return tn_fail("emit", "%s", e.msg);
  if (!valid)
    return tn_usage_error("emit", "config violates the template's constraints: %s",
                          why[0] ? why : "(the template gave no reason)");
  return TN_EXIT_OK;
}

int tn_cmd_emit(int argc, char **argv) {
  tn_opts o;
  gen_template *t = NULL;
  gen_kernel k = {0};
  gen_config cfg;
  const char *dtype = NULL, *layout = NULL;
  gen_op op;
  bool has_op = false;
  char params[1024];
  ut_err e;
  int rc = tn_opts_parse(&emit_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos == 0) {
    rc = tn_usage_error("emit", "missing TEMPLATE (see mmtune templates)");
    goto cleanup;
  }
  if ((rc = tn_load_template("emit", o.pos[0], &t)) != TN_EXIT_OK) goto cleanup;
  if ((rc = tn_template_dtype("emit", &o, t, &dtype)) != TN_EXIT_OK) goto cleanup;
  if ((rc = tn_template_layout("emit", &o, t, &layout)) != TN_EXIT_OK) goto cleanup;
  if ((rc = tn_opt_epilogue("emit", &o, dtype, &op, &has_op)) != TN_EXIT_OK) goto cleanup;
  const gen_op *opp = has_op ? &op : NULL;
  if ((rc = emit_config(t, o.pos + 1, o.npos - 1, dtype, layout, opp, &cfg)) != TN_EXIT_OK)
    goto cleanup;
  if (gen_config_format(t, &cfg, params, sizeof params, &e) != MMT_OK ||
      gen_emit_op(t, &cfg, dtype, layout, opp, &k, &e) != MMT_OK) {
    rc = tn_fail("emit", "%s", e.msg);
    goto cleanup;
  }
  size_t len = strlen(k.source);
  fputs(k.source, stdout);
  if (len == 0 || k.source[len - 1] != '\n') putchar('\n');
  if (tn_opts_has(&o, "info")) print_launch_info(t, params, &k);
cleanup:
  gen_kernel_clear(&k);
  gen_free(t);
  tn_opts_free(&o);
  return rc;
}
