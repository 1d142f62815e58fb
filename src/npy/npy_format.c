/* npy_format.c: printing arrays the way NumPy's repr() does (default print options), for .npy
 * arrays and for any strided array in host memory. */
#include "npy_private.h"

#include <inttypes.h>
#include <math.h> /* INFINITY and NAN only: no libm needed */
#include <stdlib.h>
#include <string.h>

/* ---- printing: floating point ------------------------------------------------------------- */

/* A binary floating-point format: precision in bits, exponent range, and NumPy's
 * finfo(dtype).precision (decimal digits), which sets where printing turns scientific. */
typedef struct {
  int bits;
  int emin;
  int emax;
  int decimal_digits;
} float_spec_t;

static const float_spec_t k_float16 = {11, -14, 15, 3};
static const float_spec_t k_bfloat16 = {8, -126, 127, 2};
static const float_spec_t k_float32 = {24, -126, 127, 6};
static const float_spec_t k_float64 = {53, -1022, 1023, 15};

static uint64_t double_bits(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static int is_nan(double v) {
  return v != v;
}
static int is_finite(double v) {
  return !is_nan(v) && !is_nan(v - v);
}
static int sign_bit(double v) {
  return (int)(double_bits(v) >> 63);
}

/* 2**k for -1022 <= k <= 1023, exactly. */
static double pow2(int k) {
  uint64_t u = (uint64_t)(k + 1023) << 52;
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* Rounds v to the nearest value of format fs (ties to even), as converting to that type would,
 * overflowing to infinity: integer arithmetic on the bits, so no libm and no UB. */
static double round_to_format(double v, const float_spec_t* fs) {
  uint64_t u = double_bits(v);
  int biased = (int)((u >> 52) & 0x7ff);
  if (fs->bits == 53 || biased == 0x7ff || (u << 1) == 0) {
    return v;
  }
  if (biased == 0) {
    return sign_bit(v) ? -0.0 : 0.0; /* double subnormals are far below every fs->emin */
  }
  uint64_t sig = (u & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
  int e = biased - 1023; /* |v| = sig * 2**(e - 52) */
  int quantum = (e < fs->emin ? fs->emin : e) - (fs->bits - 1);
  int shift = quantum - (e - 52);
  if (shift >= 54) {
    return sign_bit(v) ? -0.0 : 0.0;
  }
  if (shift > 0) {
    uint64_t rest = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    sig >>= shift;
    if (rest > half || (rest == half && (sig & 1))) {
      sig++;
    }
  } else {
    quantum = e - 52;
  }
  double r = (double)sig * pow2(quantum);
  double max = (pow2(fs->bits) - 1) * pow2(fs->emax - fs->bits + 1);
  if (r > max) {
    r = INFINITY;
  }
  return sign_bit(v) ? -r : r;
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  double m = h & 0x3ff;
  double v = e == 0x1f ? (m != 0 ? NAN : INFINITY)
             : e == 0  ? m * pow2(-24)
                       : (m + 1024) * pow2(e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Digits of a finite value: |v| = d[0].d[1..n-1] * 10**exp, d without trailing zeros. */
typedef struct {
  int negative;
  int n;
  int exp;
  char d[24]; /* n digits, not NUL-terminated; room for one more */
} decimal_t;

/* Parses printf's "%.*e" output, dropping trailing zeros unless keep_zeros; the decimal point
 * may be any character (locales). */
static void decimal_parse(const char* s, decimal_t* out, int keep_zeros) {
  out->negative = *s == '-';
  out->n = 0;
  s += out->negative;
  while (*s != '\0' && *s != 'e' && *s != 'E') {
    if (*s >= '0' && *s <= '9' && out->n + 1 < (int)sizeof out->d) {
      out->d[out->n++] = *s;
    }
    s++;
  }
  out->exp = *s != '\0' ? (int)strtol(s + 1, NULL, 10) : 0;
  while (!keep_zeros && out->n > 1 && out->d[out->n - 1] == '0') {
    out->n--;
  }
}

/* The shortest digits that read back as v in format fs, as NumPy's Dragon4 prints them, with at
 * most max_frac digits after the first (then rounded, as Dragon4 rounds at its cutoff). */
static void decimal_shortest(double v, const float_spec_t* fs, int max_frac, decimal_t* out) {
  char s[48];
  for (int prec = 0; prec <= max_frac && prec < 17; prec++) {
    snprintf(s, sizeof s, "%.*e", prec, v);
    double back = fs->bits == 24 ? (double)strtof(s, NULL) : strtod(s, NULL);
    if (round_to_format(back, fs) == v) {
      decimal_parse(s, out, 0);
      return;
    }
  }
  snprintf(s, sizeof s, "%.*e", max_frac < 16 ? max_frac : 16, v);
  decimal_parse(s, out, 0);
}

/* How one set of floats is printed (NumPy's FloatingFormat, floatmode 'maxprec', precision 8). */
typedef struct {
  const float_spec_t* fs;
  int sign_plus;  /* print '+' on non-negative values (the imaginary part) */
  int exp_format; /* scientific notation */
  int precision;  /* scientific: digits after the point, zero padded */
  int pad_left;   /* characters before the point */
  int pad_right;  /* positional: characters after it, space padded */
  int exp_size;   /* scientific: exponent digits */
  int any_finite; /* statistics gathered before the sizes: */
  int any_nonfinite;
  int any_neg_inf;
  int any_nonzero;
  double max_abs;
  double min_abs;
} float_format_t;

#define NPY_PRECISION 8 /* numpy.get_printoptions()['precision'] */

/* Splits v into "[-]int" and "frac" digits, positional or scientific (then *exp is set). */
static void float_parts(const float_format_t* f, double v, char* ip, size_t ip_size, char* fp,
                        size_t fp_size, int* exp) {
  decimal_t dec;
  int scientific = f->exp_format;
  decimal_shortest(v, f->fs, scientific ? NPY_PRECISION : 17, &dec);
  const char* sign = dec.negative ? "-" : f->sign_plus ? "+" : "";
  if (!scientific && dec.n - 1 - dec.exp > NPY_PRECISION) {
    /* Too many digits after the point: round there, as Dragon4's cutoff does. */
    char s[400];
    snprintf(s, sizeof s, "%.*f", NPY_PRECISION, v < 0 ? -v : v);
    size_t int_len = strspn(s, "0123456789");
    size_t frac_len = strlen(s + int_len + 1);
    while (frac_len > 0 && s[int_len + frac_len] == '0') {
      frac_len--;
    }
    snprintf(ip, ip_size, "%s%.*s", sign, (int)int_len, s);
    snprintf(fp, fp_size, "%.*s", (int)frac_len, s + int_len + 1);
    return;
  }
  if (scientific) {
    snprintf(ip, ip_size, "%s%c", sign, dec.d[0]);
    snprintf(fp, fp_size, "%.*s", dec.n - 1, dec.d + 1);
    *exp = dec.exp;
    return;
  }
  size_t len = (size_t)snprintf(ip, ip_size, "%s", sign);
  if (dec.exp < 0) {
    snprintf(ip + len, ip_size - len, "0");
    size_t flen = 0;
    for (int i = 0; i < -dec.exp - 1 && flen + 1 < fp_size; i++) {
      fp[flen++] = '0';
    }
    snprintf(fp + flen, fp_size - flen, "%.*s", dec.n, dec.d);
    return;
  }
  for (int i = 0; i <= dec.exp && len + 1 < ip_size; i++) {
    ip[len++] = i < dec.n ? dec.d[i] : '0';
  }
  ip[len] = '\0';
  snprintf(fp, fp_size, "%.*s", dec.n > dec.exp + 1 ? dec.n - dec.exp - 1 : 0, dec.d + dec.exp + 1);
}

static int count_digits(int v) {
  int n = 1;
  for (v = v < 0 ? -v : v; v >= 10; v /= 10) {
    n++;
  }
  return n;
}

/* First pass: the range of the values. */
static void float_format_observe(float_format_t* f, double v) {
  if (!is_finite(v)) {
    f->any_nonfinite = 1;
    f->any_neg_inf |= !is_nan(v) && v < 0;
    return;
  }
  f->any_finite = 1;
  double a = v < 0 ? -v : v;
  if (a != 0) {
    f->max_abs = f->any_nonzero && f->max_abs > a ? f->max_abs : a;
    f->min_abs = f->any_nonzero && f->min_abs < a ? f->min_abs : a;
    f->any_nonzero = 1;
  }
}

/* Between the passes: scientific when the values span too much, compared in the element type
 * as NumPy does (its Python-float constants take the array's dtype). */
static void float_format_choose(float_format_t* f) {
  if (!f->any_nonzero) {
    return;
  }
  double cutoff = 1;
  for (int i = 0; i < (f->fs->decimal_digits < 8 ? f->fs->decimal_digits : 8); i++) {
    cutoff *= 10;
  }
  f->exp_format = f->max_abs >= round_to_format(cutoff, f->fs) ||
                  f->min_abs < round_to_format(0.0001, f->fs) ||
                  round_to_format(f->max_abs / f->min_abs, f->fs) > 1000.0;
}

/* Second pass: the widths. */
static void float_format_measure(float_format_t* f, double v) {
  if (!is_finite(v)) {
    return;
  }
  char ip[400];
  char fp[400];
  int exp = 0;
  float_parts(f, v, ip, sizeof ip, fp, sizeof fp, &exp);
  int il = (int)strlen(ip);
  int fl = (int)strlen(fp);
  f->pad_left = il > f->pad_left ? il : f->pad_left;
  if (f->exp_format) {
    int ed = count_digits(exp) < 2 ? 2 : count_digits(exp);
    f->precision = fl > f->precision ? fl : f->precision;
    f->exp_size = ed > f->exp_size ? ed : f->exp_size;
  } else {
    f->pad_right = fl > f->pad_right ? fl : f->pad_right;
  }
}

/* After the passes: room for nan and inf. */
static void float_format_finish(float_format_t* f) {
  if (f->exp_format) {
    f->pad_right = f->exp_size + 2 + f->precision;
  }
  if (f->any_nonfinite) {
    int offset = f->pad_right + 1;
    int inf_len = 3 + (f->sign_plus || f->any_neg_inf);
    f->pad_left = f->pad_left > 3 - offset ? f->pad_left : 3 - offset;
    f->pad_left = f->pad_left > inf_len - offset ? f->pad_left : inf_len - offset;
  }
}

/* Appends `pad` copies of `fill` and then s to the word out[0..*len), which stays
 * NUL-terminated and is cut at size - 1. */
static void word_append(char* out, size_t size, size_t* len, char fill, int pad, const char* s) {
  for (; pad > 0 && *len + 1 < size; pad--) {
    out[(*len)++] = fill;
  }
  for (; *s != '\0' && *len + 1 < size; s++) {
    out[(*len)++] = *s;
  }
  out[*len] = '\0';
}

static void float_format_print(const float_format_t* f, double v, char* out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  if (!is_finite(v)) {
    const char* s = is_nan(v)      ? (f->sign_plus ? "+nan" : "nan")
                    : v < 0        ? "-inf"
                    : f->sign_plus ? "+inf"
                                   : "inf";
    word_append(out, size, &len, ' ', f->pad_left + f->pad_right + 1 - (int)strlen(s), s);
    return;
  }
  char ip[400];
  if (f->exp_format) {
    /* Dragon4's min_digits: digits past the unique ones are the value's own, rounded, which is
     * what printf prints. */
    char s[48];
    char exp[16];
    decimal_t dec;
    snprintf(s, sizeof s, "%.*e", f->precision, v);
    decimal_parse(s, &dec, 1);
    snprintf(ip, sizeof ip, "%s%c", dec.negative ? "-" : f->sign_plus ? "+" : "", dec.d[0]);
    dec.d[dec.n] = '\0';
    snprintf(exp, sizeof exp, "%d", dec.exp < 0 ? -dec.exp : dec.exp);
    word_append(out, size, &len, ' ', f->pad_left - (int)strlen(ip), ip);
    word_append(out, size, &len, ' ', 0, ".");
    word_append(out, size, &len, ' ', 0, dec.d + 1);
    word_append(out, size, &len, ' ', 0, dec.exp < 0 ? "e-" : "e+");
    word_append(out, size, &len, '0', f->exp_size - (int)strlen(exp), exp);
    return;
  }
  char fp[400];
  int exp = 0;
  float_parts(f, v, ip, sizeof ip, fp, sizeof fp, &exp);
  word_append(out, size, &len, ' ', f->pad_left - (int)strlen(ip), ip);
  word_append(out, size, &len, ' ', 0, ".");
  word_append(out, size, &len, ' ', 0, fp);
  word_append(out, size, &len, ' ', f->pad_right - (int)strlen(fp), "");
}

/* ---- printing: arrays --------------------------------------------------------------------- */

#define NPY_LINE_WIDTH 75   /* numpy.get_printoptions()['linewidth'] */
#define NPY_THRESHOLD  1000 /* more elements than this are summarised */
#define NPY_EDGE_ITEMS 3    /* elements kept at each end of a summarised axis */
#define NPY_WORD_MAX   256  /* longest printed element, with room to spare */

typedef enum { ELEM_BOOL, ELEM_INT, ELEM_UINT, ELEM_FLOAT, ELEM_COMPLEX } elem_kind_t;

/* A growing output string that knows the column it is at. */
typedef struct {
  char* p;
  size_t len;
  size_t cap;
  size_t line_start;
  int out_of_memory;
} strbuf_t;

static void sb_append(strbuf_t* b, const char* s, size_t n) {
  if (b->out_of_memory) {
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) {
      cap *= 2;
    }
    char* p = realloc(b->p, cap);
    if (p == NULL) {
      b->out_of_memory = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  for (size_t i = 0; i < n; i++) {
    b->p[b->len++] = s[i];
    if (s[i] == '\n') {
      b->line_start = b->len;
    }
  }
  b->p[b->len] = '\0';
}

static void sb_puts(strbuf_t* b, const char* s) {
  sb_append(b, s, strlen(s));
}

static void sb_spaces(strbuf_t* b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sb_append(b, " ", 1);
  }
}

static size_t sb_column(const strbuf_t* b) {
  return b->len - b->line_start;
}

/* What the printer needs, gathered once. */
typedef struct {
  elem_kind_t kind;
  size_t itemsize;
  const char* dtype_name;
  int dtype_implied; /* NumPy's repr leaves out dtype= for float64, int64, complex128, bool */
  int32_t ndim;
  const int64_t* shape;
  int64_t strides[PF_NPY_MAX_NDIM];
  const unsigned char* data;
  int summarize;
  float_format_t re; /* floats, and the real parts of complex values */
  float_format_t im; /* the imaginary parts */
  int any_int;
  int64_t int_min, int_max;
  uint64_t uint_max;
  int int_width;
  strbuf_t out;
} printer_t;

static int printer_init_type(printer_t* p, DLDataType dt) {
  static const struct {
    uint8_t code;
    uint8_t bits;
    elem_kind_t kind;
    const char* name;
    const float_spec_t* fs;
    int implied;
  } types[] = {
      {PF_NPY_DTYPE_CODE_BOOL, 8, ELEM_BOOL, "bool", NULL, 1},
      {kDLInt, 8, ELEM_INT, "int8", NULL, 0},
      {kDLInt, 16, ELEM_INT, "int16", NULL, 0},
      {kDLInt, 32, ELEM_INT, "int32", NULL, 0},
      {kDLInt, 64, ELEM_INT, "int64", NULL, 1},
      {kDLUInt, 8, ELEM_UINT, "uint8", NULL, 0},
      {kDLUInt, 16, ELEM_UINT, "uint16", NULL, 0},
      {kDLUInt, 32, ELEM_UINT, "uint32", NULL, 0},
      {kDLUInt, 64, ELEM_UINT, "uint64", NULL, 0},
      {kDLFloat, 16, ELEM_FLOAT, "float16", &k_float16, 0},
      {kDLFloat, 32, ELEM_FLOAT, "float32", &k_float32, 0},
      {kDLFloat, 64, ELEM_FLOAT, "float64", &k_float64, 1},
      {kDLBfloat, 16, ELEM_FLOAT, "bfloat16", &k_bfloat16, 0},
      {kDLComplex, 64, ELEM_COMPLEX, "complex64", &k_float32, 0},
      {kDLComplex, 128, ELEM_COMPLEX, "complex128", &k_float64, 1},
  };
  if (dt.lanes != 1) {
    return -1;
  }
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    if (types[i].code == dt.code && types[i].bits == dt.bits) {
      p->kind = types[i].kind;
      p->itemsize = dt.bits / 8u;
      p->dtype_name = types[i].name;
      p->dtype_implied = types[i].implied;
      p->re.fs = p->im.fs = types[i].fs;
      p->im.sign_plus = 1;
      return 0;
    }
  }
  return -1;
}

/* One element as a double (floats) or a pair of them (complex). */
static double load_float(const unsigned char* at, size_t size, int code) {
  if (size == 2) {
    uint16_t h;
    memcpy(&h, at, 2);
    if (code == kDLBfloat) {
      uint32_t u = (uint32_t)h << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    return half_to_double(h);
  }
  if (size == 4) {
    float f;
    memcpy(&f, at, 4);
    return f;
  }
  double d;
  memcpy(&d, at, 8);
  return d;
}

static int64_t load_int(const unsigned char* at, size_t size) {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  switch (size) {
  case 1:
    memcpy(&i8, at, 1);
    return i8;
  case 2:
    memcpy(&i16, at, 2);
    return i16;
  case 4:
    memcpy(&i32, at, 4);
    return i32;
  default:
    memcpy(&i64, at, 8);
    return i64;
  }
}

static uint64_t load_uint(const unsigned char* at, size_t size) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (size) {
  case 1:
    memcpy(&u8, at, 1);
    return u8;
  case 2:
    memcpy(&u16, at, 2);
    return u16;
  case 4:
    memcpy(&u32, at, 4);
    return u32;
  default:
    memcpy(&u64, at, 8);
    return u64;
  }
}

typedef enum { PASS_OBSERVE, PASS_MEASURE } pass_t;

static void printer_visit_element(printer_t* p, const unsigned char* at, pass_t pass, int code) {
  switch (p->kind) {
  case ELEM_FLOAT:
  case ELEM_COMPLEX: {
    size_t part = p->kind == ELEM_COMPLEX ? p->itemsize / 2 : p->itemsize;
    double re = load_float(at, part, code);
    double im = p->kind == ELEM_COMPLEX ? load_float(at + part, part, code) : 0;
    if (pass == PASS_OBSERVE) {
      float_format_observe(&p->re, re);
      float_format_observe(&p->im, im);
    } else {
      float_format_measure(&p->re, re);
      float_format_measure(&p->im, im);
    }
    break;
  }
  case ELEM_INT: {
    int64_t v = load_int(at, p->itemsize);
    p->int_min = p->any_int && p->int_min < v ? p->int_min : v;
    p->int_max = p->any_int && p->int_max > v ? p->int_max : v;
    p->any_int = 1;
    break;
  }
  case ELEM_UINT: {
    uint64_t v = load_uint(at, p->itemsize);
    p->uint_max = p->uint_max > v ? p->uint_max : v;
    break;
  }
  case ELEM_BOOL:
    break;
  }
}

/* Visits the elements that will be printed: all of them, or the corners of a summarised array
 * (NumPy picks its formats from those alone). */
static void printer_visit(printer_t* p, int32_t axis, int64_t offset, pass_t pass, int code) {
  if (axis == p->ndim) {
    printer_visit_element(p, p->data + offset * (int64_t)p->itemsize, pass, code);
    return;
  }
  int64_t n = p->shape[axis];
  int summarize = p->summarize && n > 2 * NPY_EDGE_ITEMS;
  for (int64_t i = 0; i < n; i++) {
    if (summarize && i == NPY_EDGE_ITEMS) {
      i = n - NPY_EDGE_ITEMS;
    }
    printer_visit(p, axis + 1, offset + i * p->strides[axis], pass, code);
  }
}

static void printer_word(const printer_t* p, const unsigned char* at, int code, char* out,
                         size_t size) {
  switch (p->kind) {
  case ELEM_BOOL:
    snprintf(out, size, "%s", *at ? (p->ndim > 0 ? " True" : "True") : "False");
    break;
  case ELEM_INT:
    snprintf(out, size, "%*" PRId64, p->int_width, load_int(at, p->itemsize));
    break;
  case ELEM_UINT:
    snprintf(out, size, "%*" PRIu64, p->int_width, load_uint(at, p->itemsize));
    break;
  case ELEM_FLOAT:
    float_format_print(&p->re, load_float(at, p->itemsize, code), out, size);
    break;
  case ELEM_COMPLEX: {
    size_t part = p->itemsize / 2;
    char im[NPY_WORD_MAX];
    float_format_print(&p->re, load_float(at, part, code), out, size);
    float_format_print(&p->im, load_float(at + part, part, code), im, sizeof im);
    size_t used = strlen(im);
    while (used > 0 && im[used - 1] == ' ') {
      used--;
    }
    size_t len = strlen(out);
    /* the 'j' goes before the imaginary part's trailing padding */
    snprintf(out + len, size - len, "%.*sj%s", (int)used, im, im + used);
    break;
  }
  }
}

/* Appends a word to the current line, first wrapping if it would pass `width` (NumPy's
 * _extendLine: never wraps a line that holds nothing but its indent). */
static void printer_extend_line(printer_t* p, const char* word, size_t indent, size_t width) {
  size_t column = sb_column(&p->out);
  if (column + strlen(word) > width && column > indent) {
    while (p->out.len > p->out.line_start && p->out.p[p->out.len - 1] == ' ') {
      p->out.len--;
    }
    sb_puts(&p->out, "\n");
    sb_spaces(&p->out, indent);
  }
  sb_puts(&p->out, word);
}

/* NumPy's _formatArray: prints the sub-array at `axis`; the caller has put the cursor at column
 * `indent` - 1 for its '['. Rows wrap at `width`; outer axes put one more blank line between
 * blocks for each axis they have below. */
static void printer_print(printer_t* p, int32_t axis, int64_t offset, size_t indent, size_t width,
                          int code) {
  char word[NPY_WORD_MAX];
  if (axis == p->ndim) {
    printer_word(p, p->data + offset * (int64_t)p->itemsize, code, word, sizeof word);
    sb_puts(&p->out, word);
    return;
  }
  int64_t n = p->shape[axis];
  int summarize = p->summarize && n > 2 * NPY_EDGE_ITEMS;
  sb_puts(&p->out, "[");
  for (int64_t i = 0; i < n; i++) {
    int last_axis = axis == p->ndim - 1;
    if (!last_axis && i > 0) {
      sb_spaces(&p->out, indent);
    }
    if (summarize && i == NPY_EDGE_ITEMS) {
      if (last_axis) {
        printer_extend_line(p, "...", indent, width - 1);
        sb_puts(&p->out, ", ");
      } else {
        sb_puts(&p->out, "...,");
        for (int32_t k = axis; k < p->ndim - 1; k++) {
          sb_puts(&p->out, "\n");
        }
        sb_spaces(&p->out, indent);
      }
      i = n - NPY_EDGE_ITEMS;
    }
    int64_t at = offset + i * p->strides[axis];
    if (last_axis) {
      printer_word(p, p->data + at * (int64_t)p->itemsize, code, word, sizeof word);
      printer_extend_line(p, word, indent, width - 1);
      if (i + 1 < n) {
        sb_puts(&p->out, ", ");
      }
    } else {
      printer_print(p, axis + 1, at, indent + 1, width - 1, code);
      if (i + 1 < n) {
        sb_puts(&p->out, ",");
        for (int32_t k = axis; k < p->ndim - 1; k++) {
          sb_puts(&p->out, "\n");
        }
      }
    }
  }
  sb_puts(&p->out, "]");
}

/* Builds "array(...)" into p->out; count is the number of elements. */
static void printer_repr(printer_t* p, uint64_t count, int code) {
  static const char prefix[] = "array(";
  const size_t prefix_len = sizeof prefix - 1;
  sb_puts(&p->out, prefix);
  if (count == 0) {
    sb_puts(&p->out, "[]");
  } else {
    printer_visit(p, 0, 0, PASS_OBSERVE, code);
    float_format_choose(&p->re);
    float_format_choose(&p->im);
    printer_visit(p, 0, 0, PASS_MEASURE, code);
    float_format_finish(&p->re);
    float_format_finish(&p->im);
    if (p->kind == ELEM_INT) {
      char a[24];
      char b[24];
      int la = snprintf(a, sizeof a, "%" PRId64, p->int_min);
      int lb = snprintf(b, sizeof b, "%" PRId64, p->int_max);
      p->int_width = la > lb ? la : lb;
    } else if (p->kind == ELEM_UINT) {
      char a[24];
      p->int_width = snprintf(a, sizeof a, "%" PRIu64, p->uint_max);
    }
    /* the suffix ")" or "," takes one column of the line width */
    printer_print(p, 0, 0, prefix_len + 1, NPY_LINE_WIDTH - 1, code);
  }
  char extras[PF_NPY_MAX_NDIM * 22 + 64] = "";
  size_t len = 0;
  if ((count == 0 && p->ndim != 1) || count > NPY_THRESHOLD) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    pf__npy_format_shape(shape, sizeof shape, p->shape, p->ndim);
    len += (size_t)snprintf(extras, sizeof extras, "shape=%s", shape);
  }
  if (!p->dtype_implied || count == 0) {
    snprintf(extras + len, sizeof extras - len, "%sdtype=%s", len > 0 ? ", " : "", p->dtype_name);
  }
  if (extras[0] == '\0') {
    sb_puts(&p->out, ")");
    return;
  }
  sb_puts(&p->out, ",");
  if (sb_column(&p->out) + strlen(extras) + 2 > NPY_LINE_WIDTH) {
    sb_puts(&p->out, "\n");
    sb_spaces(&p->out, prefix_len);
  } else {
    sb_puts(&p->out, " ");
  }
  sb_puts(&p->out, extras);
  sb_puts(&p->out, ")");
}

int pf_npy_format_raw(DLDataType dtype, int32_t ndim, const int64_t* shape, const int64_t* strides,
                      const void* data, FILE* out) {
  printer_t p;
  memset(&p, 0, sizeof p);
  if (out == NULL || ndim < 0 || ndim > PF_NPY_MAX_NDIM || (ndim > 0 && shape == NULL) ||
      printer_init_type(&p, dtype) != 0) {
    return -1;
  }
  /* The element count saturates: all that matters is whether it passes the threshold. */
  /* The count stops at INT64_MAX: past the threshold only that matters, and such an array can
   * only be a broadcast view with explicit strides. */
  uint64_t count = 1;
  int any_zero = 0;
  int fits = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      return -1;
    }
    any_zero |= shape[i] == 0;
  }
  for (int32_t i = 0; i < ndim && !any_zero && fits; i++) {
    fits = count <= (uint64_t)INT64_MAX / (uint64_t)shape[i];
    count = fits ? count * (uint64_t)shape[i] : (uint64_t)INT64_MAX;
  }
  count = any_zero ? 0 : count;
  if ((count > 0 && data == NULL) || (!fits && strides == NULL)) {
    return -1;
  }
  int64_t c_stride = 1;
  for (int32_t i = ndim - 1; i >= 0 && count > 0; i--) {
    p.strides[i] = strides != NULL ? strides[i] : c_stride;
    c_stride = strides != NULL ? 0 : c_stride * shape[i];
  }
  p.ndim = ndim;
  p.shape = shape;
  p.data = data;
  p.summarize = count > NPY_THRESHOLD;
  printer_repr(&p, count, dtype.code);
  int rc = -1;
  if (!p.out.out_of_memory && fwrite(p.out.p, 1, p.out.len, out) == p.out.len) {
    rc = 0;
  }
  free(p.out.p);
  return rc;
}

int pf_npy_format(const pf_npy_array_t* arr, FILE* out) {
  if (arr == NULL) {
    return -1;
  }
  /* the shape's bytes must fit and lie within arr->nbytes: the printer read past a shorter
   * buffer (the writer refuses such an array; review) */
  size_t count = 0;
  size_t nbytes = 0;
  size_t itemsize = ((size_t)arr->dtype.bits * arr->dtype.lanes + 7) / 8;
  if (arr->ndim < 0 || arr->ndim > PF_NPY_MAX_NDIM ||
      pf__npy_array_size(arr->shape, arr->ndim, itemsize ? itemsize : 1, &count, &nbytes) != 0 ||
      nbytes > arr->nbytes) {
    return -1;
  }
  if (!arr->fortran_order) {
    return pf_npy_format_raw(arr->dtype, arr->ndim, arr->shape, NULL, arr->data, out);
  }
  /* Fortran-order data: the strides of its layout (they printed as C order; review) */
  int64_t strides[PF_NPY_MAX_NDIM];
  int64_t stride = 1;
  for (int32_t i = 0; i < arr->ndim; i++) {
    strides[i] = stride;
    stride *= arr->shape[i] > 0 ? arr->shape[i] : 1;
  }
  return pf_npy_format_raw(arr->dtype, arr->ndim, arr->shape, strides, arr->data, out);
}
