/* libFuzzer harness: data type and device parsing and printing. Properties: parsing never
 * crashes; a parsed type is valid and round-trips through pf_dtype_format; a failure raises
 * ValueError and zeroes the output; printing any 4-byte DLDataType or any DLDevice fits
 * PF_DTYPE_STR_MAX / PF_DEVICE_STR_MAX and valid ones parse back to themselves; a buffer too
 * small fails with ValueError (a device's holds what fits). */
#include "fuzz_util.h"
#include "packfn/packfn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void expect_value_error(void) {
  pf_object_t* err = pf_error_take();
  FUZZ_CHECK(err != NULL && strcmp(pf_error_kind(err), PF_ERR_VALUE) == 0);
  pf_object_release(err);
}

static void dtype_text(const char* s) {
  DLDataType t;
  if (pf_dtype_parse(s, &t) != 0) {
    expect_value_error();
    FUZZ_CHECK(t.code == 0 && t.bits == 0 && t.lanes == 0);
    return;
  }
  FUZZ_CHECK(pf_dtype_is_valid(t));
  char buf[PF_DTYPE_STR_MAX];
  FUZZ_CHECK(pf_dtype_format(t, buf, sizeof buf) == 0);
  DLDataType back;
  FUZZ_CHECK(pf_dtype_parse(buf, &back) == 0);
  FUZZ_CHECK(back.code == t.code && back.bits == t.bits && back.lanes == t.lanes);
}

static void device_text(const char* s) {
  DLDevice d;
  if (pf_device_parse(s, &d) != 0) {
    expect_value_error();
    FUZZ_CHECK(d.device_type == 0 && d.device_id == 0);
    return;
  }
  char buf[PF_DEVICE_STR_MAX];
  FUZZ_CHECK(pf_device_format(d, buf, sizeof buf) == 0);
  DLDevice back;
  FUZZ_CHECK(pf_device_parse(buf, &back) == 0);
  FUZZ_CHECK(pf_device_equal(d, back));
}

static void dtype_binary(fuzz_input_t* in) {
  DLDataType t;
  t.code = fuzz_u8(in);
  t.bits = fuzz_u8(in);
  t.lanes = (uint16_t)fuzz_u64(in, 2);
  char buf[PF_DTYPE_STR_MAX];
  FUZZ_CHECK(pf_dtype_format(t, buf, sizeof buf) == 0);
  FUZZ_CHECK(strlen(buf) < sizeof buf);
  if (pf_dtype_is_valid(t)) {
    DLDataType back;
    FUZZ_CHECK(pf_dtype_parse(buf, &back) == 0);
    FUZZ_CHECK(back.code == t.code && back.bits == t.bits && back.lanes == t.lanes);
  }
  /* a buffer too small fails with ValueError and stays NUL-terminated */
  size_t small = fuzz_u8(in) % sizeof buf;
  if (small < strlen(buf) + 1) {
    char tiny[PF_DTYPE_STR_MAX];
    FUZZ_CHECK(pf_dtype_format(t, tiny, small) == -1);
    expect_value_error();
    if (small > 0)
      FUZZ_CHECK(strlen(tiny) < small);
  }
}

static void device_binary(fuzz_input_t* in) {
  DLDevice d;
  d.device_type = (DLDeviceType)(int32_t)fuzz_u64(in, 4);
  d.device_id = (int32_t)fuzz_u64(in, 4);
  char buf[PF_DEVICE_STR_MAX];
  FUZZ_CHECK(pf_device_format(d, buf, sizeof buf) == 0);
  if (pf_device_type_name(d.device_type) != NULL && d.device_id >= 0) {
    DLDevice back;
    FUZZ_CHECK(pf_device_parse(buf, &back) == 0);
    FUZZ_CHECK(pf_device_equal(d, back));
  }
  /* a buffer too small fails with ValueError and holds what fits, NUL-terminated */
  size_t small = fuzz_u8(in) % sizeof buf;
  if (small < strlen(buf) + 1) {
    char tiny[PF_DEVICE_STR_MAX];
    FUZZ_CHECK(pf_device_format(d, tiny, small) == -1);
    expect_value_error();
    if (small > 0)
      FUZZ_CHECK(strlen(tiny) == small - 1 && strncmp(tiny, buf, small - 1) == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  fuzz_input_t in = {data + 1, size - 1};
  switch (data[0] % 4) {
  case 0:
  case 1: {
    char* s = fuzz_cstr(data + 1, size - 1);
    if (!s)
      return 0;
    if (data[0] % 4 == 0)
      dtype_text(s);
    else
      device_text(s);
    free(s);
    break;
  }
  case 2:
    dtype_binary(&in);
    break;
  default:
    device_binary(&in);
    break;
  }
  FUZZ_CHECK(pf_error_peek() == NULL);
  return 0;
}
