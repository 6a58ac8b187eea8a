/* snippet tile_order (templates/snippets): which tile of C each block of a grid takes.
 * mmt_tile_of(pid, grid_m, grid_n, group, &row, &col): tile number pid (the launch index,
 * blockIdx.x fastest, or a persistent block's tiles in turn) of a grid of grid_m x grid_n
 * tiles is tile row *row, tile column *col; pid 0 .. grid_m * grid_n - 1 take every tile
 * once.  Plain C inside, so tests/test_templates.c compiles this very text on the host.
 *
 * - grid_n >= group: the tiles are walked in groups of `group` tile rows, each group column
 *   by column, top to bottom (Triton's GROUP_M): the blocks running at one time cover a patch
 *   of about `group` rows by (blocks / group) columns, and share rows of A and columns of B
 *   in L2.  group 1: row by row.
 * - grid_n < group: row by row.  A grid narrower than its group covers such a patch already
 *   when walked row by row, and a walk down the group would put group - 1 other tiles between
 *   the tiles of one row, which read the same rows of A: where A is the streamed operand
 *   (wgmma's swap at a decode batch of 32 in two tiles of 16, 14336 x 4096 weights, H100)
 *   that ran 12-15% slower than row by row. */
static __device__ __forceinline__ void mmt_tile_of(long long pid, long long grid_m,
                                                   long long grid_n, long long group,
                                                   long long* row, long long* col) {
  if (grid_n < group) group = 1;
  const long long group_tiles = group * grid_n; /* tiles in one group of `group` tile rows */
  const long long first_row = pid / group_tiles * group;
  const long long rows = grid_m - first_row < group ? grid_m - first_row : group;
  const long long in_group = pid % group_tiles;
  *row = first_row + in_group % rows;
  *col = in_group / rows;
}
