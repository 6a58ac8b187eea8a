/* sass.h -- the SASS of a cubin, read through the CUDA toolkit's cuobjdump (no GPU needed),
 * for tests that check what ptxas made of a template: where it put a load and what waits for
 * it.  Prefix sass_. */
#ifndef MMT_TESTS_SASS_H
#define MMT_TESTS_SASS_H

#include <stdbool.h>
#include <stddef.h>

#include "rt_compile.h"

typedef struct {
  unsigned addr;   /* byte offset in the kernel */
  char op[40];     /* the opcode with its modifiers: "LDG.E.CONSTANT" */
  char args[200];  /* the operands, destination first, as cuobjdump prints them */
  bool predicated; /* under a predicate (@P0, @!P1, ...) */
} sass_insn;

/* The instructions of the one kernel in `cubin`, in address order, into *out (malloc'd; the
 * caller frees it) and *count.  Returns 1 when `cuobjdump` (a path, or a name PATH finds) is
 * not there to run (the caller skips), 0 on success, -1 on any other failure (*why says
 * which). */
int sass_read(const rt_cubin *cubin, const char *cuobjdump, sass_insn **out, int *count, char *why,
              size_t whylen);

/* The innermost loop that holds an instruction whose opcode starts with `opcode`: [*first,
 * *last] (indexes; *last is its backward branch).  False when there is none. */
bool sass_loop_with(const sass_insn *insn, int count, const char *opcode, int *first, int *last);

/* Whether the instruction reads register `reg` ("R212"): as a source operand (every operand
 * but the destination, the first; SHFL's first two; a store's all). */
bool sass_reads(const sass_insn *insn, const char *reg);

/* Whether the instruction writes register `reg` (its destination operand; not a store). */
bool sass_writes(const sass_insn *insn, const char *reg);

#endif /* MMT_TESTS_SASS_H */
