/* packfn devices: data types and devices (parse, print, compare), the per-device allocators
 * tensors get memory from, and the current stream of each device. No tensor objects here:
 * those are in packfn/tensor.h. */
#ifndef PACKFN_DEVICE_H_
#define PACKFN_DEVICE_H_

#include "packfn/abi.h"

PF_EXTERN_C_BEGIN

/* ======================================================================================
 * Data types
 * ====================================================================================== */

/* Data types as expressions (compound literals in C, temporaries in C++; usable in function
 * scope, not as constant initialisers of static data). Bool is DLPack's {6, 8, 1}: one byte per
 * element. */
#define PF_DTYPE_BOOL       (PF__LITERAL(DLDataType){PF_DL_BOOL, 8, 1})
#define PF_DTYPE_INT8       (PF__LITERAL(DLDataType){PF_DL_INT, 8, 1})
#define PF_DTYPE_INT16      (PF__LITERAL(DLDataType){PF_DL_INT, 16, 1})
#define PF_DTYPE_INT32      (PF__LITERAL(DLDataType){PF_DL_INT, 32, 1})
#define PF_DTYPE_INT64      (PF__LITERAL(DLDataType){PF_DL_INT, 64, 1})
#define PF_DTYPE_UINT8      (PF__LITERAL(DLDataType){PF_DL_UINT, 8, 1})
#define PF_DTYPE_UINT16     (PF__LITERAL(DLDataType){PF_DL_UINT, 16, 1})
#define PF_DTYPE_UINT32     (PF__LITERAL(DLDataType){PF_DL_UINT, 32, 1})
#define PF_DTYPE_UINT64     (PF__LITERAL(DLDataType){PF_DL_UINT, 64, 1})
#define PF_DTYPE_FLOAT16    (PF__LITERAL(DLDataType){PF_DL_FLOAT, 16, 1})
#define PF_DTYPE_FLOAT32    (PF__LITERAL(DLDataType){PF_DL_FLOAT, 32, 1})
#define PF_DTYPE_FLOAT64    (PF__LITERAL(DLDataType){PF_DL_FLOAT, 64, 1})
#define PF_DTYPE_BFLOAT16   (PF__LITERAL(DLDataType){PF_DL_BFLOAT, 16, 1})
#define PF_DTYPE_COMPLEX64  (PF__LITERAL(DLDataType){PF_DL_COMPLEX, 64, 1})
#define PF_DTYPE_COMPLEX128 (PF__LITERAL(DLDataType){PF_DL_COMPLEX, 128, 1})

/* Buffer size that holds every text pf_dtype_format writes, NUL included: the longest is the
 * fallback "dtype(code=255, bits=255, lanes=65535)" (38 characters). */
#define PF_DTYPE_STR_MAX 48

/* A data type from its three fields. Never fails. */
PF_INLINE DLDataType pf_dtype(uint8_t code, uint8_t bits, uint16_t lanes) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = lanes;
  return t;
}

/* 1 when a and b are the same data type (all three fields), else 0. */
PF_INLINE int pf_dtype_equal(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/* Bytes one element occupies when whole (bits * lanes a multiple of 8), else 0 (sub-byte types
 * such as int4 or float4_e2m1fn, which DLPack packs). */
PF_INLINE size_t pf_dtype_bytes(DLDataType t) {
  size_t bits = PF__CAST(size_t, t.bits) * t.lanes;
  return bits % 8 == 0 ? bits / 8 : 0;
}

/* 1 when `t` is a data type packfn knows: a known code with a width it allows (int/uint 1-64
 * bits, float 16/32/64, bfloat 16, complex 32/64/128, bool 8, handle 64, the float8/6/4
 * formats at their widths) and lanes >= 1. Never raises. */
PF_API int pf_dtype_is_valid(DLDataType t);

/* Parses a data type name: "bool", "int8".."int64" (any width 1-64: "int4"), "uint8",
 * "float16"/"float32"/"float64", "bfloat16", "complex64"/"complex128", "handle", the ml_dtypes
 * names "float8_e4m3fn", "float8_e5m2", ..., "float4_e2m1fn", each optionally followed by
 * "x<lanes>" for vectors ("int8x4", "float32x2"). Each type has one name: a width or lane
 * count written with a leading zero ("int08", "int8x04") is refused, and so is the lane count 1
 * ("int8x1": the name of int8 is "int8"). Returns 0 with the type in *out, or -1 with ValueError
 * (NULL s or out, unknown name, width or lanes out of range or with a leading zero, lanes 1; the
 * message quotes s); *out is zeroed on failure. */
PF_API int pf_dtype_parse(const char* s, DLDataType* out);

/* Writes the name of `dtype` ("float32", "int8x4", "bool") into buf, NUL-terminated; a type
 * pf_dtype_is_valid rejects is written "dtype(code=C, bits=B, lanes=L)". Valid types round-trip
 * through pf_dtype_parse. Returns 0, or -1 with ValueError when buf is NULL or `size` is too
 * small (buf then holds as much as fits, NUL-terminated, when size > 0). PF_DTYPE_STR_MAX
 * bytes always suffice. */
PF_API int pf_dtype_format(DLDataType dtype, char* buf, size_t size);

/* ======================================================================================
 * Devices
 * ====================================================================================== */

/* Buffer size that holds every text pf_device_format writes, NUL included. */
#define PF_DEVICE_STR_MAX 32

/* A device from its type (PF_DEV_*) and index. Never fails. */
PF_INLINE DLDevice pf_device(int32_t device_type, int32_t device_id) {
  DLDevice d;
  d.device_type = PF__CAST(DLDeviceType, device_type);
  d.device_id = device_id;
  return d;
}

/* The host: {cpu, 0}. */
#define PF_DEVICE_CPU pf_device(PF_DEV_CPU, 0)

/* 1 when a and b are the same device (type and index), else 0. */
PF_INLINE int pf_device_equal(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

/* Name of a device type ("cpu", "cuda", "cuda_host", "cuda_managed", "rocm", ...), a static
 * string, or NULL for a type packfn does not know. Never raises. */
PF_API const char* pf_device_type_name(int32_t device_type);

/* Parses "cpu", "cuda", "cuda:1", "cuda_host", "rocm:0", ... (a device type name from
 * pf_device_type_name, optionally ":" and a decimal index; the index defaults to 0). Returns 0
 * with the device in *out, or -1 with ValueError (NULL s or out, unknown name, bad or
 * out-of-range index, an index with a leading zero; the message quotes s); *out is zeroed on
 * failure. */
PF_API int pf_device_parse(const char* s, DLDevice* out);

/* Writes "<type>:<index>" ("cpu:0", "cuda:1") into buf, NUL-terminated; an unknown type is
 * written "device(<type>):<index>". Known types with an index >= 0 round-trip through
 * pf_device_parse (which refuses a negative index and leading zeros). Returns 0,
 * or -1 with ValueError when buf is NULL or too small (buf then holds what fits). */
PF_API int pf_device_format(DLDevice device, char* buf, size_t size);

/* ======================================================================================
 * Per-device allocators
 * ====================================================================================== */

/* Alignment, in bytes, of every buffer pf_tensor_empty asks an allocator for: DLPack asks
 * that data pointers be aligned to 256 bytes, as CUDA's are. */
#define PF_TENSOR_ALIGNMENT 256

/* How tensors get memory on one device type. A host installs one per device type with
 * pf_allocator_set; packfn installs the CPU one itself and libpackfn_cuda those for cuda,
 * cuda_host and cuda_managed. The hooks may be called from any thread. */
typedef struct pf_allocator_s {
  void* ctx; /* handed to every hook; must outlive every buffer the allocator handed out */
  /* Allocates `nbytes` (> 0) aligned to `alignment` on `device`: 0 with the buffer in *out,
   * or -1 with an error raised (MemoryError for lack of memory; one is raised for a hook that
   * fails without raising; an error the caller left pending becomes its cause, as with any
   * raise). For the CPU, CUDA and ROCm types a buffer off `alignment`
   * is given back to `free` and refused with RuntimeError. Required. */
  int (*alloc)(void* ctx, DLDevice device, size_t nbytes, size_t alignment, void** out);
  /* Frees a buffer `alloc` returned for `device`. Must not fail. Required. */
  void (*free)(void* ctx, DLDevice device, void* ptr);
  /* Copies `nbytes` between the host and this device type (or within it), ordered on the
   * current stream of the device side (pf_stream_get) and complete when it returns: 0, or -1
   * with an error raised. `dst` and `src` are the tensors' data + byte_offset. For a device
   * type other than the CUDA and ROCm ones they may overlap or be equal (packfn compares only
   * those types' addresses). Optional (NULL: pf_dltensor_copy refuses such copies). */
  int (*copy)(void* ctx, void* dst, DLDevice dst_device, const void* src, DLDevice src_device,
              size_t nbytes);
} pf_allocator_t;

/* Installs a copy of `allocator` for `device_type` (1..PF_ALLOCATOR_MAX_DEVICE_TYPE - 1),
 * replacing the one there. Tensors keep the free hook and ctx they were allocated with, so
 * replacing is safe while they live (the old ctx must stay valid until they die); copies use
 * the hooks installed when they run, also for older tensors. NULL removes the entry;
 * for the CPU it restores packfn's own allocator. The struct is copied (the caller keeps
 * `allocator`; ctx is borrowed as said above). Thread-safe. Returns 0, or -1 with ValueError
 * (device type out of range, alloc or free missing), the installed allocator then unchanged. */
PF_API int pf_allocator_set(int32_t device_type, const pf_allocator_t* allocator);

/* Copies the allocator installed for `device_type` into *out. Follows the lookup rule (see
 * packfn/function.h): when none is installed, 0 with *out zeroed (out->alloc NULL) and
 * nothing raised; what needs one (pf_tensor_empty) raises KeyError naming the device type
 * (and, for CUDA types, saying to link libpackfn_cuda). The hooks and ctx copied are the
 * installed allocator's (ctx borrowed). -1 with ValueError (NULL out, device type out of
 * range); *out is then zeroed (when out is not NULL). */
PF_API int pf_allocator_get(int32_t device_type, pf_allocator_t* out);

/* One more than the largest device type an allocator may be installed for. */
#define PF_ALLOCATOR_MAX_DEVICE_TYPE 64

/* ======================================================================================
 * Current streams
 * ====================================================================================== */

/* The stream the calling thread has made current for `device` (a cudaStream_t for CUDA), or
 * NULL for the device's default stream. Kernels launch on it. Never raises. In the thread-exit
 * destructors that run after packfn's (the thread's stream table is freed by one), every
 * device reads as its default stream again.
 * Joined with TVM-FFI (interop.h) whose library has TVMFFIEnvSetStream and TVMFFIEnvGetStream,
 * the thread's current streams are TVM-FFI's environment streams, one table for both runtimes
 * (device types 0..63, indices 0..1023; other devices stay packfn's alone): a stream a host
 * made current through TVM-FFI is the one packfn's kernels launch on, and the other way round.
 * Streams the thread made current before the join move there at its first stream call after
 * it, for each device where TVM-FFI's table holds the default (a stream made current through
 * TVM-FFI since stays, and packfn's is dropped). Once C++ thread_locals are destroyed in the
 * thread's exit (TVM-FFI's table is one), the thread's streams are packfn's own again, all
 * default. Not covered: a thread whose first stream call after the join comes from one of its
 * pthread key destructors reads TVM-FFI's destroyed table (a crash) when it had used that
 * table, or makes it anew and leaks it (docs/interop.md, "Streams"); one stream call before the
 * thread's exit avoids both. */
PF_API void* pf_stream_get(DLDevice device);

/* Makes `stream` current for `device` in the calling thread (NULL returns to the default
 * stream). When `prev` is not NULL it receives the stream current before, to restore later.
 * The thread's first non-default stream allocates its table (about 520 bytes, found through a
 * pthread key, freed at thread exit); later calls allocate nothing. Returns 0, or -1 with
 * RuntimeError when the thread already holds PF_STREAM_MAX_DEVICES non-default streams for
 * other devices or when no thread key could be had for the table ("no thread key": the process
 * ran out of pthread keys), or MemoryError when the table finds no memory; *prev is then NULL.
 * Joined with TVM-FFI (see pf_stream_get) the stream is set in TVM-FFI's table, which has no
 * PF_STREAM_MAX_DEVICES limit; the first stream call of a thread after the join allocates the
 * thread's table and registers its exit hook there (MemoryError when either fails), and an
 * error TVMFFIEnvSetStream raises (out of memory) comes back raised as it is. */
PF_API int pf_stream_set(DLDevice device, void* stream, void** prev);

/* Devices per thread that may hold a non-default current stream at once: 8 GPUs of a few
 * device types each, with room to spare; the size of each thread's table. */
#define PF_STREAM_MAX_DEVICES 32

PF_EXTERN_C_END
#endif /* PACKFN_DEVICE_H_ */
