/*
 * gen_op.c -- epilogue ops (gen.h, "Epilogues"): their canonical text, its parsing, and the
 * table a template's constraints and emit read as `op` (templates/README.md, "Epilogues").
 */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "gen_int.h"

static const char *const act_names[GEN_ACTS] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};

const char *gen_act_name(gen_act act) { return act >= 0 && act < GEN_ACTS ? act_names[act] : NULL; }

int gen_act_index(const char *name) {
  for (int i = 0; name && i < GEN_ACTS; i++)
    if (!strcmp(name, act_names[i])) return i;
  return -1;
}

/* The output types an op may have (the inputs' need not be one of them: tf32 writes f32);
 * the FP8 ones after FP8 inputs only (gen_op_valid). */
static bool out_type(const char *dtype) {
  return !strcmp(dtype, "f32") || !strcmp(dtype, "f16") || !strcmp(dtype, "bf16") ||
         gen_dtype_fp8(dtype);
}

bool gen_op_consistent(const gen_op *op) {
  return op && out_type(op->out) && (op->bias == 0 || op->bias == 'c' || op->bias == 'r') &&
         (op->bias || !op->bias_f32) && op->act >= 0 && op->act < GEN_ACTS &&
         (op->scale_row || op->scale_col) + op->scale_tensor + op->scale_block <= 1 &&
         (op->group == 0 || ((op->group == 'c' || op->group == 'm') && !op->scale_block &&
                             !gen_dtype_fp8(op->out))) &&
         (!gen_dtype_fp8(op->out) || ((!op->bias || op->bias_f32) && !op->residual));
}

bool gen_op_valid(const gen_op *op, const char *in_dtype) {
  return gen_op_consistent(op) && in_dtype && gen_dtype_index(in_dtype) >= 0 &&
         strcmp(in_dtype, "f64") != 0 && (!op->fast_accum || gen_dtype_fp8(in_dtype)) &&
         (!op->scale_block || gen_dtype_fp8(in_dtype)) &&
         (!op->mixed_fp8 || gen_dtype_fp8(in_dtype)) &&
         (!gen_dtype_fp8(op->out) || gen_dtype_fp8(in_dtype));
}

mmt_status gen_op_format(const gen_op *op, char *out, size_t outlen, ut_err *err) {
  if (!out || !outlen) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_op_format: no output buffer");
  out[0] = '\0';
  if (!op) return MMT_OK;
  if (!out_type(op->out) || (op->bias && op->bias != 'c' && op->bias != 'r') ||
      (!op->bias && op->bias_f32) || !gen_act_name(op->act) ||
      (op->scale_row || op->scale_col) + op->scale_tensor + op->scale_block > 1 ||
      (op->group && op->group != 'c' && op->group != 'm'))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_op_format: an op with a field out of range");
  const char *scale = op->scale_block                  ? ",scale=block"
                      : op->scale_tensor               ? ",scale=tensor"
                      : op->scale_row && op->scale_col ? ",scale=row+col"
                      : op->scale_row                  ? ",scale=row"
                      : op->scale_col                  ? ",scale=col"
                                                       : "";
  const char *group = op->group == 'c'   ? ",group=contiguous"
                      : op->group == 'm' ? ",group=masked"
                                         : "";
  int n = snprintf(out, outlen, "out=%s%s%s%s%s%s%s%s%s%s%s", op->out,
                   op->bias == 'c'   ? ",bias=col"
                   : op->bias == 'r' ? ",bias=row"
                                     : "",
                   op->bias_f32 && strcmp(op->out, "f32") ? ",bias_type=f32" : "", scale,
                   op->act ? ",act=" : "", op->act ? act_names[op->act] : "",
                   op->gated ? ",gated" : "", op->fast_accum ? ",fast_accum" : "",
                   op->mixed_fp8 ? ",mixed" : "", group, op->residual ? ",residual" : "");
  if (n < 0 || (size_t)n >= outlen) {
    out[0] = '\0';
    return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_op_format: buffer of %zu bytes too short",
                   outlen);
  }
  return MMT_OK;
}

/* One name=value field of an op's text into op. */
static mmt_status parse_field(const char *name, const char *value, gen_op *op, bool *out_seen,
                              ut_err *err) {
  if (!strcmp(name, "out") && value && out_type(value)) {
    snprintf(op->out, sizeof op->out, "%s", value);
    *out_seen = true;
  } else if (!strcmp(name, "bias") && value && (!strcmp(value, "col") || !strcmp(value, "row"))) {
    op->bias = value[0];
  } else if (!strcmp(name, "bias_type") && value && !strcmp(value, "f32")) {
    op->bias_f32 = true;
  } else if (!strcmp(name, "scale") && value && !strcmp(value, "tensor")) {
    op->scale_tensor = true;
  } else if (!strcmp(name, "scale") && value && !strcmp(value, "block")) {
    op->scale_block = true;
  } else if (!strcmp(name, "scale") && value &&
             (!strcmp(value, "row") || !strcmp(value, "col") || !strcmp(value, "row+col"))) {
    op->scale_row = strstr(value, "row") != NULL;
    op->scale_col = strstr(value, "col") != NULL;
  } else if (!strcmp(name, "fast_accum") && !value) {
    op->fast_accum = true;
  } else if (!strcmp(name, "mixed") && !value) {
    op->mixed_fp8 = true;
  } else if (!strcmp(name, "act") && value && gen_act_index(value) >= 0) {
    op->act = (gen_act)gen_act_index(value);
  } else if (!strcmp(name, "gated") && !value) {
    op->gated = true;
  } else if (!strcmp(name, "residual") && !value) {
    op->residual = true;
  } else if (!strcmp(name, "group") && value &&
             (!strcmp(value, "contiguous") || !strcmp(value, "masked"))) {
    op->group = value[0];
  } else {
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "bad epilogue field '%s%s%s' (fields: out=f32|f16|bf16|e4m3|e5m2, bias=col|row, "
                   "bias_type=f32, scale=row|col|row+col|tensor|block, "
                   "act=none|relu|gelu_tanh|gelu_erf|silu, gated, fast_accum, mixed, "
                   "group=contiguous|masked, residual)",
                   name, value ? "=" : "", value ? value : "");
  }
  return MMT_OK;
}

mmt_status gen_op_parse(const char *text, const char *in_dtype, gen_op *op, ut_err *err) {
  if (!text || !op) return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_op_parse: NULL argument");
  gen_op o = {0};
  char buf[256];
  if (strlen(text) >= sizeof buf)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "epilogue '%.40s...' is too long", text);
  snprintf(buf, sizeof buf, "%s", text);
  bool out_seen = false;
  for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(f, '=');
    if (eq) *eq = '\0';
    mmt_status rc = parse_field(f, eq ? eq + 1 : NULL, &o, &out_seen, err);
    if (rc) return rc;
  }
  if (o.bias_f32 && !o.bias)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "epilogue '%s': bias_type without bias", text);
  if ((o.scale_row || o.scale_col) + o.scale_tensor + o.scale_block > 1)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "epilogue '%s': one scale= only (row, col and row+col, tensor, or block)", text);
  if (o.group && (o.scale_block || gen_dtype_fp8(o.out)))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "epilogue '%s': group= takes no block scales nor an FP8 out=", text);
  if (!out_seen) {
    const char *in = in_dtype && !strcmp(in_dtype, "tf32") ? "f32"
                     : gen_dtype_fp8(in_dtype)             ? "bf16"
                                                           : in_dtype;
    if (!in || !out_type(in))
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "epilogue '%s': no out= and no input dtype to "
                     "take it from",
                     text);
    snprintf(o.out, sizeof o.out, "%s", in);
  }
  if (o.residual && gen_dtype_fp8(o.out))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "epilogue '%s': residual with an FP8 D (written without C: beta 0)", text);
  /* an f32 bias either way (an FP8 D's bias is f32: FP8 has no bias of its own type) */
  o.bias_f32 = o.bias_f32 || (o.bias && (!strcmp(o.out, "f32") || gen_dtype_fp8(o.out)));
  *op = o;
  return MMT_OK;
}

void gen_push_op(lua_State *L, const gen_op *op) {
  if (!op) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 12);
  lua_pushstring(L, op->out);
  lua_setfield(L, -2, "out");
  if (op->bias) {
    lua_pushstring(L, op->bias == 'c' ? "col" : "row");
    lua_setfield(L, -2, "bias");
    lua_pushstring(L, op->bias_f32 ? "f32" : op->out);
    lua_setfield(L, -2, "bias_type");
  }
  lua_pushboolean(L, op->scale_row);
  lua_setfield(L, -2, "scale_row");
  lua_pushboolean(L, op->scale_col);
  lua_setfield(L, -2, "scale_col");
  lua_pushboolean(L, op->scale_tensor);
  lua_setfield(L, -2, "scale_tensor");
  lua_pushboolean(L, op->scale_block);
  lua_setfield(L, -2, "scale_block");
  lua_pushboolean(L, op->fast_accum);
  lua_setfield(L, -2, "fast_accum");
  lua_pushboolean(L, op->mixed_fp8);
  lua_setfield(L, -2, "mixed_fp8");
  lua_pushstring(L, act_names[op->act]);
  lua_setfield(L, -2, "act");
  lua_pushboolean(L, op->gated);
  lua_setfield(L, -2, "gated");
  if (op->group) {
    lua_pushstring(L, op->group == 'c' ? "contiguous" : "masked");
    lua_setfield(L, -2, "group");
  }
  lua_pushboolean(L, op->residual);
  lua_setfield(L, -2, "residual");
}
