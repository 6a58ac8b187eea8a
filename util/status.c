/* status.c -- mmt_status_name() and mmt_strerror(), generated from MMT_STATUS_MAP. */
#include "mmtune.h"

const char *mmt_status_name(mmt_status status) {
  switch (status) {
#define MMT_STATUS_NAME_(name, text) \
  case MMT_##name:                   \
    return "MMT_" #name;
    MMT_STATUS_MAP(MMT_STATUS_NAME_)
#undef MMT_STATUS_NAME_
    default:
      return "MMT_UNKNOWN";
  }
}

const char *mmt_strerror(mmt_status status) {
  switch (status) {
#define MMT_STATUS_TEXT_(name, text) \
  case MMT_##name:                   \
    return text;
    MMT_STATUS_MAP(MMT_STATUS_TEXT_)
#undef MMT_STATUS_TEXT_
    default:
      return "unknown status";
  }
}
