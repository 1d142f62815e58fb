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
/* a parameter XLA cannot fill after another: its message quotes it without the space */
PF_EXPORT_DOC(worded, pair, "worded(out: Tensor, s: str) -> None", NULL);
