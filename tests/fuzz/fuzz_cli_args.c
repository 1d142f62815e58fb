/* libFuzzer harness: the `packfn call` argument parser (pf_cli_arg_parse: prefixes, bools,
 * ints, floats, dtypes, devices, inline tensor literals "float32[2,3]:1,2,3,4,5,6").
 * Properties: never crashes; success leaves no error raised and an owned value (a tensor
 * literal gives a CPU tensor of the declared shape, checked where its extents are plain
 * decimal digits; "str:TEXT" gives the string TEXT); failure writes a usage message and leaves
 * arg owning nothing. Tokens naming .npy files are skipped (they read the file system), and so
 * are literals declaring more than 2^20 elements (element-wise filling is slow, issue 10
 * defect 9, and would only time the fuzzer out). */
#include <ctype.h>
#include <stdlib.h>

#include "cli.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* 1 when some bracketed list in s may declare more than 2^20 elements. */
static int too_many_elements(const char* s) {
  double product = 1;
  int in_brackets = 0;
  for (const char* p = s; *p; ++p) {
    if (*p == '[') {
      in_brackets = 1;
      product = 1;
    } else if (*p == ']') {
      in_brackets = 0;
      if (product > 1048576.0)
        return 1;
    } else if (in_brackets && isdigit((unsigned char)*p)) {
      /* the larger of the decimal and the C-prefixed (0x hex, 0 octal) readings: "0999" is
       * 999 to the literal parser but 0 to strtoull base 0 (an 8 GB "float32[2,0999999999]"
       * once slipped through) */
      char *end10, *end0;
      double v10 = (double)strtoull(p, &end10, 10);
      double v0 = (double)strtoull(p, &end0, 0);
      p = (end10 > end0 ? end10 : end0) - 1;
      product *= v10 > v0 ? v10 : v0;
    }
  }
  return in_brackets && product > 1048576.0;
}

/* For a token that parsed as a tensor literal "DTYPE[E0,E1,...]...": 1 when the extents are
 * plain decimal digits and t has exactly that shape; also 1 when they are written otherwise
 * (signs, blanks, prefixes), which this check leaves to the parser. */
static int declared_shape(const char* text, const DLTensor* t) {
  const char* p = strchr(text, '[');
  if (!p)
    return 0;
  ++p;
  int32_t n = 0;
  if (*p == ']')
    return t->ndim == 0;
  for (;;) {
    if (!isdigit((unsigned char)*p))
      return 1;
    char* end;
    long long v = strtoll(p, &end, 10);
    if (*end != ',' && *end != ']')
      return 1; /* "0xA2": not plain digits */
    if (n >= t->ndim || t->shape[n] != v)
      return 0;
    ++n;
    if (*end == ']')
      return n == t->ndim;
    p = end + 1;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* text = fuzz_cstr(data, size);
  if (!text)
    return 0;
  size_t n = strlen(text);
  if (strncmp(text, "npy:", 4) == 0 || (n >= 4 && strcmp(text + n - 4, ".npy") == 0) ||
      too_many_elements(text)) {
    free(text);
    return 0;
  }
  pf_cli_arg_t arg;
  char msg[PF_CLI_MSG_MAX];
  msg[0] = '\0';
  pf_cli_parse_t ctx = {NULL, 0, NULL, NULL, NULL}; /* no --out, no tensor before */
  int rc = pf_cli_arg_parse(text, &ctx, &arg, msg, sizeof msg);
  if (rc == 0) {
    if (arg.value.type_index == PF_TYPE_TENSOR) {
      DLTensor* t = pf_tensor_dltensor(arg.value.v_obj);
      FUZZ_CHECK(t != NULL && t->device.device_type == kDLCPU);
      FUZZ_CHECK(t->ndim >= 0 && t->ndim <= PF_TENSOR_MAX_NDIM);
      FUZZ_CHECK(declared_shape(text, t));
    }
    /* "str:TEXT" is the string TEXT, always */
    if (strncmp(text, "str:", 4) == 0) {
      const char* got = NULL;
      FUZZ_CHECK(pf_any_as_cstr(&arg.value, &got) == 0 && strcmp(got, text + 4) == 0);
    }
    pf_cli_arg_clear(&arg);
  } else {
    /* -1: a usage error with a message; -2: an error raised (no --out files here, so none
     * should be) */
    FUZZ_CHECK(rc == -1 && msg[0] != '\0');
    FUZZ_CHECK(arg.value.type_index == PF_TYPE_NONE && arg.device_tensor == NULL &&
               arg.before == NULL);
  }
  FUZZ_CHECK(pf_error_peek() == NULL);
  free(text);
  return 0;
}
