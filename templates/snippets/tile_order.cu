/* snippet tile_order (templates/snippets): which tile of C each block of a grid takes.
 * mmt_tile_of(pid, grid_m, grid_n, group, &row, &col): tile number pid (the launch index,
 * blockIdx.x fastest, or a persistent block's tiles in turn) of a grid of grid_m x grid_n
 * tiles is tile row *row, tile column *col; pid 0 .. grid_m * grid_n - 1 take every tile
 * once.  Plain C inside, so tests/test_templates.c compiles this very text on the host.
 * grid_m, grid_n >= 1.
 *
 * - In general, in groups of `group` tile rows, each group column by column, top to bottom
 *   (Triton's GROUP_M): the blocks running at one time cover a patch of about `group` rows by
 *   (blocks / group) columns, and share rows of A and columns of B in L2.  group 1: row by
 *   row.
 * - A grid of at most MMT_SHORT_GRID tile rows, and no more rows than columns: column by
 *   column, whatever the group, and a grid of at most MMT_SHORT_GRID tile columns, fewer than
 *   its rows: row by row.  The tiles that read the same panel of the larger operand (a
 *   column's, B's; a row's, A's) then run side by side; walked the other way, each is a row
 *   (or a group) of tiles away from the next, and the panel is read from DRAM or L2 twice
 *   over.  On an H100 (f16, `mmtune measure`): wgmma 64 x 128 tiles at 200x4096x4096 nt, 4
 *   tile rows, 0.0364 ms row by row against 0.0228 column by column, 128 x 128 at
 *   256x8192x4096 0.0369 against 0.0318; wgmma's swap at a decode batch of 32 in two tiles of
 *   16 (32x14336x4096 nt, 2 tile columns) 0.0517 ms in groups of 8 against 0.0454 row by
 *   row. */
#define MMT_SHORT_GRID 8
static __device__ __forceinline__ void mmt_tile_of(long long pid, long long grid_m,
                                                   long long grid_n, long long group,
                                                   long long* row, long long* col) {
  if (grid_m <= grid_n && grid_m <= MMT_SHORT_GRID) group = grid_m; /* column by column */
  else if (grid_n < grid_m && grid_n <= MMT_SHORT_GRID) group = 1;  /* row by row */
  const long long group_tiles = group * grid_n; /* tiles in one group of `group` tile rows */
  const long long first_row = pid / group_tiles * group;
  const long long rows = grid_m - first_row < group ? grid_m - first_row : group;
  const long long in_group = pid % group_tiles;
  *row = first_row + in_group % rows;
  *col = in_group / rows;
}
