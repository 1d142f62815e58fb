/* direct_ops.c: the direct floor of packfn_bench: plain C functions called through volatile
   function pointers, the cost of a call with no runtime in between. */
#include "harness.h"
#include "harness_private.h"

#include <stddef.h>

/* The DLTensor layout (DLPack), mirrored so the harness builds without any dlpack.h. */
typedef struct direct_dltensor {
  void* data;
  struct {
    int32_t device_type, device_id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code, bits;
    uint16_t lanes;
  } dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} direct_dltensor_t;

static int64_t direct_f0(void) {
  return 1;
}
static int64_t direct_f1(int64_t a) {
  return a + 1;
}
static int64_t direct_f3(int64_t a, double b, const char* s) {
  return a + (int64_t)b + (int64_t)(unsigned char)s[0];
}
static int64_t direct_f6(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f) {
  return a + b + c + d + e + f;
}
static int64_t direct_ftensor(const direct_dltensor_t* t) {
  return t->shape[0];
}
static int64_t direct_add(int64_t a, int64_t b) {
  return a + b;
}

static int64_t (*volatile direct_p0)(void) = direct_f0;
static int64_t (*volatile direct_p1)(int64_t) = direct_f1;
static int64_t (*volatile direct_p3)(int64_t, double, const char*) = direct_f3;
static int64_t (*volatile direct_p6)(int64_t, int64_t, int64_t, int64_t, int64_t,
                                     int64_t) = direct_f6;
static int64_t (*volatile direct_ptensor)(const direct_dltensor_t*) = direct_ftensor;
static int64_t (*volatile direct_padd)(int64_t, int64_t) = direct_add;

static uint64_t direct_run_call_0(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_p0();
  return sum;
}

static uint64_t direct_run_call_1int(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_p1(i);
  return sum;
}

static uint64_t direct_run_call_3mixed(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_p3(i, PF_BENCH_FLOAT_ARG, PF_BENCH_STR_ARG);
  return sum;
}

static uint64_t direct_run_call_6int(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_p6(i, 1, 2, 3, 4, 5);
  return sum;
}

static uint64_t direct_run_call_dltensor(void* state, int64_t iters) {
  (void)state;
  static float data[PF_BENCH_TENSOR_NUMEL];
  int64_t shape[1] = {PF_BENCH_TENSOR_NUMEL};
  direct_dltensor_t t = {data, {1, 0}, 1, {2, 32, 1}, shape, NULL, 0};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_ptensor(&t);
  return sum;
}

static uint64_t direct_run_call_typed(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)direct_padd(i, 1);
  return sum;
}

static const pf_bench_op_t direct_ops[] = {
    {"call_0", "direct", "C call through a volatile function pointer", NULL, direct_run_call_0,
     NULL},
    {"call_1int", "direct", "C call through a volatile function pointer", NULL,
     direct_run_call_1int, NULL},
    {"call_3mixed", "direct", "C call through a volatile function pointer", NULL,
     direct_run_call_3mixed, NULL},
    {"call_6int", "direct", "C call through a volatile function pointer", NULL,
     direct_run_call_6int, NULL},
    {"call_dltensor", "direct", "C call through a volatile function pointer", NULL,
     direct_run_call_dltensor, NULL},
    {"call_typed", "direct", "C call through a volatile function pointer", NULL,
     direct_run_call_typed, NULL},
};

const pf_bench_op_t* pf_bench_direct_ops(size_t* count) {
  *count = ARRAY_SIZE(direct_ops);
  return direct_ops;
}
