/* What export.h's macros call at run time: a typed export called through its raw symbol and
 * TVM-FFI's metadata of an export (its __tvm_ffi__metadata_ and __doc_ symbols). The failure
 * path of a __tvm_ffi_<name> call is error.c's. */
#include <string.h>

#include "packfn/export.h"

#include "common.h"

/* ---- typed exports called through their raw symbol ---- */

int pf__export_typed_call(pf_object_t** slot, const pf_signature_t* sig, pf_typed_call_t impl,
                          const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  pf_object_t* fn = slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
  if (PF_UNLIKELY(!fn)) {
    if (result)
      *result = pf_any_none();
    if (!slot) {
      PF_ERROR_SET(PF_ERR_VALUE, "pf__export_typed_call: argument slot: expected a pointer, got "
                                 "NULL");
      return -1;
    }
    if (pf_function_create_typed(sig, impl, NULL, NULL, &fn) != 0)
      return -1;
    pf_object_t* expected = NULL;
    if (!__atomic_compare_exchange_n(slot, &expected, fn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      pf_object_release(fn); /* another thread published first: use its object */
      fn = expected;
    }
  }
  return pf_function_call(fn, args, num_args, result);
}

/* ---- TVM-FFI's metadata of an export (export.h's __tvm_ffi__metadata_ and __doc_) ---- */

/* TVM-FFI's type key (its StaticTypeKey names) of a packfn parameter kind's name as
 * pf_param_kind_name gives it, or NULL for a name that is none of them. */
static const char* pf__tvm_schema_key(const char* kind, size_t len) {
  static const char* const map[][2] = {{"None", "None"},
                                       {"int", "int"},
                                       {"float", "float"},
                                       {"bool", "bool"},
                                       {"str", "ffi.String"},
                                       {"bytes", "ffi.Bytes"},
                                       {"Tensor", "ffi.Tensor"},
                                       {"Object", "ffi.Object"},
                                       {"Any", "Any"},
                                       {"dtype", "DataType"},
                                       {"Device", "Device"},
                                       {"void*", "void*"},
                                       {"Function", "ffi.Function"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; ++i)
    if (strlen(map[i][0]) == len && memcmp(map[i][0], kind, len) == 0)
      return map[i][1];
  return NULL;
}

/* Appends {"type":"<key>"} to buf (size PF__SCHEMA_MAX) at *at. */
#define PF__SCHEMA_MAX 4096
static void pf__schema_put(char* buf, size_t* at, const char* text) {
  size_t n = strlen(text);
  if (*at + n < PF__SCHEMA_MAX) {
    memcpy(buf + *at, text, n + 1);
    *at += n;
  }
}

static void pf__schema_type(char* buf, size_t* at, const char* key) {
  pf__schema_put(buf, at, "{\"type\":\"");
  pf__schema_put(buf, at, key);
  pf__schema_put(buf, at, "\"}");
}

/* The kinds of a signature text "f(a: K, b: K) -> R" into keys[] (up to PF_TYPED_MAX_PARAMS,
 * then the result's last); the number of parameters, or -1 when the text does not read so. */
static int pf__signature_kinds(const char* text, const char** keys, const char** result) {
  const char* p = text ? strchr(text, '(') : NULL;
  if (!p)
    return -1;
  int n = 0;
  ++p;
  if (*p == ')')
    ++p;
  else
    for (;;) {
      const char* colon = strstr(p, ": ");
      /* within this parameter: a later one's ": " took its place (review) */
      if (!colon || colon > p + strcspn(p, ",)") || n == PF_TYPED_MAX_PARAMS)
        return -1;
      const char* kind = colon + 2;
      size_t len = strcspn(kind, ",)");
      if (!(keys[n++] = pf__tvm_schema_key(kind, len)))
        return -1;
      p = kind + len;
      if (*p == ')') {
        ++p;
        break;
      }
      if (strncmp(p, ", ", 2) != 0)
        return -1;
      p += 2;
    }
  if (strncmp(p, " -> ", 4) != 0 || !(*result = pf__tvm_schema_key(p + 4, strlen(p + 4))))
    return -1;
  return n;
}

/* TVM-FFI's type schema of a function (as its C++ export macros write it). */
static void pf__tvm_schema(const pf_signature_t* sig, const char* signature, char* buf) {
  const char* keys[PF_TYPED_MAX_PARAMS];
  const char* ret = NULL;
  int n = -1;
  /* a declaration the loader refuses (parameters without their array) gives the bare schema */
  if (sig && sig->num_params >= 0 && sig->num_params <= PF_TYPED_MAX_PARAMS &&
      (sig->params || sig->num_params == 0)) {
    n = sig->num_params;
    ret = pf_param_kind_name(sig->result);
    ret = pf__tvm_schema_key(ret, strlen(ret));
    for (int i = 0; i < n && ret; ++i) {
      const char* kind = pf_param_kind_name(sig->params[i].kind);
      if (!(keys[i] = pf__tvm_schema_key(kind, strlen(kind))))
        n = -1;
    }
    if (!ret)
      n = -1;
  } else {
    n = pf__signature_kinds(signature, keys, &ret);
  }
  size_t at = 0;
  buf[0] = '\0';
  if (n < 0) {
    pf__schema_type(buf, &at, "ffi.Function");
    return;
  }
  pf__schema_put(buf, &at, "{\"type\":\"ffi.Function\",\"named_args\":{\"return\":[");
  pf__schema_type(buf, &at, ret);
  pf__schema_put(buf, &at, "],\"params\":[");
  for (int i = 0; i < n; ++i) {
    if (i)
      pf__schema_put(buf, &at, ",");
    pf__schema_type(buf, &at, keys[i]);
  }
  pf__schema_put(buf, &at, "]}}");
}

int pf__export_tvm_info(int what, const pf_signature_t* sig, const char* signature, const char* doc,
                        pf_any_t* result) {
  *result = pf_any_none();
  if (what == 1) {
    const char* text = sig ? sig->doc : doc;
    return pf_string_from_cstr(text ? text : "", result);
  }
  char schema[PF__SCHEMA_MAX];
  pf__tvm_schema(sig, signature, schema);
  /* {"type_schema": "<schema, its quotes escaped>"} */
  char json[2 * PF__SCHEMA_MAX + 32];
  size_t at = 0;
  memcpy(json, "{\"type_schema\":\"", 16);
  at = 16;
  for (const char* c = schema; *c; ++c) {
    if (*c == '"' || *c == '\\')
      json[at++] = '\\';
    json[at++] = *c;
  }
  memcpy(json + at, "\"}", 3);
  return pf_string_from_cstr(json, result);
}
