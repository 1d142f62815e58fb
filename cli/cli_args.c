/* cli_args.c: the argument literals of `packfn call`: prefixes (str:, int:, ...), booleans, ints,
 * floats, dtypes, devices, .npy files and inline tensors "float32[2,3]:1,2,3,4,5,6". */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "packfn/npy.h"

static int usage(char* msg, size_t size, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int usage(char* msg, size_t size, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
  return -1;
}

/* Turns the raised packfn error into a usage message (the literal was refused): -1. Running out
 * of memory is no mistake of the command line: that error stays raised, -2 (exit 1, not the
 * usage text; review). */
static int usage_from_error(char* msg, size_t size, const char* text) {
  pf_object_t* err = pf_error_take();
  if (err != NULL && strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0) {
    pf_error_raise(err);
    pf_object_release(err);
    return -2;
  }
  snprintf(msg, size, "bad argument '%s': %s", text,
           err != NULL ? pf_error_message(err) : "unknown error");
  pf_object_release(err);
  return -1;
}

static int starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- scalars ---- */

/* 1 with *out set when s is a whole integer: [+-]digits or [+-]0x hexdigits; 0 when s is not
 * shaped like one; -1 when it is, but out of int64's range. */
static int parse_int(const char* s, int64_t* out) {
  const char* p = s + (*s == '+' || *s == '-');
  int base = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? 16 : 10;
  const char* digits = base == 16 ? p + 2 : p;
  if (*digits == '\0')
    return 0;
  for (const char* c = digits; *c; ++c)
    if (!(base == 16 ? (strchr("0123456789abcdefABCDEF", *c) != NULL) : (*c >= '0' && *c <= '9')))
      return 0;
  errno = 0;
  char* end;
  long long v = strtoll(s, &end, base);
  if (errno == ERANGE)
    return -1;
  *out = (int64_t)v;
  return 1;
}

/* 1 with *out set when the whole of s is a float strtod reads ("2.5", "1e-5", "nan", "-inf");
 * 0 when it is not one (nor one behind a blank, any that strtod skips: "\r5" was a float while
 * " 5" was not; review); -1 when finite digits overflow to infinity. */
static int parse_float(const char* s, double* out) {
  if (*s == '\0' || isspace((unsigned char)*s))
    return 0;
  errno = 0;
  char* end;
  double v = strtod(s, &end);
  if (*end != '\0' || end == s)
    return 0;
  if (errno == ERANGE && isinf(v))
    return -1;
  *out = v;
  return 1;
}

static int parse_bool(const char* s, int* out) {
  if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0) {
    *out = 1;
    return 1;
  }
  if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0) {
    *out = 0;
    return 1;
  }
  return 0;
}

/* dtype and device names: pf_dtype_parse / pf_device_parse, without leaving an error raised. */
static int try_dtype(const char* s, DLDataType* out) {
  if (pf_dtype_parse(s, out) == 0)
    return 1;
  pf_error_clear();
  return 0;
}

static int try_device(const char* s, DLDevice* out) {
  if (pf_device_parse(s, out) == 0)
    return 1;
  pf_error_clear();
  return 0;
}

/* ---- tensors ---- */

/* The smallest magnitude that a float32 cannot hold: FLT_MAX plus half its last digit's step
 * (2^103), from where rounding to nearest gives infinity: a finite value at or above it is out
 * of float32's range (converting it is undefined), one below rounds to FLT_MAX at most. */
#define FLOAT32_OVERFLOW 0x1.ffffffp+127

static void release_map(void* ctx) {
  pf_npy_map_release(ctx);
  free(ctx);
}

/* A CPU tensor over a .npy file's data: mapped without a copy when the file allows it
 * (pf_npy_map_file), else read. The tensor owns the map; *map borrows it. */
static int tensor_from_npy(const char* path, pf_object_t** out, const pf_npy_map_t** map, char* msg,
                           size_t size) {
  pf_npy_map_t* m = malloc(sizeof *m);
  if (m == NULL) {
    PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory reading %s", path);
    return -2; /* as usage_from_error: raised, not a usage error */
  }
  if (pf_npy_map_file(path, m, msg, size) != 0) {
    free(m);
    return -1;
  }
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = m->array.data;
  desc.device = PF_DEVICE_CPU;
  desc.ndim = m->array.ndim;
  desc.dtype = m->array.dtype;
  desc.shape = m->array.shape;
  if (pf_tensor_from_dltensor(&desc, m, release_map, out) != 0) {
    release_map(m);
    return usage_from_error(msg, size, path);
  }
  *map = m;
  return 0;
}

/* A zero-filled CPU tensor. */
static int tensor_zeros(const int64_t* shape, int32_t ndim, DLDataType dtype, pf_object_t** out,
                        char* msg, size_t size, const char* text) {
  if (pf_tensor_empty(shape, ndim, dtype, PF_DEVICE_CPU, out) != 0)
    return usage_from_error(msg, size, text);
  DLTensor* t = pf_tensor_dltensor(*out);
  memset(pf_dltensor_data(t), 0, pf_dltensor_nbytes(t));
  return 0;
}

/* Stores one inline value (text [s, e)) as element i of a CPU tensor of dtype t. */
static int store_element(DLTensor* t, int64_t i, const char* s, const char* e, char* msg,
                         size_t size, const char* text) {
  char item[128];
  size_t n = (size_t)(e - s);
  if (n >= sizeof item)
    return usage(msg, size, "bad tensor literal '%s': value %zu characters long", text, n);
  memcpy(item, s, n);
  item[n] = '\0';
  char* p = (char*)pf_dltensor_data(t) + (size_t)i * pf_dtype_bytes(t->dtype);
  DLDataType d = t->dtype;
  int64_t iv;
  double fv;
  int bv;
  if (d.lanes != 1)
    return usage(msg, size, "bad tensor literal '%s': inline values need lanes 1", text);
  if (d.code == PF_DL_BOOL && d.bits == 8) {
    if (parse_bool(item, &bv))
      iv = bv;
    else if (parse_int(item, &iv) != 1 || (iv != 0 && iv != 1))
      return usage(msg, size, "bad tensor literal '%s': '%s' is not a bool (true, false, 0, 1)",
                   text, item);
    *(uint8_t*)p = (uint8_t)iv;
    return 0;
  }
  if ((d.code == PF_DL_INT || d.code == PF_DL_UINT) &&
      (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64)) {
    int r = parse_int(item, &iv);
    if (r == -1 && d.code == PF_DL_UINT && d.bits == 64 && item[0] != '-') {
      /* above INT64_MAX: uint64 has room up to 2^64 - 1 (review: it was "not an integer") */
      const char* digits = item + (item[0] == '+');
      int hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
      errno = 0;
      unsigned long long u = strtoull(digits, NULL, hex ? 16 : 10);
      if (errno != ERANGE) {
        *(uint64_t*)p = (uint64_t)u;
        return 0;
      }
    }
    if (r != 1)
      return usage(msg, size,
                   r == -1 ? "bad tensor literal '%s': %s is out of range for its dtype"
                           : "bad tensor literal '%s': '%s' is not an integer",
                   text, item);
    int is_signed = d.code == PF_DL_INT;
    int64_t lo = !is_signed ? 0 : d.bits == 64 ? INT64_MIN : -((int64_t)1 << (d.bits - 1));
    int64_t hi = d.bits == 64 ? INT64_MAX : ((int64_t)1 << (d.bits - is_signed)) - 1;
    if (iv < lo || iv > hi)
      return usage(msg, size, "bad tensor literal '%s': %s is out of range for its dtype", text,
                   item);
    switch (d.bits) {
    case 8:
      *(uint8_t*)p = (uint8_t)iv;
      break;
    case 16:
      *(uint16_t*)p = (uint16_t)iv;
      break;
    case 32:
      *(uint32_t*)p = (uint32_t)iv;
      break;
    default:
      *(int64_t*)p = iv;
      break;
    }
    return 0;
  }
  if (d.code == PF_DL_FLOAT && (d.bits == 32 || d.bits == 64)) {
    int r = parse_float(item, &fv);
    if (r != 1)
      return usage(msg, size, "bad tensor literal '%s': '%s' is not a %s", text, item,
                   r == 0 ? "number" : "finite number (too large)");
    if (d.bits == 32 && isfinite(fv) && fabs(fv) >= FLOAT32_OVERFLOW)
      return usage(msg, size, "bad tensor literal '%s': '%s' is too large for float32", text, item);
    if (d.bits == 32)
      *(float*)p = (float)fv;
    else
      *(double*)p = fv;
    return 0;
  }
  return usage(msg, size,
               "bad tensor literal '%s': inline values need a bool, int, uint, float32 "
               "or float64 dtype (use a .npy file, or no values for zeros)",
               text);
}

/* Inline tensor "DTYPE[D0,D1,...]" (zeros) or "DTYPE[D0,...]:V0,V1,..." (values, or one value
 * for every element). Returns 1 when text is one, 0 when text is not shaped like one (no '['
 * after a dtype name), -1 (message set) when it is but is malformed. */
static int parse_tensor_literal(const char* text, pf_cli_arg_t* arg, char* msg, size_t size) {
  const char* open = strchr(text, '[');
  if (open == NULL || open == text || (size_t)(open - text) >= 32)
    return 0;
  char name[32];
  memcpy(name, text, (size_t)(open - text));
  name[open - text] = '\0';
  DLDataType dtype;
  if (!try_dtype(name, &dtype))
    return 0;
  const char* close = strchr(open, ']');
  if (close == NULL || (close[1] != '\0' && close[1] != ':'))
    return usage(msg, size,
                 "bad tensor literal '%s': expected DTYPE[SHAPE] or "
                 "DTYPE[SHAPE]:VALUES",
                 text);
  int64_t shape[PF_NPY_MAX_NDIM];
  int32_t ndim = 0;
  for (const char* p = open + 1; p < close;) {
    const char* comma = memchr(p, ',', (size_t)(close - p));
    const char* e = comma != NULL ? comma : close;
    char dim[32];
    int64_t v;
    if (e == p || (size_t)(e - p) >= sizeof dim || ndim == PF_NPY_MAX_NDIM)
      return usage(msg, size, "bad tensor literal '%s': bad shape", text);
    memcpy(dim, p, (size_t)(e - p));
    dim[e - p] = '\0';
    if (parse_int(dim, &v) != 1 || v < 0)
      return usage(msg, size, "bad tensor literal '%s': '%s' is not an extent (an integer >= 0)",
                   text, dim);
    shape[ndim++] = v;
    p = comma != NULL ? comma + 1 : close;
    if (comma != NULL && p == close)
      return usage(msg, size, "bad tensor literal '%s': bad shape", text);
  }
  pf_object_t* tensor;
  if (close[1] == '\0') {
    int r = tensor_zeros(shape, ndim, dtype, &tensor, msg, size, text);
    if (r != 0)
      return r;
    arg->value = pf_any_object(tensor);
    arg->created = 1;
    return 1;
  }
  /* values follow: every element is stored below (or the literal is refused) */
  if (pf_tensor_empty(shape, ndim, dtype, PF_DEVICE_CPU, &tensor) != 0)
    return usage_from_error(msg, size, text);
  arg->value = pf_any_object(tensor);
  DLTensor* t = pf_tensor_dltensor(tensor);
  int64_t numel = pf_dltensor_numel(t), count = 0;
  const char* values = close + 2;
  for (const char* p = values; *values != '\0'; ++count) {
    const char* comma = strchr(p, ',');
    const char* e = comma != NULL ? comma : p + strlen(p);
    if (count < numel && store_element(t, count, p, e, msg, size, text) != 0)
      goto fail;
    if (comma == NULL) {
      ++count;
      break;
    }
    p = comma + 1;
  }
  if (count == 1 && numel > 0) {
    /* one value fills the tensor: copy the part filled so far after itself, doubling it */
    size_t itemsize = pf_dtype_bytes(t->dtype), total = (size_t)numel * itemsize;
    char* data = pf_dltensor_data(t);
    for (size_t done = itemsize; done < total; done *= 2)
      memcpy(data + done, data, done < total - done ? done : total - done);
    arg->filled = 1;
    memcpy(arg->fill, data, itemsize);
  } else if (count != numel) {
    usage(msg, size,
          "bad tensor literal '%s': %lld values for %lld elements (give all of them, "
          "or one to fill)",
          text, (long long)count, (long long)numel);
    goto fail;
  }
  return 1;
fail:
  pf_any_release(&arg->value);
  return -1;
}

/* Where an --out file goes: its folder (device and inode) and its name in that folder. */
typedef struct out_target_s {
  dev_t dev;
  ino_t ino;
  char name[PATH_MAX];
} out_target_t;

/* The target of the --out `path`, a symbolic link followed as pf_npy_output_open follows it;
 * the file itself need not exist. 0, or -1 when it cannot be told (the folder missing, a path
 * naming a folder: pf_npy_output_open then says why). */
static int resolve_target(const char* path, out_target_t* t) {
  char buf[PATH_MAX];
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    if (realpath(path, buf) == NULL)
      return -1;
  } else if (strlen(path) < sizeof buf) {
    strcpy(buf, path);
  } else {
    return -1;
  }
  char* slash = strrchr(buf, '/');
  const char* name = slash != NULL ? slash + 1 : buf;
  if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return -1; /* a folder: refused when it is opened */
  snprintf(t->name, sizeof t->name, "%s", name);
  if (slash == buf)
    slash[1] = '\0'; /* "/name": the root */
  else if (slash != NULL)
    *slash = '\0';
  if (stat(slash != NULL ? buf : ".", &st) != 0)
    return -1;
  t->dev = st.st_dev;
  t->ino = st.st_ino;
  return 0;
}

int pf_cli_same_file(const char* a, const char* b) {
  out_target_t ta, tb;
  struct stat sa, sb;
  return strcmp(a, b) == 0 ||
         (resolve_target(a, &ta) == 0 && resolve_target(b, &tb) == 0 && ta.dev == tb.dev &&
          ta.ino == tb.ino && strcmp(ta.name, tb.name) == 0) ||
         (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
          sa.st_ino == sb.st_ino);
}

/* A tensor written straight into the temporary file of its --out (pf_npy_output_map): like
 * `like` (path missing) or like the file at `path` with its data (path exists, and maps).
 * 0; 1 when this way does not apply (the file needs reading, or the output is mapped already
 * by an argument before): take the ordinary one; -2 with OSError raised. */
static int npy_into_output(const char* path, int exists, pf_object_t* like, pf_npy_output_t* file,
                           pf_cli_arg_t* arg) {
  pf_npy_array_t desc;
  memset(&desc, 0, sizeof desc);
  char err[PF_CLI_MSG_MAX];
  if (file->map != NULL)
    return 1;
  if (exists) {
    pf_npy_map_t m;
    if (pf_npy_map_file(path, &m, err, sizeof err) != 0)
      return 1; /* the ordinary way reports it */
    int maps = m.base != NULL;
    desc = m.array;
    pf_npy_map_release(&m);
    if (!maps)
      return 1;
  } else {
    DLTensor* ref = pf_tensor_dltensor(like);
    if (ref->ndim > PF_NPY_MAX_NDIM || pf_npy_dtype_descr(ref->dtype, err, sizeof err) != 0)
      return 1;
    desc.dtype = ref->dtype;
    desc.ndim = ref->ndim;
    memcpy(desc.shape, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
  }
  void* data;
  if (pf_npy_output_map(file, &desc, exists ? path : NULL, &data, err, sizeof err) != 0) {
    PF_ERROR_SET(PF_ERR_OS, "%s", err);
    return -2;
  }
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device = PF_DEVICE_CPU;
  t.ndim = desc.ndim;
  t.dtype = desc.dtype;
  t.shape = desc.shape;
  pf_object_t* tensor;
  if (pf_tensor_from_dltensor(&t, NULL, NULL, &tensor) != 0) /* the map is the output's */
    return -2;
  arg->value = pf_any_object(tensor);
  arg->created = !exists;
  return 0;
}

/* A .npy argument: read it, or create it like `like` when missing and named by an --out; with
 * `files` (prepared --out files, parallel to outs), an argument named by an --out lives in the
 * temporary file of that output (npy_into_output). An argument naming an --out that an earlier
 * argument named (shared[out] not NULL) is that argument's tensor, so that whichever of them
 * the function writes is what the file receives. */
static int parse_npy(const char* text, const char* path, const pf_cli_parse_t* ctx,
                     pf_cli_arg_t* arg, char* msg, size_t size) {
  if (path[0] == '\0')
    return usage(msg, size, "bad argument '%s': the path is empty", text);
  arg->npy_path = path;
  int out = -1;
  for (int i = 0; i < ctx->num_outs; ++i)
    if (pf_cli_same_file(ctx->outs[i], path)) /* "./y.npy" is --out y.npy (review) */
      out = i;
  arg->named_by_out = out >= 0;
  if (out >= 0 && ctx->shared != NULL && ctx->shared[out] != NULL) {
    pf_object_retain(ctx->shared[out]);
    arg->value = pf_any_object(ctx->shared[out]);
    return 0;
  }
  pf_object_t* like = ctx->like;
  struct stat st;
  int missing = stat(path, &st) != 0 && errno == ENOENT;
  if (missing && arg->named_by_out && like == NULL)
    return usage(msg, size,
                 "%s does not exist, and no tensor argument comes before it to "
                 "create it like",
                 path);
  if (ctx->files != NULL && out >= 0) {
    int r = npy_into_output(path, !missing, like, &ctx->files[out], arg);
    if (r != 1)
      return r;
  }
  pf_object_t* tensor;
  if (missing && arg->named_by_out) {
    DLTensor* ref = pf_tensor_dltensor(like);
    int r = tensor_zeros(ref->shape, ref->ndim, ref->dtype, &tensor, msg, size, text);
    if (r != 0)
      return r;
    arg->value = pf_any_object(tensor);
    arg->created = 1;
    return 0;
  }
  int r = tensor_from_npy(path, &tensor, &arg->map, msg, size);
  if (r != 0)
    return r;
  arg->value = pf_any_object(tensor);
  return 0;
}

static int make_string(const char* s, pf_cli_arg_t* arg, char* msg, size_t size) {
  if (pf_string_from_cstr(s, &arg->value) != 0)
    return usage_from_error(msg, size, s);
  return 0;
}

/* A value after an explicit type prefix (int:, float:, bool:, dtype:, device:). */
static int parse_prefixed(const char* text, pf_cli_arg_t* arg, char* msg, size_t size) {
  const char* v = strchr(text, ':') + 1;
  int64_t iv;
  double fv;
  int bv;
  DLDataType dt;
  DLDevice dev;
  if (starts_with(text, "int:")) {
    int r = parse_int(v, &iv);
    if (r != 1)
      return usage(msg, size, "bad argument '%s': %s", text,
                   r == 0 ? "not an integer" : "out of range for int64");
    arg->value = pf_any_int(iv);
  } else if (starts_with(text, "float:")) {
    int r = parse_float(v, &fv);
    if (r != 1 && parse_int(v, &iv) != 1)
      return usage(msg, size, "bad argument '%s': %s", text,
                   r == 0 ? "not a number" : "out of range for float64");
    arg->value = pf_any_float(r == 1 ? fv : (double)iv);
  } else if (starts_with(text, "bool:")) {
    if (!parse_bool(v, &bv))
      return usage(msg, size, "bad argument '%s': expected true or false", text);
    arg->value = pf_any_bool(bv);
  } else if (starts_with(text, "dtype:")) {
    if (pf_dtype_parse(v, &dt) != 0)
      return usage_from_error(msg, size, text);
    arg->value = pf_any_dtype(dt);
  } else {
    if (pf_device_parse(v, &dev) != 0)
      return usage_from_error(msg, size, text);
    arg->value = pf_any_device(dev);
  }
  return 0;
}

int pf_cli_arg_parse(const char* text, const pf_cli_parse_t* ctx, pf_cli_arg_t* arg, char* msg,
                     size_t msg_size) {
  memset(arg, 0, sizeof *arg);
  arg->text = text;
  arg->value = pf_any_none();
  int64_t iv;
  double fv;
  int bv, r;
  DLDataType dt;
  DLDevice dev;

  /* explicit prefixes first: they force the type */
  if (starts_with(text, "str:"))
    return make_string(text + 4, arg, msg, msg_size);
  if (starts_with(text, "npy:"))
    return parse_npy(text, text + 4, ctx, arg, msg, msg_size);
  if (starts_with(text, "int:") || starts_with(text, "float:") || starts_with(text, "bool:") ||
      starts_with(text, "dtype:") || starts_with(text, "device:"))
    return parse_prefixed(text, arg, msg, msg_size);

  /* then bare literals, in this order */
  if (strcmp(text, "none") == 0 || strcmp(text, "None") == 0)
    return 0;
  if (parse_bool(text, &bv)) {
    arg->value = pf_any_bool(bv);
    return 0;
  }
  if ((r = parse_int(text, &iv)) != 0) {
    if (r < 0)
      return usage(msg, msg_size, "bad argument '%s': integer out of range for int64", text);
    arg->value = pf_any_int(iv);
    return 0;
  }
  if ((r = parse_float(text, &fv)) != 0) {
    if (r < 0)
      return usage(msg, msg_size, "bad argument '%s': float out of range for float64", text);
    arg->value = pf_any_float(fv);
    return 0;
  }
  if ((r = parse_tensor_literal(text, arg, msg, msg_size)) != 0)
    return r < 0 ? r : 0;
  if (ends_with(text, ".npy"))
    return parse_npy(text, text, ctx, arg, msg, msg_size);
  if (try_dtype(text, &dt)) {
    arg->value = pf_any_dtype(dt);
    return 0;
  }
  if (try_device(text, &dev)) {
    arg->value = pf_any_device(dev);
    return 0;
  }
  return make_string(text, arg, msg, msg_size);
}

int pf_cli_arg_changed(const pf_cli_arg_t* arg) {
  DLTensor* t = pf_tensor_dltensor(arg->value.v_obj);
  const unsigned char* data = pf_dltensor_data(t);
  size_t nbytes = pf_dltensor_nbytes(t);
  if (arg->before != NULL)
    return memcmp(arg->before, data, nbytes) != 0;
  if (arg->filled) {
    /* every element equals the fill value when the first does and each equals the next:
     * the bytes equal themselves shifted by one element (one memcmp over the buffer) */
    size_t itemsize = pf_dtype_bytes(t->dtype);
    return nbytes > 0 && (memcmp(data, arg->fill, itemsize) != 0 ||
                          memcmp(data, data + itemsize, nbytes - itemsize) != 0);
  }
  int changed = 0;
  char err[PF_CLI_MSG_MAX];
  if (arg->map != NULL && pf_npy_map_changed(arg->map, &changed, err, sizeof err) != 0) {
    PF_ERROR_SET(PF_ERR_OS, "%s", err);
    return -1;
  }
  return changed;
}

void pf_cli_arg_clear(pf_cli_arg_t* arg) {
  pf_any_release(&arg->value);
  pf_object_release(arg->device_tensor);
  free(arg->before);
  memset(arg, 0, sizeof *arg);
  arg->value = pf_any_none();
}

int pf_cli_args_parse(char** tokens, int n, const char* const* outs, int num_outs,
                      pf_npy_output_t* files, pf_cli_arg_t* args, char* msg, size_t msg_size) {
  pf_object_t** shared = num_outs > 0 ? calloc((size_t)num_outs, sizeof(pf_object_t*)) : NULL;
  if (num_outs > 0 && shared == NULL) { /* no mistake of the command line: exit 1 (review) */
    PF_ERROR_SET(PF_ERR_MEMORY, "out of memory for the table of %d --out files", num_outs);
    return -2;
  }
  pf_cli_parse_t ctx = {outs, num_outs, files, shared, NULL};
  int rc = 0;
  for (int i = 0; i < n; ++i) {
    rc = pf_cli_arg_parse(tokens[i], &ctx, &args[i], msg, msg_size);
    if (rc != 0)
      break;
    if (ctx.like == NULL && args[i].value.type_index == PF_TYPE_TENSOR)
      ctx.like = args[i].value.v_obj;
    /* the first argument naming an --out holds its tensor for the later ones (borrowed: args
     * own it) */
    for (int k = 0; args[i].named_by_out && k < num_outs; ++k)
      if (pf_cli_same_file(outs[k], args[i].npy_path) && shared[k] == NULL)
        shared[k] = args[i].value.v_obj;
  }
  free(shared);
  if (rc == -1) /* a file's name (or a literal) shows its control characters as '?' (cli.md) */
    pf_npy_clean_text(msg);
  return rc;
}
