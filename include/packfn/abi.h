/* packfn ABI: the binary layouts shared with every runtime that follows the open TVM-FFI ABI.
 * Every size, offset and enum value here is a binary fact pinned by a _Static_assert. */
#ifndef PACKFN_ABI_H_
#define PACKFN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "packfn/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the packed-function ABI this header describes. A kernel library records the
 * major version it was built for (`__packfn_abi`); loaders refuse another major version. */
#define PF_ABI_VERSION_MAJOR 0
#define PF_ABI_VERSION_MINOR 1
/* Version of the packfn library itself. */
#define PF_VERSION_MAJOR  0
#define PF_VERSION_MINOR  1
#define PF_VERSION_PATCH  0
#define PF_VERSION_STRING "0.1.0"

/* Type indices. Below PF_TYPE_STATIC_OBJECT_BEGIN the value lives inside the Any; from it on
 * the Any holds an object pointer (v_obj). Values are the ABI's, written out explicitly. */
typedef enum {
  PF_TYPE_ANY = -1,               /* only in signatures: "any value" */
  PF_TYPE_NONE = 0,               /* no payload */
  PF_TYPE_INT = 1,                /* v_int64 */
  PF_TYPE_BOOL = 2,               /* v_int64, 0 or 1 */
  PF_TYPE_FLOAT = 3,              /* v_float64 */
  PF_TYPE_OPAQUE_PTR = 4,         /* v_ptr */
  PF_TYPE_DTYPE = 5,              /* v_dtype */
  PF_TYPE_DEVICE = 6,             /* v_device */
  PF_TYPE_DLTENSOR_PTR = 7,       /* v_ptr: borrowed DLTensor* (views only) */
  PF_TYPE_RAW_STR = 8,            /* v_c_str: borrowed NUL-terminated (views only) */
  PF_TYPE_BYTE_ARRAY_PTR = 9,     /* v_ptr: borrowed pf_byte_array_t* (views only) */
  PF_TYPE_OBJECT_RVALUE_REF = 10, /* v_ptr: pf_object_t** whose reference may be taken */
  PF_TYPE_SMALL_STR = 11,         /* v_bytes, small_str_len bytes (<= 7), NUL after */
  PF_TYPE_SMALL_BYTES = 12,       /* as small string */
  PF_TYPE_UNCHANGED = 13,         /* TVM-FFI's "unchanged" marker (no payload) */
  PF_TYPE_STATIC_OBJECT_BEGIN = 64,
  PF_TYPE_OBJECT = 64,             /* root of all objects */
  PF_TYPE_STR = 65,                /* string object */
  PF_TYPE_BYTES = 66,              /* bytes object */
  PF_TYPE_ERROR = 67,              /* error object */
  PF_TYPE_FUNCTION = 68,           /* function object */
  PF_TYPE_SHAPE = 69,              /* shape object */
  PF_TYPE_TENSOR = 70,             /* tensor object, DLTensor at offset 24 */
  PF_TYPE_ARRAY = 71,              /* immutable sequence of Anys */
  PF_TYPE_MAP = 72,                /* hash map */
  PF_TYPE_MODULE = 73,             /* loaded library */
  PF_TYPE_OPAQUE_HOST_OBJECT = 74, /* opaque host-language object */
  PF_TYPE_LIST = 75,               /* mutable sequence */
  PF_TYPE_DICT = 76,               /* mutable map */
  PF_TYPE_VISIT_INTERRUPT = 77,    /* TVM-FFI reflection's visit interrupt */
  PF_TYPE_BIG_INT = 78,            /* integer beyond 64 bits (TVM-FFI) */
  PF_TYPE_DYN_BEGIN = 128          /* first index handed out by pf_type_register */
} pf_type_index_t;

/* Deleter flags passed to an object's deleter. */
enum {
  PF_DELETER_STRONG = 1, /* strong count reached zero: destroy the contents */
  PF_DELETER_WEAK = 2,   /* weak count reached zero: free the memory */
  PF_DELETER_BOTH = 3    /* both at once */
};

/* Object header: 24 bytes at the start of every heap object. The counter goes first so the
 * hot retain/release touch offset 0 only. */
typedef struct pf_object_s {
  /* strong count in the low 32 bits, weak count in the high 32; updated atomically */
  uint64_t combined_ref_count;
  /* type index (>= 64) */
  int32_t type_index;
  /* always zero */
  uint32_t padding;
  union {
    /* called with PF_DELETER_* flags; see the reference protocol in docs/abi.md */
    void (*deleter)(void* self, int flags);
    /* keeps the slot 8 bytes and 8-byte aligned on every platform */
    int64_t deleter_slot_;
  };
} pf_object_t;

/* The Any: 16 bytes, passed by value. Unused bytes are zero, so equal values compare equal
 * byte for byte. */
typedef struct pf_any_s {
  int32_t type_index; /* a pf_type_index_t or a registered index */
  union {
    uint32_t zero_padding;  /* zero for every type but small strings/bytes */
    uint32_t small_str_len; /* length of a small string or small bytes */
  };
  union {
    int64_t v_int64;     /* int, bool */
    double v_float64;    /* float */
    void* v_ptr;         /* opaque pointer, DLTensor*, byte-array*, rvalue ref */
    const char* v_c_str; /* raw C string */
    pf_object_t* v_obj;  /* object (type index >= 64) */
    DLDataType v_dtype;  /* data type (remaining bytes zero) */
    DLDevice v_device;   /* device */
    char v_bytes[8];     /* small string / bytes, NUL-terminated when shorter than 8 */
    uint64_t v_uint64;   /* raw bits, for hashing and comparison */
  };
} pf_any_t;

/* A borrowed run of bytes (ABI "byte array"). */
typedef struct pf_byte_array_s {
  const char* data; /* not necessarily NUL-terminated unless stated */
  size_t size;      /* in bytes */
} pf_byte_array_t;

/* The one calling convention. `self` is what the function object's cell hands the callee
 * (the object itself for cells called directly); `args` are views; `*result` is none on
 * entry and owned on success; return 0, or -1 with an error raised in this thread. */
typedef int (*pf_safe_call_t)(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result);

/* Cell right after the header of a function object (type 68). */
typedef struct pf_function_cell_s {
  pf_safe_call_t safe_call; /* called as safe_call(function_object, args, n, result) */
  void* cpp_call;           /* reserved for C++ runtimes; NULL in packfn */
} pf_function_cell_t;

/* Cell right after the header of a string (65) or bytes (66) object. */
typedef pf_byte_array_t pf_string_cell_t;

/* Cell right after the header of an error object (type 67): 72 bytes. */
typedef struct pf_error_cell_s {
  pf_byte_array_t kind;      /* "ValueError", ...; NUL-terminated */
  pf_byte_array_t message;   /* NUL-terminated */
  pf_byte_array_t backtrace; /* NUL-terminated, may be empty */
  /* replaces (mode 0) or appends to (mode 1) the backtrace; self is the error object */
  void (*update_backtrace)(void* self, const pf_byte_array_t* backtrace, int32_t mode);
  void* cause_chain;   /* pf_object_t* error that caused this one, owned, or NULL */
  void* extra_context; /* pf_object_t* owned, or NULL */
} pf_error_cell_t;

/* Cell right after the header of a shape object (type 69). */
typedef struct pf_shape_cell_s {
  const int64_t* data; /* size extents */
  size_t size;
} pf_shape_cell_t;

/* Cell right after the header of an array (71) or list (75) object. */
typedef struct pf_seq_cell_s {
  void* data;                    /* pf_any_t[capacity], the first `size` owned */
  int64_t size;                  /* number of elements */
  int64_t capacity;              /* allocated slots */
  void (*data_deleter)(void* p); /* frees data, or NULL when data is inline */
} pf_seq_cell_t;

/* DLPack 1.x versioned exchange, defined under our names so it works whatever dlpack.h the
 * system ships (Debian's is 0.6, without it). Layout identical to DLManagedTensorVersioned. */
typedef struct pf_dlpack_version_s {
  uint32_t major;
  uint32_t minor;
} pf_dlpack_version_t;

typedef struct pf_dl_managed_tensor_versioned_s {
  pf_dlpack_version_t version; /* producer's DLPack version; major 1 */
  void* manager_ctx;           /* producer's state */
  /* called once by the consumer when done; may be NULL */
  void (*deleter)(struct pf_dl_managed_tensor_versioned_s* self);
  uint64_t flags; /* PF_DLPACK_FLAG_* */
  DLTensor dl_tensor;
} pf_dl_managed_tensor_versioned_t;

#define PF_DLPACK_VERSIONED_MAJOR          1
#define PF_DLPACK_VERSIONED_MINOR          1
#define PF_DLPACK_FLAG_READ_ONLY           (1ULL << 0)
#define PF_DLPACK_FLAG_IS_COPIED           (1ULL << 1)
#define PF_DLPACK_FLAG_SUBBYTE_TYPE_PADDED (1ULL << 2)

/* DLPack data-type codes, written out because older dlpack.h lacks some. */
enum {
  PF_DL_INT = 0,
  PF_DL_UINT = 1,
  PF_DL_FLOAT = 2,
  PF_DL_OPAQUE_HANDLE = 3,
  PF_DL_BFLOAT = 4,
  PF_DL_COMPLEX = 5,
  PF_DL_BOOL = 6,
  PF_DL_FLOAT8_E3M4 = 7,
  PF_DL_FLOAT8_E4M3 = 8,
  PF_DL_FLOAT8_E4M3B11FNUZ = 9,
  PF_DL_FLOAT8_E4M3FN = 10,
  PF_DL_FLOAT8_E4M3FNUZ = 11,
  PF_DL_FLOAT8_E5M2 = 12,
  PF_DL_FLOAT8_E5M2FNUZ = 13,
  PF_DL_FLOAT8_E8M0FNU = 14,
  PF_DL_FLOAT6_E2M3FN = 15,
  PF_DL_FLOAT6_E3M2FN = 16,
  PF_DL_FLOAT4_E2M1FN = 17
};

/* DLPack device types, written out because older dlpack.h lacks some. */
enum {
  PF_DEV_CPU = 1,
  PF_DEV_CUDA = 2,
  PF_DEV_CUDA_HOST = 3,
  PF_DEV_OPENCL = 4,
  PF_DEV_VULKAN = 7,
  PF_DEV_METAL = 8,
  PF_DEV_VPI = 9,
  PF_DEV_ROCM = 10,
  PF_DEV_ROCM_HOST = 11,
  PF_DEV_EXT_DEV = 12,
  PF_DEV_CUDA_MANAGED = 13,
  PF_DEV_ONEAPI = 14,
  PF_DEV_WEBGPU = 15,
  PF_DEV_HEXAGON = 16,
  PF_DEV_MAIA = 17,
  PF_DEV_TRN = 18
};

/* ---- the binary contract, pinned ---- */
PF__STATIC_ASSERT(sizeof(pf_any_t) == 16, "Any is 16 bytes");
PF__STATIC_ASSERT(offsetof(pf_any_t, type_index) == 0, "Any.type_index at 0");
PF__STATIC_ASSERT(offsetof(pf_any_t, zero_padding) == 4, "Any.zero_padding at 4");
PF__STATIC_ASSERT(offsetof(pf_any_t, small_str_len) == 4, "Any.small_str_len at 4");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_int64) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_float64) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_ptr) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_obj) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_dtype) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_device) == 8, "Any payload at 8");
PF__STATIC_ASSERT(offsetof(pf_any_t, v_bytes) == 8, "Any payload at 8");
PF__STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
PF__STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice is 8 bytes");
PF__STATIC_ASSERT(sizeof(pf_object_t) == 24, "object header is 24 bytes");
PF__STATIC_ASSERT(offsetof(pf_object_t, combined_ref_count) == 0, "ref count at 0");
PF__STATIC_ASSERT(offsetof(pf_object_t, type_index) == 8, "type index at 8");
PF__STATIC_ASSERT(offsetof(pf_object_t, padding) == 12, "padding at 12");
PF__STATIC_ASSERT(offsetof(pf_object_t, deleter) == 16, "deleter at 16");
PF__STATIC_ASSERT(sizeof(pf_byte_array_t) == 16, "byte array is 16 bytes");
PF__STATIC_ASSERT(sizeof(pf_function_cell_t) == 16, "function cell is 16 bytes");
PF__STATIC_ASSERT(sizeof(pf_error_cell_t) == 72, "error cell is 72 bytes");
PF__STATIC_ASSERT(offsetof(pf_error_cell_t, message) == 16, "error message at 16");
PF__STATIC_ASSERT(offsetof(pf_error_cell_t, backtrace) == 32, "error backtrace at 32");
PF__STATIC_ASSERT(offsetof(pf_error_cell_t, update_backtrace) == 48, "update_backtrace at 48");
PF__STATIC_ASSERT(offsetof(pf_error_cell_t, cause_chain) == 56, "cause_chain at 56");
PF__STATIC_ASSERT(offsetof(pf_error_cell_t, extra_context) == 64, "extra_context at 64");
PF__STATIC_ASSERT(sizeof(pf_shape_cell_t) == 16, "shape cell is 16 bytes");
PF__STATIC_ASSERT(sizeof(pf_seq_cell_t) == 32, "sequence cell is 32 bytes");
PF__STATIC_ASSERT(offsetof(pf_seq_cell_t, capacity) == 16, "sequence capacity at 16");
PF__STATIC_ASSERT(offsetof(pf_seq_cell_t, data_deleter) == 24, "sequence deleter at 24");
PF__STATIC_ASSERT(offsetof(pf_dl_managed_tensor_versioned_t, manager_ctx) == 8, "versioned ctx");
PF__STATIC_ASSERT(offsetof(pf_dl_managed_tensor_versioned_t, deleter) == 16, "versioned deleter");
PF__STATIC_ASSERT(offsetof(pf_dl_managed_tensor_versioned_t, flags) == 24, "versioned flags");
PF__STATIC_ASSERT(offsetof(pf_dl_managed_tensor_versioned_t, dl_tensor) == 32, "versioned tensor");
PF__STATIC_ASSERT(offsetof(DLManagedTensor, dl_tensor) == 0, "legacy tensor at 0");
PF__STATIC_ASSERT(offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, shape) == 24,
                  "DLTensor layout");
PF__STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
PF__STATIC_ASSERT(PF_TYPE_NONE == 0 && PF_TYPE_INT == 1 && PF_TYPE_BOOL == 2 && PF_TYPE_FLOAT == 3,
                  "POD type indices");
PF__STATIC_ASSERT(PF_TYPE_OPAQUE_PTR == 4 && PF_TYPE_DTYPE == 5 && PF_TYPE_DEVICE == 6 &&
                      PF_TYPE_DLTENSOR_PTR == 7 && PF_TYPE_RAW_STR == 8,
                  "POD type indices");
PF__STATIC_ASSERT(PF_TYPE_BYTE_ARRAY_PTR == 9 && PF_TYPE_OBJECT_RVALUE_REF == 10 &&
                      PF_TYPE_SMALL_STR == 11 && PF_TYPE_SMALL_BYTES == 12 &&
                      PF_TYPE_UNCHANGED == 13,
                  "POD type indices");
PF__STATIC_ASSERT(PF_TYPE_OBJECT == 64 && PF_TYPE_STR == 65 && PF_TYPE_BYTES == 66 &&
                      PF_TYPE_ERROR == 67 && PF_TYPE_FUNCTION == 68 && PF_TYPE_SHAPE == 69,
                  "object type indices");
PF__STATIC_ASSERT(PF_TYPE_TENSOR == 70 && PF_TYPE_ARRAY == 71 && PF_TYPE_MAP == 72 &&
                      PF_TYPE_MODULE == 73 && PF_TYPE_OPAQUE_HOST_OBJECT == 74 &&
                      PF_TYPE_LIST == 75 && PF_TYPE_DICT == 76 && PF_TYPE_VISIT_INTERRUPT == 77 &&
                      PF_TYPE_BIG_INT == 78 && PF_TYPE_DYN_BEGIN == 128,
                  "object type indices");
PF__STATIC_ASSERT(PF_TYPE_ANY == -1 && PF_TYPE_STATIC_OBJECT_BEGIN == 64, "type index bounds");
PF__STATIC_ASSERT(PF_DELETER_STRONG == 1 && PF_DELETER_WEAK == 2 && PF_DELETER_BOTH == 3,
                  "deleter flags");
PF__STATIC_ASSERT(PF_DL_INT == 0 && PF_DL_UINT == 1 && PF_DL_FLOAT == 2 &&
                      PF_DL_OPAQUE_HANDLE == 3 && PF_DL_BFLOAT == 4 && PF_DL_COMPLEX == 5 &&
                      PF_DL_BOOL == 6,
                  "DLPack type codes");
PF__STATIC_ASSERT(PF_DL_FLOAT8_E3M4 == 7 && PF_DL_FLOAT8_E4M3 == 8 &&
                      PF_DL_FLOAT8_E4M3B11FNUZ == 9 && PF_DL_FLOAT8_E4M3FN == 10 &&
                      PF_DL_FLOAT8_E4M3FNUZ == 11 && PF_DL_FLOAT8_E5M2 == 12 &&
                      PF_DL_FLOAT8_E5M2FNUZ == 13 && PF_DL_FLOAT8_E8M0FNU == 14 &&
                      PF_DL_FLOAT6_E2M3FN == 15 && PF_DL_FLOAT6_E3M2FN == 16 &&
                      PF_DL_FLOAT4_E2M1FN == 17,
                  "DLPack float8/6/4 codes");
PF__STATIC_ASSERT(PF_DEV_CPU == 1 && PF_DEV_CUDA == 2 && PF_DEV_CUDA_HOST == 3 &&
                      PF_DEV_OPENCL == 4 && PF_DEV_VULKAN == 7 && PF_DEV_METAL == 8 &&
                      PF_DEV_VPI == 9 && PF_DEV_ROCM == 10 && PF_DEV_ROCM_HOST == 11,
                  "DLPack device types");
PF__STATIC_ASSERT(PF_DEV_EXT_DEV == 12 && PF_DEV_CUDA_MANAGED == 13 && PF_DEV_ONEAPI == 14 &&
                      PF_DEV_WEBGPU == 15 && PF_DEV_HEXAGON == 16 && PF_DEV_MAIA == 17 &&
                      PF_DEV_TRN == 18,
                  "DLPack device types");
PF__STATIC_ASSERT(offsetof(pf_function_cell_t, cpp_call) == 8, "function cell cpp_call at 8");
PF__STATIC_ASSERT(offsetof(pf_shape_cell_t, size) == 8, "shape cell size at 8");
PF__STATIC_ASSERT(offsetof(pf_seq_cell_t, data) == 0 && offsetof(pf_seq_cell_t, size) == 8,
                  "sequence cell data and size");
PF__STATIC_ASSERT(sizeof(pf_dlpack_version_t) == 8, "DLPack version is 8 bytes");
PF__STATIC_ASSERT(sizeof(pf_dl_managed_tensor_versioned_t) == 80, "versioned managed tensor");
PF__STATIC_ASSERT(offsetof(DLManagedTensor, manager_ctx) == 48 &&
                      offsetof(DLManagedTensor, deleter) == 56 && sizeof(DLManagedTensor) == 64,
                  "legacy managed tensor");
PF__STATIC_ASSERT(offsetof(pf_string_cell_t, size) == 8, "string cell size at 8");

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_ABI_H_ */
