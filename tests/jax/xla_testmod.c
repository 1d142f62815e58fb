/* tests/jax/xla_testmod.c: packfn functions whose signatures or errors the kernels that ship
 * with packfn do not have, for the packfn.jax tests (conftest.py compiles it against the
 * installed package). Each writes float64 results. */
#include <stdlib.h>
#include <string.h>

#include <packfn/packfn.h>

static int out_tensor(const pf_any_t* args, double** out) {
  DLTensor* t;
  if (pf_any_as_dltensor(&args[0], &t) != 0)
    return -1;
  *out = (double*)t->data;
  return 0;
}

/* shout(out: Tensor, n: int): raises ValueError with a message of n 'a's and then "END" */
static int shout(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)num_args;
  int64_t n;
  if (pf_any_as_int(&args[1], &n) != 0)
    return -1;
  char* text = malloc((size_t)n + 4);
  if (!text)
    return -1;
  memset(text, 'a', (size_t)n);
  memcpy(text + n, "END", 4);
  pf_error_set(PF_ERR_VALUE, "%s", text);
  free(text);
  *result = pf_any_none();
  return -1;
}
PF_EXPORT_DOC(shout, shout, "shout(out: Tensor, n: int) -> None", NULL);

/* pair(out: Tensor, k: int) -> Tuple(int, int): out[0] = k (a result annotation holding
 * parentheses) */
static int pair(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)num_args;
  double* out;
  int64_t k;
  if (out_tensor(args, &out) != 0 || pf_any_as_int(&args[1], &k) != 0)
    return -1;
  out[0] = (double)k;
  *result = pf_any_none();
  return 0;
}
PF_EXPORT_DOC(pair, pair, "pair(out: Tensor, k: int) -> Tuple(int, int)", NULL);

/* the adapter's own attribute names as parameter names */
PF_EXPORT_DOC(slotted, pair, "slotted(out: Tensor, packfn_slot: int) -> None", NULL);
PF_EXPORT_DOC(named, pair, "named(out: Tensor, packfn_name: int) -> None", NULL);
/* two scalar parameters of one name: no call's attributes could give both */
PF_EXPORT_DOC(twice, pair, "twice(out: Tensor, a: int, a: int) -> None", NULL);
/* a signature that is not UTF-8 (Latin-1 e acute): no Python keyword can name the parameter */
PF_EXPORT_DOC(latin, pair, "latin(out: Tensor, caf\xe9: int) -> None", NULL);
/* a parameter XLA cannot fill after another: its message quotes it without the space */
PF_EXPORT_DOC(worded, pair, "worded(out: Tensor, s: str) -> None", NULL);

/* signatures written over several lines: \n, \r\n, \v and \f separate like spaces */
PF_EXPORT_DOC(multiline, pair, "multiline(out: Tensor,\n              k: int) -> None", NULL);
PF_EXPORT_DOC(crlf, pair, "crlf(\r\n  out: Tensor,\r\n  k\v:\fint\r\n) -> None", NULL);
/* a trailing comma, then a space, as Python allows: the list ends there on both sides */
PF_EXPORT_DOC(trailing, pair, "trailing(out: Tensor, k: int, ) -> None", NULL);
/* a parameter name that begins with U+00A0 (no-break space, UTF-8 C2 A0): not whitespace to
 * the adapter, nor to packfn.jax since it strips ASCII whitespace only */
PF_EXPORT_DOC(nbsp, pair, "nbsp(out: Tensor, \xc2\xa0k: int) -> None", NULL);
/* parameter names of 60 and 120 characters */
PF_EXPORT_DOC(longnames, pair,
              "longnames(output_tensor_with_a_rather_long_descriptive_name_of_60chars: Tensor, "
              "an_int_parameter_whose_name_is_one_hundred_and_twenty_characters_long_which_no_"
              "limit_of_the_adapter_should_refuse_at_all: int) -> None",
              NULL);

/* bad_utf8(out: Tensor): raises ValueError with bytes that are not UTF-8 */
static int bad_utf8(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  pf_error_set(PF_ERR_VALUE, "bad bytes \xff\xfe\xc3 end");
  return -1;
}
PF_EXPORT_DOC(bad_utf8, bad_utf8, "bad_utf8(out: Tensor) -> None", NULL);

/* leave_error(out: Tensor): out[0] = 1, and leaves a ValueError raised though it succeeds */
static int leave_error(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)num_args;
  double* out;
  if (out_tensor(args, &out) != 0)
    return -1;
  out[0] = 1.0;
  pf_error_set(PF_ERR_VALUE, "stale error left by leave_error");
  *result = pf_any_none();
  return 0;
}
PF_EXPORT_DOC(leave_error, leave_error, "leave_error(out: Tensor) -> None", NULL);

/* silent(out: Tensor): fails without raising an error */
static int silent(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return -1;
}
PF_EXPORT_DOC(silent, silent, "silent(out: Tensor) -> None", NULL);

/* scaled(alpha: float, x: Tensor, out: Tensor): out[i] = alpha * x[i], float64 (a scalar
 * parameter before the tensors: messages count positions over all parameters) */
static int scaled(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)num_args;
  double alpha;
  DLTensor *x, *out;
  if (pf_any_as_float(&args[0], &alpha) != 0 || pf_any_as_dltensor(&args[1], &x) != 0 ||
      pf_any_as_dltensor(&args[2], &out) != 0)
    return -1;
  int64_t n = 1;
  for (int32_t d = 0; d < x->ndim; ++d)
    n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i)
    ((double*)out->data)[i] = alpha * ((const double*)x->data)[i];
  *result = pf_any_none();
  return 0;
}
PF_EXPORT_DOC(scaled, scaled, "scaled(alpha: float, x: Tensor, out: Tensor) -> None", NULL);

/* check_positive(x: Tensor): raises ValueError at the first value of x (float64) that is not
 * positive; writes nothing (a function with no results, run for its check) */
static int check_positive(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)num_args;
  DLTensor* x;
  if (pf_any_as_dltensor(&args[0], &x) != 0)
    return -1;
  int64_t n = 1;
  for (int32_t d = 0; d < x->ndim; ++d)
    n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i)
    if (!(((const double*)x->data)[i] > 0)) {
      pf_error_set(PF_ERR_VALUE, "check_positive: x[%lld] = %g is not positive", (long long)i,
                   ((const double*)x->data)[i]);
      return -1;
    }
  *result = pf_any_none();
  return 0;
}
PF_EXPORT_DOC(check_positive, check_positive, "check_positive(x: Tensor) -> None", NULL);
