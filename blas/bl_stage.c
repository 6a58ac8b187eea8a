/* bl_stage.c -- see bl.h: how the GPU path cuts its transfers into chunks that fit its
 * pinned slots, C into column panels, and a host copy into parts for threads.  Pure: no
 * CUDA, no globals. */
#include <string.h>

#include "bl.h"

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

/* `total` in about-equal pieces of at most `most` (>= 1): the size of each but the last. */
static size_t even_piece(size_t total, size_t most) {
  return ceil_div(total, ceil_div(total, most));
}

bool bl_stage_plan(const bl_operand *op, bl_rect part, size_t slot_elems, bl_stage *s) {
  memset(s, 0, sizeof *s);
  s->part = part;
  if (slot_elems == 0) return false;
  if (part.rows == 0 || part.cols == 0) return true;
  bool whole_columns = part.row0 == 0 && part.rows == op->rows;
  s->pitch = whole_columns ? op->dev_ld : part.rows;
  if (s->pitch <= slot_elems) {
    s->chunk_rows = part.rows;
    s->chunk_cols = even_piece(part.cols, slot_elems / s->pitch);
    s->pieces = 1;
    s->count = ceil_div(part.cols, s->chunk_cols);
    s->contiguous = whole_columns;
    return true;
  }
  /* A column larger than a slot: one column at a time, in pieces of rows. */
  s->chunk_rows = even_piece(part.rows, slot_elems);
  s->pitch = s->chunk_rows;
  s->chunk_cols = 1;
  s->pieces = ceil_div(part.rows, s->chunk_rows);
  return !__builtin_mul_overflow(part.cols, s->pieces, &s->count);
}

bl_rect bl_stage_chunk(const bl_stage *s, size_t i) {
  size_t group = i / s->pieces, piece = i % s->pieces;
  size_t col = group * s->chunk_cols, row = piece * s->chunk_rows;
  bl_rect r = {s->part.row0 + row, s->part.col0 + col, s->part.rows - row,
               s->part.cols - col};
  if (r.rows > s->chunk_rows) r.rows = s->chunk_rows;
  if (r.cols > s->chunk_cols) r.cols = s->chunk_cols;
  return r;
}

size_t bl_stage_width(const bl_stage *s, bl_rect c) { return s->contiguous ? s->pitch : c.rows; }

bl_panels bl_plan_panels(const bl_plan *p, size_t max_panels) {
  size_t n = p->c.cols, b_bytes;
  bl_panels one = {1, n};
  if (max_panels > BL_PANELS_MAX) max_panels = BL_PANELS_MAX;
  if (!p->b.used || max_panels < 2 || n < 2 * BL_PANEL_MIN) return one;
  if (__builtin_mul_overflow(p->b.dev_ld * sizeof(float), p->b.cols, &b_bytes))
    b_bytes = (size_t)-1;
  if (b_bytes < BL_PANEL_MIN_B) return one;
  size_t count = n / BL_PANEL_MIN < max_panels ? n / BL_PANEL_MIN : max_panels;
  size_t width = ceil_div(ceil_div(n, count), BL_PANEL_ALIGN) * BL_PANEL_ALIGN;
  return (bl_panels){ceil_div(n, width), width};
}

void bl_panel_parts(const bl_plan *p, bool trans_b, bl_panels ps, size_t j, bl_rect *b,
                    bl_rect *c) {
  size_t col0 = j * ps.width, cols = p->c.cols - col0;
  if (cols > ps.width) cols = ps.width;
  *c = (bl_rect){0, col0, p->c.rows, cols};
  if (trans_b)
    *b = (bl_rect){col0, 0, cols, p->b.cols};
  else
    *b = (bl_rect){0, col0, p->b.rows, cols};
}

void bl_split(size_t total, size_t parts, size_t i, size_t *begin, size_t *end) {
  size_t base = total / parts, extra = total % parts;
  *begin = base * i + (i < extra ? i : extra);
  *end = *begin + base + (i < extra);
}

void bl_copy_range(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                   size_t begin, size_t end) {
  if (width == 0) return;
  for (size_t line = begin / width, at = begin % width; begin < end; line++, at = 0) {
    size_t len = width - at < end - begin ? width - at : end - begin;
    memcpy((char *)dst + line * dst_pitch + at, (const char *)src + line * src_pitch + at, len);
    begin += len;
  }
}
