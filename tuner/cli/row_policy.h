/*
 * cli/row_policy.h -- the checks db_merge, db_import_json and db_check run on rows from
 * elsewhere that need the templates (gen/): an element type mmtune knows, and params that
 * are a config of the row's template, as this machine has it.  Used by the db command
 * (cli/db.c).
 */
#ifndef MMT_TN_CLI_ROW_POLICY_H
#define MMT_TN_CLI_ROW_POLICY_H

#include "db.h"
#include "gen.h"

#define TN_POLICY_TEMPLATES 64 /* distinct template names looked up; more are taken unchecked */

typedef struct {
  db_row_policy policy; /* what to hand db_merge & co. */
  struct {
    char name[64];
    gen_template *t; /* NULL: not on this machine */
  } templates[TN_POLICY_TEMPLATES];
  int ntemplates;
} tn_row_policy;

/* Fills p (its policy points back at p: p must not move while in use). */
void tn_row_policy_init(tn_row_policy *p);
/* Frees the templates it loaded; p may be NULL. */
void tn_row_policy_free(tn_row_policy *p);

#endif /* MMT_TN_CLI_ROW_POLICY_H */
