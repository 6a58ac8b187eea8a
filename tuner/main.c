/*
 * main.c -- the mmtune executable: picks the command (tn_cli.h) from argv[1].
 * `mmtune` alone or with an option first runs the main job, tune.
 */
#include <stdio.h>
#include <string.h>

#include "rt_compile.h"
#include "tn_cli.h"

#ifndef MMT_VERSION
#define MMT_VERSION "0.1.0"
#endif

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary; /* NULL: hidden */
} command;

static const command commands[] = {
    {"tune", tn_cmd_tune, "tune GEMM shapes on a GPU and record the fastest kernels (default)"},
    {"bench", tn_cmd_bench, "time one shape M N K with the tuned kernel"},
    {"templates", tn_cmd_templates, "list the kernel templates, their parameters and spaces"},
    {"space", tn_cmd_space, "print the valid configs of a template"},
    {"emit", tn_cmd_emit, "print the CUDA C of one config of a template"},
    {"compile", tn_cmd_compile, "compile every valid config with NVRTC (no GPU needed)"},
    {"measure", tn_cmd_measure, "verify and time one config of a template on one problem"},
    {"show", tn_cmd_show, "print the best kernel recorded per GPU model and shape"},
    {"explain", tn_cmd_explain, "which kernel mmt_gemm would use for M N K, and why"},
    {"model", tn_cmd_model, "evaluate the performance model on the database (no GPU needed)"},
    {"report", tn_cmd_report, "draw charts of the database with gnuplot into an HTML page"},
    {"db", tn_cmd_db, "merge databases into one, or check one (no GPU needed)"},
    {"help", NULL, "print this help, or a command's help: mmtune help COMMAND"},
    {"__worker", tn_cmd_worker, NULL},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void print_usage(void) {
  printf(
      "usage: mmtune [tune] --device N [options]   tune on GPU N (the main job)\n"
      "       mmtune COMMAND [options]\n\ncommands:\n");
  for (int i = 0; i < NCOMMANDS; i++)
    if (commands[i].summary) printf("  %-10s %s\n", commands[i].name, commands[i].summary);
  printf(
      "\nRun 'mmtune COMMAND --help' for a command's options.\n"
      "Environment: MMTUNE_TEMPLATE_PATH (extra template folders, colon-separated),\n"
      "MMTUNE_DB (database), MMTUNE_CACHE_DIR (cubin cache), XDG_CACHE_HOME.\n");
}

static void print_version(void) {
  char nvrtc[16];
  if (rt_nvrtc_version(nvrtc, sizeof nvrtc, NULL) == MMT_OK)
    printf("mmtune %s (NVRTC %s)\n", MMT_VERSION, nvrtc);
  else
    printf("mmtune %s\n", MMT_VERSION);
}

static const command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

/* mmtune help [COMMAND] */
static int run_help(int argc, char **argv) {
  if (argc < 2) {
    print_usage();
    return TN_EXIT_OK;
  }
  const command *c = find_command(argv[1]);
  if (!c || !c->fn || !c->summary)
    return tn_usage_error("help", "unknown command '%s' (see mmtune --help)", argv[1]);
  char help[] = "--help";
  char *args[] = {argv[1], help, NULL};
  return c->fn(2, args);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *first = argc > 1 ? argv[1] : NULL;
  if (first && (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0)) {
    print_usage();
    return TN_EXIT_OK;
  }
  if (first && strcmp(first, "--version") == 0) {
    print_version();
    return TN_EXIT_OK;
  }
  if (!first || first[0] == '-') {
    /* The default command: tune gets argv with its own name in argv[0]. */
    static char tune[] = "tune";
    argv[0] = tune;
    return tn_cmd_tune(argc, argv);
  }
  const command *c = find_command(first);
  if (!c) return tn_usage_error(NULL, "unknown command '%s' (see mmtune --help)", first);
  if (!c->fn) return run_help(argc - 1, argv + 1);
  return c->fn(argc - 1, argv + 1);
}
