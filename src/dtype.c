/* Data types and devices as text: the tables of DLPack names, parsing ("float32", "int8x4",
 * "cuda:1") and printing, plus the validity rule every tensor's dtype must pass. */
#include <stdio.h>
#include <string.h>

#include "packfn/device.h"

#include "common.h"

/* Types written by one fixed name (their width is part of the name). */
static const struct {
  const char* name;
  uint8_t code;
  uint8_t bits;
} pf__named_dtypes[] = {
    {"bool", PF_DL_BOOL, 8},
    {"bfloat16", PF_DL_BFLOAT, 16},
    {"handle", PF_DL_OPAQUE_HANDLE, 64},
    {"float8_e3m4", PF_DL_FLOAT8_E3M4, 8},
    {"float8_e4m3", PF_DL_FLOAT8_E4M3, 8},
    {"float8_e4m3b11fnuz", PF_DL_FLOAT8_E4M3B11FNUZ, 8},
    {"float8_e4m3fn", PF_DL_FLOAT8_E4M3FN, 8},
    {"float8_e4m3fnuz", PF_DL_FLOAT8_E4M3FNUZ, 8},
    {"float8_e5m2", PF_DL_FLOAT8_E5M2, 8},
    {"float8_e5m2fnuz", PF_DL_FLOAT8_E5M2FNUZ, 8},
    {"float8_e8m0fnu", PF_DL_FLOAT8_E8M0FNU, 8},
    {"float6_e2m3fn", PF_DL_FLOAT6_E2M3FN, 6},
    {"float6_e3m2fn", PF_DL_FLOAT6_E3M2FN, 6},
    {"float4_e2m1fn", PF_DL_FLOAT4_E2M1FN, 4},
};

/* Types written as a family name followed by the width in bits ("int32", "complex64"). */
static const struct {
  const char* prefix;
  uint8_t code;
} pf__dtype_families[] = {
    {"int", PF_DL_INT},
    {"uint", PF_DL_UINT},
    {"float", PF_DL_FLOAT},
    {"complex", PF_DL_COMPLEX},
};

/* Widths a family allows: integers of any width up to 64 bits (int4 and uint1 exist in the
 * wild), IEEE floats, and complex numbers of two such floats. */
static int pf__family_width_ok(uint8_t code, unsigned bits) {
  switch (code) {
  case PF_DL_INT:
  case PF_DL_UINT:
    return bits >= 1 && bits <= 64;
  case PF_DL_FLOAT:
    return bits == 16 || bits == 32 || bits == 64;
  case PF_DL_COMPLEX:
    return bits == 32 || bits == 64 || bits == 128;
  default:
    return 0;
  }
}

static const char* pf__family_prefix(uint8_t code) {
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__dtype_families); ++i)
    if (pf__dtype_families[i].code == code)
      return pf__dtype_families[i].prefix;
  return NULL;
}

/* Width of the named type with code c (the table above, by code), 0 when c names no type:
 * lets pf_dtype_is_valid, which every tensor creation calls, look codes up directly. */
static const uint8_t pf__named_bits[PF_DL_FLOAT4_E2M1FN + 1] = {
    [PF_DL_OPAQUE_HANDLE] = 64,  [PF_DL_BFLOAT] = 16,         [PF_DL_BOOL] = 8,
    [PF_DL_FLOAT8_E3M4] = 8,     [PF_DL_FLOAT8_E4M3] = 8,     [PF_DL_FLOAT8_E4M3B11FNUZ] = 8,
    [PF_DL_FLOAT8_E4M3FN] = 8,   [PF_DL_FLOAT8_E4M3FNUZ] = 8, [PF_DL_FLOAT8_E5M2] = 8,
    [PF_DL_FLOAT8_E5M2FNUZ] = 8, [PF_DL_FLOAT8_E8M0FNU] = 8,  [PF_DL_FLOAT6_E2M3FN] = 6,
    [PF_DL_FLOAT6_E3M2FN] = 6,   [PF_DL_FLOAT4_E2M1FN] = 4,
};

int pf_dtype_is_valid(DLDataType t) {
  if (t.lanes == 0)
    return 0;
  if (t.code == PF_DL_INT || t.code == PF_DL_UINT || t.code == PF_DL_FLOAT ||
      t.code == PF_DL_COMPLEX)
    return pf__family_width_ok(t.code, t.bits);
  return t.code < PF__ARRAY_SIZE(pf__named_bits) && pf__named_bits[t.code] != 0 &&
         pf__named_bits[t.code] == t.bits;
}

/* Reads a run of decimal digits at *p (at least one) into *value, capped at `max`; advances
 * *p past the digits. 0 on success, -1 when there is no digit or the value exceeds max. */
static int pf__read_decimal(const char** p, unsigned long max, unsigned long* value) {
  const char* s = *p;
  unsigned long v = 0;
  if (*s < '0' || *s > '9')
    return -1;
  for (; *s >= '0' && *s <= '9'; ++s) {
    v = v * 10 + (unsigned long)(*s - '0');
    if (v > max)
      return -1;
  }
  *p = s;
  *value = v;
  return 0;
}

/* pf__read_decimal for the width and lanes of a data type name, which have one spelling only:
 * a leading zero is refused ("int08" and "int8x04" printed back as "int8" and "int8x4", so
 * parsing was not canonical: found by review). */
static int pf__read_dtype_number(const char** p, unsigned long max, unsigned long* value) {
  if ((*p)[0] == '0' && (*p)[1] >= '0' && (*p)[1] <= '9')
    return -1;
  return pf__read_decimal(p, max, value);
}

/* Parses the optional "x<lanes>" tail at p into *lanes; 0 on success (an empty tail is 1).
 * "x1" is refused as a leading zero is: it would be a second name of the scalar type, which
 * formats without a tail ("int8x1" parsed as int8, review). */
static int pf__parse_lanes(const char* p, uint16_t* lanes) {
  unsigned long v = 1;
  if (*p == 'x') {
    ++p;
    if (pf__read_dtype_number(&p, UINT16_MAX, &v) != 0 || v <= 1)
      return -1;
  }
  if (*p != '\0')
    return -1;
  *lanes = (uint16_t)v;
  return 0;
}

/* Parses the base name at the start of s: on success stores code and bits and returns the
 * length consumed; returns 0 when s starts with no known name. */
static size_t pf__parse_dtype_base(const char* s, uint8_t* code, uint8_t* bits) {
  /* Fixed names first, longest match wins ("float8_e4m3fn" over "float8_e4m3"); the name must
   * end the text or be followed by the lanes suffix. */
  size_t best = 0;
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__named_dtypes); ++i) {
    size_t len = strlen(pf__named_dtypes[i].name);
    if (len > best && strncmp(s, pf__named_dtypes[i].name, len) == 0 &&
        (s[len] == '\0' || s[len] == 'x')) {
      best = len;
      *code = pf__named_dtypes[i].code;
      *bits = pf__named_dtypes[i].bits;
    }
  }
  if (best)
    return best;
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__dtype_families); ++i) {
    size_t len = strlen(pf__dtype_families[i].prefix);
    if (strncmp(s, pf__dtype_families[i].prefix, len) != 0)
      continue;
    const char* p = s + len;
    unsigned long width;
    if (pf__read_dtype_number(&p, 255, &width) != 0 ||
        !pf__family_width_ok(pf__dtype_families[i].code, (unsigned)width))
      return 0;
    *code = pf__dtype_families[i].code;
    *bits = (uint8_t)width;
    return (size_t)(p - s);
  }
  return 0;
}

int pf_dtype_parse(const char* s, DLDataType* out) {
  if (out)
    memset(out, 0, sizeof *out);
  if (!s || !out) {
    return PF__NULL_ARG("pf_dtype_parse", s ? "out" : "s");
  }
  uint8_t code = 0, bits = 0;
  uint16_t lanes = 0;
  size_t len = pf__parse_dtype_base(s, &code, &bits);
  if (len == 0 || pf__parse_lanes(s + len, &lanes) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_dtype_parse: argument s: expected a data type such as \"float32\", "
                 "\"bfloat16\", \"int8x4\" or \"bool\", got \"%.80s\"",
                 s);
    return -1;
  }
  *out = pf_dtype(code, bits, lanes);
  return 0;
}

/* Common tail of the formatters: raises when snprintf's result `n` did not fit. */
static int pf__check_formatted(const char* func, int n, size_t size) {
  if (n < 0 || (size_t)n >= size) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument size: expected at least %d bytes, got %zu", func,
                 n < 0 ? 1 : n + 1, size);
    return -1;
  }
  return 0;
}

int pf_dtype_format(DLDataType t, char* buf, size_t size) {
  if (!buf) {
    return PF__NULL_ARG("pf_dtype_format", "buf");
  }
  int n;
  if (!pf_dtype_is_valid(t)) {
    n = snprintf(buf, size, "dtype(code=%u, bits=%u, lanes=%u)", (unsigned)t.code, (unsigned)t.bits,
                 (unsigned)t.lanes);
    return pf__check_formatted("pf_dtype_format", n, size);
  }
  const char* name = NULL;
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__named_dtypes); ++i)
    if (pf__named_dtypes[i].code == t.code)
      name = pf__named_dtypes[i].name;
  char base[24];
  if (name)
    snprintf(base, sizeof base, "%s", name);
  else
    snprintf(base, sizeof base, "%s%u", pf__family_prefix(t.code), (unsigned)t.bits);
  if (t.lanes == 1)
    n = snprintf(buf, size, "%s", base);
  else
    n = snprintf(buf, size, "%sx%u", base, (unsigned)t.lanes);
  return pf__check_formatted("pf_dtype_format", n, size);
}

/* ---- devices ---- */

/* Device type names, indexed by DLPack device type; NULL where DLPack has none. */
static const char* const pf__device_names[] = {
    [PF_DEV_CPU] = "cpu",
    [PF_DEV_CUDA] = "cuda",
    [PF_DEV_CUDA_HOST] = "cuda_host",
    [PF_DEV_OPENCL] = "opencl",
    [PF_DEV_VULKAN] = "vulkan",
    [PF_DEV_METAL] = "metal",
    [PF_DEV_VPI] = "vpi",
    [PF_DEV_ROCM] = "rocm",
    [PF_DEV_ROCM_HOST] = "rocm_host",
    [PF_DEV_EXT_DEV] = "ext_dev",
    [PF_DEV_CUDA_MANAGED] = "cuda_managed",
    [PF_DEV_ONEAPI] = "oneapi",
    [PF_DEV_WEBGPU] = "webgpu",
    [PF_DEV_HEXAGON] = "hexagon",
    [PF_DEV_MAIA] = "maia",
    [PF_DEV_TRN] = "trn",
};

const char* pf_device_type_name(int32_t device_type) {
  if (device_type < 0 || (size_t)device_type >= PF__ARRAY_SIZE(pf__device_names))
    return NULL;
  return pf__device_names[device_type];
}

int pf_device_parse(const char* s, DLDevice* out) {
  if (out)
    memset(out, 0, sizeof *out);
  if (!s || !out) {
    return PF__NULL_ARG("pf_device_parse", s ? "out" : "s");
  }
  const char* colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  for (size_t type = 0; type < PF__ARRAY_SIZE(pf__device_names); ++type) {
    const char* name = pf__device_names[type];
    if (!name || strlen(name) != len || strncmp(s, name, len) != 0)
      continue;
    unsigned long id = 0;
    if (colon) {
      const char* p = colon + 1;
      /* one spelling per device, as for dtypes: "cuda:01" is refused (review) */
      if (pf__read_dtype_number(&p, INT32_MAX, &id) != 0 || *p != '\0')
        break;
    }
    *out = pf_device((int32_t)type, (int32_t)id);
    return 0;
  }
  PF_ERROR_SET(PF_ERR_VALUE,
               "pf_device_parse: argument s: expected a device such as \"cpu\", \"cuda\" or "
               "\"cuda:1\", got \"%.80s\"",
               s);
  return -1;
}

int pf_device_format(DLDevice device, char* buf, size_t size) {
  if (!buf) {
    return PF__NULL_ARG("pf_device_format", "buf");
  }
  const char* name = pf_device_type_name((int32_t)device.device_type);
  int n =
      name ? snprintf(buf, size, "%s:%d", name, (int)device.device_id)
           : snprintf(buf, size, "device(%d):%d", (int)device.device_type, (int)device.device_id);
  return pf__check_formatted("pf_device_format", n, size);
}
