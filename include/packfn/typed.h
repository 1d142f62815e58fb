/* packfn typed functions: C functions with declared parameter kinds whose arguments are
 * checked and converted before the call, a signature text built from the declaration, the
 * compile-time PF_TYPED_DEFINE, and the macros that register functions in the global table when
 * a library loads. A convenience layer over packfn/function.h (as lauxlib.h over lua.h). */
#ifndef PACKFN_TYPED_H_
#define PACKFN_TYPED_H_

#include "packfn/function.h"

PF_EXTERN_C_BEGIN

/* ---- typed C functions ---- */

/* What a parameter (or the result) of a typed function accepts. */
typedef enum {
  PF_PARAM_NONE = 0,     /* result only: returns none */
  PF_PARAM_INT = 1,      /* int or bool (0 or 1, whatever was stored) -> .i */
  PF_PARAM_FLOAT = 2,    /* float, int or bool (as 0 or 1) -> .f */
  PF_PARAM_BOOL = 3,     /* bool or int -> .b (0/1) */
  PF_PARAM_STR = 4,      /* raw, small or object string -> .s (NUL-terminated, borrowed) */
  PF_PARAM_BYTES = 5,    /* byte-array pointer, small bytes or bytes object -> .s */
  PF_PARAM_TENSOR = 6,   /* tensor object or DLTensor pointer -> .tensor (borrowed) */
  PF_PARAM_OBJECT = 7,   /* any object (index >= 64) -> .obj (borrowed) */
  PF_PARAM_ANY = 8,      /* anything -> .any (the argument itself, borrowed) */
  PF_PARAM_DTYPE = 9,    /* data type -> .dtype */
  PF_PARAM_DEVICE = 10,  /* device -> .device */
  PF_PARAM_PTR = 11,     /* opaque pointer or none -> .ptr */
  PF_PARAM_FUNCTION = 12 /* function object -> .obj (borrowed) */
} pf_param_kind_t;

/* Most parameters a typed function may declare. */
#define PF_TYPED_MAX_PARAMS 32

/* One declared parameter. */
typedef struct pf_param_s {
  const char* name;     /* used in messages and the signature */
  pf_param_kind_t kind; /* what it accepts */
} pf_param_t;

/* A converted argument, as the typed implementation receives it. */
typedef union pf_arg_u {
  int64_t i;
  double f;
  int b;
  pf_byte_array_t s;
  DLTensor* tensor;
  pf_object_t* obj;
  const pf_any_t* any;
  DLDataType dtype;
  DLDevice device;
  void* ptr;
} pf_arg_t;

/* Declaration of a typed function. Copied by pf_function_create_typed. */
typedef struct pf_signature_s {
  const char* name;         /* function name, used in messages and the signature */
  int32_t num_params;       /* 0..PF_TYPED_MAX_PARAMS */
  const pf_param_t* params; /* num_params entries */
  pf_param_kind_t result;   /* declared result kind, for the signature text */
  const char* doc;          /* may be NULL */
} pf_signature_t;

/* Builds a pf_signature_t for a function with at least one parameter:
 * PF_SIGNATURE("add", PF_PARAM_INT, {"a", PF_PARAM_INT}, {"b", PF_PARAM_INT}). */
#if defined(__cplusplus)
/* C++ has no compound literals: the parameters live in a static array of a lambda (so they
 * must be constants), handed with their count to pf__signature_of. Usable at namespace scope. */
typedef struct pf__param_list_s {
  const pf_param_t* params;
  int32_t count;
} pf__param_list_t;
static inline pf_signature_t pf__signature_of(const char* name, pf_param_kind_t result,
                                              pf__param_list_t list) {
  pf_signature_t sig = {name, list.count, list.params, result, PF__NULL};
  return sig;
}
#define PF_SIGNATURE(fname, result_kind, ...)                                                      \
  pf__signature_of((fname), (result_kind), []() -> pf__param_list_t {                              \
    static const pf_param_t pf__params[] = {__VA_ARGS__};                                          \
    return pf__param_list_t{pf__params,                                                            \
                            PF__CAST(int32_t, sizeof(pf__params) / sizeof(pf_param_t))};           \
  }())
#else
#define PF_SIGNATURE(fname, result_kind, ...)                                                      \
  ((pf_signature_t){(fname), (int32_t)(sizeof((pf_param_t[]){__VA_ARGS__}) / sizeof(pf_param_t)),  \
                    (const pf_param_t[]){__VA_ARGS__}, (result_kind), NULL})
#endif

/* Implementation of a typed function: args[i] holds parameter i converted as its kind says
 * (what they point at is borrowed for the call). Write an owned value to *result (it is none on
 * entry); return 0, or -1 with an error raised and *result left none. */
typedef int (*pf_typed_call_t)(void* self, const pf_arg_t* args, pf_any_t* result);

/* Creates a function object that checks arity and converts every argument as `sig` declares
 * before calling `impl(self, converted, result)`. Bad calls fail with TypeError:
 *   "add: expected 2 arguments, got 3"
 *   "add: argument 1 (b): expected int, got str"
 * The function carries the signature text "add(a: int, b: int) -> int" (and sig->doc).
 * `deleter(self)` runs exactly once when the function dies (not on failure here: self then
 * stays the caller's). `sig` is copied (names and doc included): it need not outlive the call.
 * New reference in *out. -1 with ValueError (NULL sig, name, params with num_params > 0,
 * impl or out; an empty name; num_params out of range; a parameter without a name or with an
 * unknown kind; two parameters of one name; an unknown result kind; a function or parameter
 * name holding a space, control character, comma, colon or parenthesis, which the signature
 * text could not be read back with) or MemoryError; *out is then NULL (when out is not). */
PF_API int pf_function_create_typed(const pf_signature_t* sig, pf_typed_call_t impl, void* self,
                                    void (*deleter)(void* self), pf_object_t** out);

/* Name of a parameter kind as shown in signatures ("int", "Tensor", ...); "unknown" for a value
 * outside pf_param_kind_t. A static string: never NULL, never raises. */
PF_API const char* pf_param_kind_name(pf_param_kind_t kind);

/* ---- typed C functions defined at compile time ----
 * PF_TYPED_DEFINE declares a C function with typed parameters and generates, next to it, the
 * packed entry that checks arity and converts each argument inline (no per-call table walk):
 *
 *   PF_TYPED_DEFINE(add, INT, (INT, a), (INT, b)) {
 *     *result = pf_any_int(a + b);
 *     return 0;
 *   }
 *   ...
 *   pf_object_t* fn;
 *   PF_TYPED_CREATE(add, &fn);              // a function object "add(a: int, b: int) -> int"
 *   PF_TYPED_REGISTER(add, "demo.add");     // at file scope: registered when the library loads
 *
 * Kinds (and the C type the body receives): INT int64_t, FLOAT double, BOOL int, STR and BYTES
 * pf_byte_array_t (borrowed; STR data is NUL-terminated), TENSOR DLTensor* (borrowed), OBJECT
 * and FUNCTION pf_object_t* (borrowed), ANY const pf_any_t*, DTYPE DLDataType, DEVICE DLDevice,
 * PTR void*. Conversions follow the typed rules above. The body sees `result` (none on entry)
 * and returns 0, or -1 with an error raised. 1 to 8 parameters. Expands to static functions
 * <name> (the body), <name>_packed (a pf_safe_call_t) and a pf_signature_t <name>_signature. */

/* Raises "name: expected N arguments, got M" (TypeError) and returns -1; a NULL sig (or
 * sig->name) raises ValueError instead. */
PF_API int pf_typed_arity_error(const pf_signature_t* sig, int32_t got);
/* Raises "name: argument i (param): expected kind, got type" (TypeError) and returns -1; a NULL
 * sig, sig->name, sig->params or arg, or an index outside 0..num_params-1, raises ValueError
 * instead. What PF_TYPED_DEFINE's entries call for an argument they refuse. */
PF_API int pf_typed_arg_error(const pf_signature_t* sig, int32_t index, const pf_any_t* arg);

/* Creates a function object whose cell calls `packed` directly (the direct form: `packed`
 * receives the function object as self) and that carries the signature text of `sig` (and its
 * doc). For entries generated by PF_TYPED_DEFINE. The object takes a cache line of its own,
 * as pf_function_create_direct's. `sig` is copied (it need not outlive the call). New reference
 * in *out; -1 with ValueError (a NULL argument, or a declaration pf_function_create_typed
 * refuses) or MemoryError; *out is then NULL (when out is not). */
PF_API int pf_function_create_static(const pf_signature_t* sig, pf_safe_call_t packed,
                                     pf_object_t** out);

typedef int64_t pf__ctype_INT;
typedef double pf__ctype_FLOAT;
typedef int pf__ctype_BOOL;
typedef pf_byte_array_t pf__ctype_STR;
typedef pf_byte_array_t pf__ctype_BYTES;
typedef DLTensor* pf__ctype_TENSOR;
typedef pf_object_t* pf__ctype_OBJECT;
typedef pf_object_t* pf__ctype_FUNCTION;
typedef const pf_any_t* pf__ctype_ANY;
typedef DLDataType pf__ctype_DTYPE;
typedef DLDevice pf__ctype_DEVICE;
typedef void* pf__ctype_PTR;

/* The conversion of each parameter kind, the one definition of the typed rules above: both
 * PF_TYPED_DEFINE's inline entries and pf_function_create_typed's run-time path use them.
 * 1 and *o set, or 0 when the argument's type does not fit, when it is a pointer kind holding
 * NULL (a str or bytes view, a DLTensor*, an object), or a small string or bytes longer than
 * PF_SMALL_STR_MAX (a broken producer's): refused, nothing raised (the accessors raised for the
 * last, which the TypeError then carried as its cause, saying "expected str, got str": review). The
 * range tests of the numeric kinds are unsigned (a foreign type index near INT32_MIN minus
 * PF_TYPE_INT overflowed int). */
static inline int pf__conv_INT(const pf_any_t* a, int64_t* o) {
  if (PF_LIKELY(a->type_index == PF_TYPE_INT)) {
    *o = a->v_int64;
    return 1;
  }
  /* a bool is 0 or 1, whatever another producer stored (as pf_any_as_int reads it) */
  *o = a->v_int64 != 0;
  return a->type_index == PF_TYPE_BOOL;
}
static inline int pf__conv_BOOL(const pf_any_t* a, int* o) {
  *o = a->v_int64 != 0;
  return PF__CAST(uint32_t, a->type_index) - PF__CAST(uint32_t, PF_TYPE_INT) <=
         PF__CAST(uint32_t, PF_TYPE_BOOL - PF_TYPE_INT);
}
static inline int pf__conv_FLOAT(const pf_any_t* a, double* o) {
  if (a->type_index == PF_TYPE_FLOAT) {
    *o = a->v_float64;
    return 1;
  }
  *o = a->type_index == PF_TYPE_BOOL ? PF__CAST(double, a->v_int64 != 0)
                                     : PF__CAST(double, a->v_int64);
  return PF__CAST(uint32_t, a->type_index) - PF__CAST(uint32_t, PF_TYPE_INT) <=
         PF__CAST(uint32_t, PF_TYPE_BOOL - PF_TYPE_INT);
}
static inline int pf__conv_STR(const pf_any_t* a, pf_byte_array_t* o) {
  int32_t t = a->type_index;
  if ((t != PF_TYPE_SMALL_STR && t != PF_TYPE_STR && t != PF_TYPE_RAW_STR) ||
      (t != PF_TYPE_SMALL_STR && !a->v_ptr) || /* a raw string or string object holding NULL */
      (t == PF_TYPE_SMALL_STR && a->small_str_len > PF_SMALL_STR_MAX)) /* a broken producer's */
    return 0;
  return pf_any_as_str(a, &o->data, &o->size) == 0;
}
static inline int pf__conv_BYTES(const pf_any_t* a, pf_byte_array_t* o) {
  int32_t t = a->type_index;
  if ((t != PF_TYPE_SMALL_BYTES && t != PF_TYPE_BYTES && t != PF_TYPE_BYTE_ARRAY_PTR) ||
      (t != PF_TYPE_SMALL_BYTES && !a->v_ptr) || /* a byte-array view or bytes object at NULL */
      (t == PF_TYPE_SMALL_BYTES && a->small_str_len > PF_SMALL_STR_MAX) || /* a broken one */
      (t == PF_TYPE_BYTE_ARRAY_PTR && !PF__CAST(const pf_byte_array_t*, a->v_ptr)->data &&
       PF__CAST(const pf_byte_array_t*, a->v_ptr)->size != 0)) /* a view of bytes at NULL */
    return 0;
  return pf_any_as_bytes(a, &o->data, &o->size) == 0;
}
static inline int pf__conv_TENSOR(const pf_any_t* a, DLTensor** o) {
  if (a->type_index == PF_TYPE_TENSOR) {
    *o = a->v_obj ? PF__REINTERPRET_CAST(DLTensor*, a->v_obj + 1) : PF__NULL;
    return *o != PF__NULL;
  }
  *o = PF__CAST(DLTensor*, a->v_ptr);
  return a->type_index == PF_TYPE_DLTENSOR_PTR && *o != PF__NULL;
}
static inline int pf__conv_OBJECT(const pf_any_t* a, pf_object_t** o) {
  *o = a->v_obj;
  return a->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && *o != PF__NULL;
}
static inline int pf__conv_FUNCTION(const pf_any_t* a, pf_object_t** o) {
  *o = a->v_obj;
  return a->type_index == PF_TYPE_FUNCTION && *o != PF__NULL;
}
static inline int pf__conv_ANY(const pf_any_t* a, const pf_any_t** o) {
  *o = a;
  return 1;
}
static inline int pf__conv_DTYPE(const pf_any_t* a, DLDataType* o) {
  *o = a->v_dtype;
  return a->type_index == PF_TYPE_DTYPE;
}
static inline int pf__conv_DEVICE(const pf_any_t* a, DLDevice* o) {
  *o = a->v_device;
  return a->type_index == PF_TYPE_DEVICE;
}
static inline int pf__conv_PTR(const pf_any_t* a, void** o) {
  *o = a->type_index == PF_TYPE_OPAQUE_PTR ? a->v_ptr : PF__NULL;
  return a->type_index == PF_TYPE_OPAQUE_PTR || a->type_index == PF_TYPE_NONE;
}

#define PF__TP_DECL(K, p) pf__ctype_##K p
#define PF__TP_NAME(K, p) p
#define PF__TP_PARAM(K, p)                                                                         \
  { #p, PF_PARAM_##K }
#define PF__TP_CONV2(i, fname, K, p)                                                               \
  pf__ctype_##K p;                                                                                 \
  if (PF_UNLIKELY(!pf__conv_##K(&args[i], &p)))                                                    \
    return pf_typed_arg_error(&fname##_signature, i, &args[i]);
#define PF__TP_SPLIT(K, p)          K, p
#define PF__TP_CONV1(...)           PF__TP_CONV2(__VA_ARGS__)
#define PF__TP_CONV(i, fname, pair) PF__TP_CONV1(i, fname, PF__TP_SPLIT pair)

#define PF__TP_NARGS(...)                                     PF__TP_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define PF__TP_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, N, ...) N
#define PF__TP_LIST_1(m, a)                                   m a
#define PF__TP_LIST_2(m, a, ...)                              m a, PF__TP_LIST_1(m, __VA_ARGS__)
#define PF__TP_LIST_3(m, a, ...)                              m a, PF__TP_LIST_2(m, __VA_ARGS__)
#define PF__TP_LIST_4(m, a, ...)                              m a, PF__TP_LIST_3(m, __VA_ARGS__)
#define PF__TP_LIST_5(m, a, ...)                              m a, PF__TP_LIST_4(m, __VA_ARGS__)
#define PF__TP_LIST_6(m, a, ...)                              m a, PF__TP_LIST_5(m, __VA_ARGS__)
#define PF__TP_LIST_7(m, a, ...)                              m a, PF__TP_LIST_6(m, __VA_ARGS__)
#define PF__TP_LIST_8(m, a, ...)                              m a, PF__TP_LIST_7(m, __VA_ARGS__)
#define PF__TP_LIST(m, ...)                                   PF__CAT(PF__TP_LIST_, PF__TP_NARGS(__VA_ARGS__))(m, __VA_ARGS__)
#define PF__TP_EACH_1(f, i, a)                                PF__TP_CONV(i, f, a)
#define PF__TP_EACH_2(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_1(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_3(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_2(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_4(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_3(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_5(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_4(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_6(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_5(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_7(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_6(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH_8(f, i, a, ...)                           PF__TP_CONV(i, f, a) PF__TP_EACH_7(f, i + 1, __VA_ARGS__)
#define PF__TP_EACH(f, ...)                                   PF__CAT(PF__TP_EACH_, PF__TP_NARGS(__VA_ARGS__))(f, 0, __VA_ARGS__)

#define PF_TYPED_DEFINE(fname, result_kind, ...)                                                   \
  static int fname(PF__TP_LIST(PF__TP_DECL, __VA_ARGS__), pf_any_t* result);                       \
  static const pf_param_t fname##_params[] = {PF__TP_LIST(PF__TP_PARAM, __VA_ARGS__)};             \
  static const pf_signature_t fname##_signature = {                                                \
      #fname, PF__CAST(int32_t, sizeof(fname##_params) / sizeof(pf_param_t)), fname##_params,      \
      PF_PARAM_##result_kind, PF__NULL};                                                           \
  static int fname##_packed(void* self, const pf_any_t* args, int32_t num_args,                    \
                            pf_any_t* result) {                                                    \
    (void)self;                                                                                    \
    if (PF_UNLIKELY(num_args != fname##_signature.num_params))                                     \
      return pf_typed_arity_error(&fname##_signature, num_args);                                   \
    PF__TP_EACH(fname, __VA_ARGS__)                                                                \
    return fname(PF__TP_LIST(PF__TP_NAME, __VA_ARGS__), result);                                   \
  }                                                                                                \
  static int fname(PF__TP_LIST(PF__TP_DECL, __VA_ARGS__), pf_any_t* result)

/* pf_function_create_static for PF_TYPED_CREATE: the same, with errors that name
 * PF_TYPED_CREATE, the macro the caller wrote. For that macro only. */
PF_API int pf__typed_create(const pf_signature_t* sig, pf_safe_call_t packed, pf_object_t** out);

/* Creates the function object of a PF_TYPED_DEFINE'd `fname` (new reference in *out, the
 * caller's to release). -1 with ValueError (NULL out) or MemoryError, the message naming
 * PF_TYPED_CREATE; *out is then NULL (when out is not). */
#define PF_TYPED_CREATE(fname, out) pf__typed_create(&fname##_signature, fname##_packed, (out))

/* ---- registration in the global table when a library loads ----
 * Registration of statically defined functions when their library (or executable) loads,
 * and removal when it unloads (if the table still holds the same function). A failure at load
 * time (a taken name, no memory) stays raised in the loading thread and counts in
 * pf_global_static_failures(). `name` NULL means sig->name; `sig` with `call` registers a
 * PF_TYPED_DEFINE'd entry, `sig` with `typed` a run-time typed function, `call` alone a plain
 * one. */
PF_API void pf__global_register_static(const char* name, pf_safe_call_t call,
                                       const pf_signature_t* sig, pf_typed_call_t typed,
                                       pf_object_t** slot);
PF_API void pf__global_unregister_static(const char* name, const pf_signature_t* sig,
                                         pf_object_t** slot);

/* The one implementation of the registration macros below: a slot, a constructor that
 * registers into it and a destructor that removes it again, named after a number unique in the
 * translation unit (__COUNTER__: the line alone collided when two files that register on the
 * same line were compiled as one, as CMake's UNITY_BUILD does; review). */
#define PF__REGISTER_STATIC(name, call, sig, typed)                                                \
  PF__REGISTER_STATIC_ID((name), (call), (sig), (typed), __COUNTER__)
#define PF__REGISTER_STATIC_ID(name, call, sig, typed, id)                                         \
  PF__REGISTER_STATIC_AS(name, call, sig, typed, PF__CAT(pf__reg_slot_, id),                       \
                         PF__CAT(pf__reg_ctor_, id), PF__CAT(pf__reg_dtor_, id))
#if defined(__cplusplus)
/* C++: the registration is a dynamic initialiser, run after those defined above it in the
 * translation unit, so that a signature PF_SIGNATURE made at namespace scope (which C++
 * initialises dynamically) is set when it is read; a constructor function ran before, found
 * it zero and failed (review). */
#define PF__REGISTER_STATIC_AS(name, call, sig, typed, slot, ctor, dtor)                           \
  static pf_object_t* slot;                                                                        \
  static int ctor(void) {                                                                          \
    pf__global_register_static((name), (call), (sig), (typed), &slot);                             \
    return 0;                                                                                      \
  }                                                                                                \
  __attribute__((used)) static const int PF__CAT(ctor, _done) = ctor();                            \
  __attribute__((destructor)) static void dtor(void) {                                             \
    pf__global_unregister_static((name), (sig), &slot);                                            \
  }                                                                                                \
  PF__STATIC_ASSERT(1, "registration")
#else
#define PF__REGISTER_STATIC_AS(name, call, sig, typed, slot, ctor, dtor)                           \
  static pf_object_t* slot;                                                                        \
  __attribute__((constructor)) static void ctor(void) {                                            \
    pf__global_register_static((name), (call), (sig), (typed), &slot);                             \
  }                                                                                                \
  __attribute__((destructor)) static void dtor(void) {                                             \
    pf__global_unregister_static((name), (sig), &slot);                                            \
  }                                                                                                \
  PF__STATIC_ASSERT(1, "registration")
#endif

/* At file scope: registers `call` (a pf_safe_call_t, called with the function object as
 * self) under the string `name` when the enclosing library loads. */
#define PF_REGISTER_GLOBAL(name, call) PF__REGISTER_STATIC((name), (call), PF__NULL, PF__NULL)

/* At file scope: registers a typed function (`sig` a pointer to a static pf_signature_t whose
 * name is the global name, `impl` a pf_typed_call_t receiving self == NULL). */
#define PF_REGISTER_GLOBAL_TYPED(sig, impl)                                                        \
  PF__REGISTER_STATIC((sig)->name, PF__NULL, (sig), (impl))

/* At file scope: registers a PF_TYPED_DEFINE'd `fname` under the string `name` when the
 * enclosing library loads (removed again when it unloads). */
#define PF_TYPED_REGISTER(fname, name)                                                             \
  PF__REGISTER_STATIC((name), fname##_packed, &fname##_signature, PF__NULL)

PF_EXTERN_C_END
#endif /* PACKFN_TYPED_H_ */
