/* cli_print.c: how the packfn command line shows values (Python-like scalars, NumPy-like
 * tensors, containers), writes tensors to .npy files and reports raised errors. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "packfn/npy.h"

static int stdout_errno; /* the first failed pf_cli_stdout_write's errno, or 0 */

void pf_cli_stdout_write(const void* data, size_t n) {
  if (fwrite(data, 1, n, stdout) != n && stdout_errno == 0)
    stdout_errno = errno != 0 ? errno : EIO;
}

int pf_cli_stdout_error(void) {
  return stdout_errno;
}

int pf_cli_report_raised(const char* fallback) {
  pf_object_t* err = pf_error_take();
  if (err == NULL) {
    fprintf(stderr, "packfn: %s\n", fallback);
    return PF_CLI_EXIT_RAISED;
  }
  size_t need = pf_error_format(err, NULL, 0);
  char* text = malloc(need + 1);
  if (text != NULL) {
    pf_error_format(err, text, need + 1);
    fprintf(stderr, "%s\n", text);
    free(text);
  } else {
    fprintf(stderr, "%s: %s\n", pf_error_kind(err), pf_error_message(err));
  }
  pf_object_release(err);
  return PF_CLI_EXIT_RAISED;
}

/* A host copy of `tensor` (a new reference to it when it already is on the cpu). */
static int host_tensor(pf_object_t* tensor, pf_object_t** out) {
  DLTensor* t = pf_tensor_dltensor(tensor);
  if ((int32_t)t->device.device_type == PF_DEV_CPU) {
    pf_object_retain(tensor);
    *out = tensor;
    return 0;
  }
  return pf_tensor_to_device(tensor, PF_DEVICE_CPU, out);
}

static void print_shape(const int64_t* dims, int32_t ndim, FILE* out) {
  fputc('(', out);
  for (int32_t i = 0; i < ndim; ++i)
    fprintf(out, "%s%" PRId64, i > 0 ? ", " : "", dims[i]);
  fputs(ndim == 1 ? ",)" : ")", out);
}

int pf_cli_print_tensor(pf_object_t* tensor, FILE* out) {
  pf_object_t* host;
  if (host_tensor(tensor, &host) != 0)
    return -1;
  DLTensor* t = pf_tensor_dltensor(host);
  char descr[8];
  int rc = 0;
  if (t->ndim <= PF_NPY_MAX_NDIM && (pf_npy_dtype_descr(t->dtype, descr, sizeof descr) == 0 ||
                                     pf_dtype_equal(t->dtype, PF_DTYPE_BFLOAT16))) {
    errno = 0;
    rc = pf_npy_format_raw(t->dtype, t->ndim, t->shape, t->strides, pf_dltensor_data(t), out);
  } else {
    /* no NumPy form (int4, float8, lanes > 1, more than 32 dimensions): describe it instead */
    char dtype[PF_DTYPE_STR_MAX], device[PF_DEVICE_STR_MAX];
    pf_dtype_format(t->dtype, dtype, sizeof dtype);
    pf_device_format(pf_tensor_dltensor(tensor)->device, device, sizeof device);
    fprintf(out, "<Tensor %s ", dtype);
    print_shape(t->shape, t->ndim, out);
    fprintf(out, " on %s>", device);
  }
  int error = errno; /* what failed: writing (EIO, ENOSPC...) or memory (ENOMEM) */
  pf_object_release(host);
  if (rc != 0)
    PF_ERROR_SET(error == ENOMEM ? PF_ERR_MEMORY : PF_ERR_OS, "packfn: cannot print a tensor: %s",
                 error ? strerror(error) : "write error");
  return rc;
}

int pf_cli_output_open(const char* path, pf_npy_output_t* out) {
  char err[PF_CLI_MSG_MAX];
  if (pf_npy_output_open(path, out, err, sizeof err) != 0) {
    PF_ERROR_SET(PF_ERR_OS, "%s", err);
    return -1;
  }
  return 0;
}

int pf_cli_output_write(pf_npy_output_t* out, pf_object_t* tensor) {
  pf_object_t* host;
  if (host_tensor(tensor, &host) != 0)
    return -1;
  DLTensor* t = pf_tensor_dltensor(host);
  char descr[8], dtype[PF_DTYPE_STR_MAX];
  if (t->ndim > PF_NPY_MAX_NDIM) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: cannot write a tensor of %d dimensions (.npy has %d at most)",
                 out->path, (int)t->ndim, PF_NPY_MAX_NDIM);
    pf_object_release(host);
    return -1;
  }
  if (pf_npy_dtype_descr(t->dtype, descr, sizeof descr) != 0) {
    pf_dtype_format(t->dtype, dtype, sizeof dtype);
    PF_ERROR_SET(PF_ERR_VALUE, "%s: cannot write a tensor of dtype %s: it has no .npy equivalent",
                 out->path, dtype);
    pf_object_release(host);
    return -1;
  }
  if (!pf_dltensor_is_contiguous(t)) {
    /* a strided view (a transpose, a slice): its elements in C order, copied */
    pf_object_t* copy;
    int rc = pf_tensor_to_device(host, PF_DEVICE_CPU, &copy);
    pf_object_release(host);
    if (rc != 0)
      return -1;
    host = copy;
    t = pf_tensor_dltensor(host);
  }
  pf_npy_array_t arr;
  memset(&arr, 0, sizeof arr);
  arr.dtype = t->dtype;
  arr.ndim = t->ndim;
  memcpy(arr.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  arr.data = pf_dltensor_data(t);
  arr.nbytes = pf_dltensor_nbytes(t);
  char err[PF_CLI_MSG_MAX];
  int rc = pf_npy_output_write(out, &arr, err, sizeof err);
  if (rc != 0)
    PF_ERROR_SET(PF_ERR_OS, "%s", err);
  pf_object_release(host);
  return rc;
}

/* A float as Python's repr: the fewest significant digits that read back the same, in fixed
 * notation for exponents -4..15 and scientific otherwise ("10.0", "1e-05", "1e+16"). */
static void print_float(double v, FILE* out) {
  if (isnan(v)) {
    fputs("nan", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", out);
    return;
  }
  char buf[400];
  int digits = 1;
  for (; digits < 17; ++digits) {
    snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  int exponent = atoi(strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 16) {
    fputs(buf, out);
    return;
  }
  int decimals = digits - 1 - exponent;
  if (decimals < 0)
    decimals = 0;
  fprintf(out, "%.*f%s", decimals, v, decimals == 0 ? ".0" : "");
}

static void print_quoted(const char* data, size_t size, FILE* out, char prefix) {
  if (prefix)
    fputc(prefix, out);
  fputc('\'', out);
  for (size_t i = 0; i < size; ++i) {
    unsigned char c = (unsigned char)data[i];
    if (c == '\'' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '\t')
      fputs("\\t", out);
    else if (c == '\r')
      fputs("\\r", out);
    else if (c < 0x20 || c == 0x7f || (prefix && c >= 0x80))
      fprintf(out, "\\x%02x", c);
    else
      fputc(c, out);
  }
  fputc('\'', out);
}

static int print_any(const pf_any_t* v, FILE* out, int nested);

static int print_array(const pf_object_t* array, FILE* out) {
  const pf_any_t* items;
  size_t count;
  if (pf_array_items(array, &items, &count) != 0)
    return -1;
  fputc('[', out);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      fputs(", ", out);
    if (print_any(&items[i], out, 1) != 0)
      return -1;
  }
  fputc(']', out);
  return 0;
}

static int print_map(const pf_object_t* map, FILE* out) {
  pf_map_iter_t it;
  const pf_any_t *key, *value;
  if (pf_map_iter_init(map, &it) != 0)
    return -1;
  fputc('{', out);
  for (int first = 1; pf_map_iter_next(&it, &key, &value) == 1; first = 0) {
    fputs(first ? "" : ", ", out);
    if (print_any(key, out, 1) != 0)
      return -1;
    fputs(": ", out);
    if (print_any(value, out, 1) != 0)
      return -1;
  }
  fputc('}', out);
  return 0;
}

static int print_any(const pf_any_t* v, FILE* out, int nested) {
  char buf[PF_DTYPE_STR_MAX];
  const char* data;
  size_t size;
  switch (v->type_index) {
  case PF_TYPE_NONE:
    fputs("None", out);
    return 0;
  case PF_TYPE_BOOL:
    fputs(v->v_int64 ? "True" : "False", out);
    return 0;
  case PF_TYPE_INT:
    fprintf(out, "%" PRId64, v->v_int64);
    return 0;
  case PF_TYPE_FLOAT:
    print_float(v->v_float64, out);
    return 0;
  case PF_TYPE_DTYPE:
    pf_dtype_format(v->v_dtype, buf, sizeof buf);
    fputs(buf, out);
    return 0;
  case PF_TYPE_DEVICE:
    pf_device_format(v->v_device, buf, sizeof buf);
    fputs(buf, out);
    return 0;
  case PF_TYPE_OPAQUE_PTR:
    fprintf(out, "<pointer %p>", v->v_ptr);
    return 0;
  case PF_TYPE_RAW_STR:
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_STR:
    if (pf_any_as_str(v, &data, &size) != 0)
      return -1;
    if (nested)
      print_quoted(data, size, out, 0);
    else
      fwrite(data, 1, size, out);
    return 0;
  case PF_TYPE_BYTE_ARRAY_PTR:
  case PF_TYPE_SMALL_BYTES:
  case PF_TYPE_BYTES:
    if (pf_any_as_bytes(v, &data, &size) != 0)
      return -1;
    print_quoted(data, size, out, 'b');
    return 0;
  case PF_TYPE_TENSOR:
    return pf_cli_print_tensor(v->v_obj, out);
  case PF_TYPE_ARRAY:
    return print_array(v->v_obj, out);
  case PF_TYPE_MAP:
    return print_map(v->v_obj, out);
  case PF_TYPE_SHAPE: {
    const int64_t* dims;
    size_t ndim;
    if (pf_shape_data(v->v_obj, &dims, &ndim) != 0)
      return -1;
    print_shape(dims, (int32_t)ndim, out);
    return 0;
  }
  case PF_TYPE_ERROR:
    fprintf(out, "%s: %s", pf_error_kind(v->v_obj), pf_error_message(v->v_obj));
    return 0;
  case PF_TYPE_FUNCTION: {
    const char* sig = pf_function_signature(v->v_obj);
    fprintf(out, "<function%s%s>", sig != NULL ? " " : "", sig != NULL ? sig : "");
    return 0;
  }
  default:
    fprintf(out, "<%s object>", pf_any_type_name(v));
    return 0;
  }
}

int pf_cli_print_value(const pf_any_t* value, FILE* out) {
  return print_any(value, out, 0);
}
