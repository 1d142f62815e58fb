/* bench/bench_cuda.c: packfn's CUDA kernels (libpackfn_kernels_cuda) on the GPU, called as a
 * user calls them: pf_function_call on the registered packfn.kernels.cuda.<name> with tensor
 * objects from pf_tensor_empty on cuda:0, on one stream made current with pf_stream_set.
 *
 *   Bandwidth: each memory-bound kernel on large inputs (256 MiB of input; --quick: 4 MiB),
 *     timed with CUDA events around N back-to-back packed calls, against cudaMemcpyAsync
 *     device to device of the kernel's input bytes on the same stream, alternating within each
 *     sample; both as GB/s of the bytes moved (a copy of B bytes moves 2B: B read, B written),
 *     and their ratio. Each kernel's byte model counts what it must move, not what it issues:
 *     rms_norm holds rows of up to 8192 f32 / 4096 f64 values in registers and reads x once
 *     (kernels/math_cuda_rows.cu); longer rows are read twice, the second time from L2, and the
 *     model counts x once. Kepler is bound by arithmetic: its GB/s and elements/s are
 *     reported, its ratio is not a bandwidth ratio; the packed call also checks the
 *     eccentricities on the device and waits for that check (a pass over e, 8 bytes copied
 *     back, a stream synchronisation) before it launches, so the same kernel launched raw is
 *     a second row.
 *   Launch cost: a 1024-element float32 vector_add and add_n, as a packed call and as the
 *     library's own launcher called directly (bench_cuda_raw.cu compiles the same kernels and
 *     launchers: the same `<<<>>>` launch and its cudaGetLastError, without packfn), plus
 *     packed calls of CPU no-op functions for the cost of the call alone:
 *     CPU time per launch (M launches in a row, no synchronisation between them), the same with
 *     one synchronisation after the M, and the time of one launch + cudaStreamSynchronize.
 *
 * Every kernel's output is checked once against a host reference before it is timed; a wrong
 * result or any failing CUDA or packfn call exits 1. The report starts with the GPU, the CUDA
 * versions and the run's conditions (timing.h: build, commit, CPU, date, load). Without a CUDA
 * device: prints "bench_cuda: skipped: no CUDA device" and the conditions, writes no --md file
 * and exits 0. Options: --quick (small sizes, few samples: the CTest smoke test), --md FILE (the
 * tables in Markdown).
 *
 * This file: the settings, the helpers every part uses (bench_cuda.h), the device's description
 * and main; the bandwidth part is bench_cuda_bandwidth.c, the launch cost bench_cuda_launch.c. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, for timing.h */

#include "bench_cuda.h"
#include "packfn/kernels.h"
#include "timing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICE 0

/* ---- settings ---- */

bc_config_t bc_cfg;
void* bc_stream;
cudaEvent_t bc_ev_start, bc_ev_stop;
FILE* bc_md;

/* ---- failures: every one exits 1 with a message ---- */

static void die(const char* what, const char* message) {
  fprintf(stderr, "bench_cuda: %s: %s\n", what, message);
  exit(1);
}

void bc_die_raised(const char* what) {
  char message[1024] = "(no error raised)";
  pf_object_t* err = pf_error_take();
  if (err)
    pf_error_format(err, message, sizeof message);
  pf_object_release(err);
  die(what, message);
}

double bc_median(double* v, int n) {
  double lo, mid, hi;
  pf_bench_summarise(v, n, &lo, &mid, &hi);
  return mid;
}

void* bc_xcalloc(size_t n, size_t size) {
  void* p = calloc(n, size);
  if (!p)
    die("host memory", "out of memory");
  return p;
}

/* ---- tensors ---- */

pf_object_t* bc_cuda_tensor(const int64_t* shape, int32_t ndim, int f64) {
  pf_object_t* t;
  OK(pf_tensor_empty(shape, ndim, f64 ? PF_DTYPE_FLOAT64 : PF_DTYPE_FLOAT32,
                     pf_device(PF_DEV_CUDA, DEVICE), &t));
  return t;
}

pf_object_t* bc_cuda_vector(int64_t n, int f64) {
  return bc_cuda_tensor(&n, 1, f64);
}

static int is_f64(pf_object_t* t) {
  return pf_tensor_dltensor(t)->dtype.bits == 64;
}

void bc_fill(pf_object_t* t, int which) {
  CK(pf_bench_cuda_fill(bc_data_of(t), is_f64(t), bc_numel_of(t), which, bc_stream));
}

/* Element i of a CUDA tensor, read back (after the stream was synchronised). */
double bc_read_back(pf_object_t* t, int64_t i) {
  if (is_f64(t)) {
    double v;
    CK(cudaMemcpy(&v, (const double*)bc_data_of(t) + i, sizeof v, cudaMemcpyDeviceToHost));
    return v;
  }
  float v;
  CK(cudaMemcpy(&v, (const float*)bc_data_of(t) + i, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

/* Element i of input `which` as the device holds it (rounded to float32 unless f64). */
double bc_pattern(int which, int64_t i, int f64) {
  double v = pf_bench_cuda_pattern(which, i);
  return f64 ? v : (double)(float)v;
}

pf_object_t* bc_global_function(const char* name) {
  pf_object_t* fn;
  OK(pf_global_get(name, &fn));
  if (!fn)
    die(name, "not registered (libpackfn_kernels_cuda not loaded?)");
  return fn;
}

/* ---- checks against the host ---- */

void bc_expect_close(const char* what, int64_t i, double got, double ref, double tol) {
  if (!(fabs(got - ref) <= tol * fmax(1.0, fabs(ref)))) {
    fprintf(stderr, "bench_cuda: %s: wrong result at index %lld: got %.17g, expected %.17g\n", what,
            (long long)i, got, ref);
    exit(1);
  }
}

/* ---- the device and the run's conditions ---- */

static void print_conditions(void) {
  struct cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, DEVICE));
  int driver = 0, runtime = 0, mem_khz = 0, sm_khz = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, DEVICE));
  CK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, DEVICE));
  /* Double data rate: two transfers per memory clock over the bus width. */
  double peak = 2.0 * mem_khz * 1e3 * (p.memoryBusWidth / 8.0) / 1e9;
  char line[512];
  snprintf(line, sizeof line,
           "GPU %d: %s, sm_%d%d, %d SMs at %.0f MHz, %.1f GiB, L2 %.0f MiB, %d-bit bus at %.0f "
           "MHz (%.0f GB/s theoretical)",
           DEVICE, p.name, p.major, p.minor, p.multiProcessorCount, sm_khz / 1e3,
           (double)p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0, p.memoryBusWidth,
           mem_khz / 1e3, peak);
  char versions[256];
  snprintf(versions, sizeof versions,
           "CUDA driver API %d.%d, runtime %d.%d; packfn %s; %s run (--quick: small sizes)",
           driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
           PF_VERSION_STRING, bc_cfg.quick ? "quick" : "full");
  const char* conditions =
      "one non-default stream (pf_cuda_stream_create, made current with pf_stream_set) carries "
      "every call, copy and event; tensors from pf_tensor_empty on cuda:0 (cudaMalloc)";
  printf("bench_cuda: packfn CUDA kernels (libpackfn_kernels_cuda)\n%s\n%s\n%s\n", line, versions,
         conditions);
  pf_bench_conditions_print(stdout, "");
  if (bc_md) {
    fprintf(bc_md, "# bench_cuda\n\n- %s\n- %s\n- %s\n", line, versions, conditions);
    pf_bench_conditions_print(bc_md, "- ");
    fprintf(bc_md, "\n");
  }
}

static void usage(const char* argv0) {
  fprintf(stderr, "usage: %s [--quick] [--md FILE]\n", argv0);
}

int main(int argc, char** argv) {
  pf_bench_conditions(); /* the date and load average at start */
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      bc_cfg.quick = 1;
    } else if (strcmp(argv[i], "--md") == 0 && i + 1 < argc) {
      bc_cfg.md_path = argv[++i];
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (bc_cfg.quick) {
    bc_cfg.big = (int64_t)1 << 20;
    bc_cfg.one_row = (int64_t)1 << 16;
    bc_cfg.kepler = (int64_t)1 << 16;
    bc_cfg.reps = 3;
    bc_cfg.sample_ms = 1.0;
    bc_cfg.rounds = 3;
    bc_cfg.async_launches = 20;
    bc_cfg.sync_launches = 10;
  } else {
    bc_cfg.big = (int64_t)1 << 26;
    bc_cfg.one_row = (int64_t)1 << 20;
    bc_cfg.kepler = (int64_t)1 << 22;
    bc_cfg.reps = 7;
    bc_cfg.sample_ms = 5.0;
    bc_cfg.rounds = 31;
    bc_cfg.async_launches = 200;
    bc_cfg.sync_launches = 100;
  }

  int32_t devices = 0;
  OK(pf_cuda_device_count(&devices));
  if (devices == 0) {
    printf("bench_cuda: skipped: no CUDA device\n");
    pf_bench_conditions_print(stdout, "bench_cuda: ");
    return 0;
  }
  /* Keeps libpackfn_kernels_cuda linked (its registrations are what this program calls). */
  if (pf_kernels_cuda_count() != pf_kernels_count() || !pf_kernels_have_cuda())
    die("libpackfn_kernels_cuda", "the CUDA kernels are not registered");
  if (bc_cfg.md_path) {
    bc_md = fopen(bc_cfg.md_path, "w");
    if (!bc_md) {
      perror(bc_cfg.md_path);
      return 1;
    }
  }

  CK(cudaSetDevice(DEVICE));
  OK(pf_cuda_stream_create(DEVICE, &bc_stream));
  OK(pf_stream_set(pf_device(PF_DEV_CUDA, DEVICE), bc_stream, NULL));
  CK(cudaEventCreate(&bc_ev_start));
  CK(cudaEventCreate(&bc_ev_stop));
  print_conditions();
  fflush(stdout);

  double t0 = pf_bench_now_ns();
  bc_run_bandwidth();
  fflush(stdout);
  bc_run_launch();

  CK(cudaEventDestroy(bc_ev_start));
  CK(cudaEventDestroy(bc_ev_stop));
  OK(pf_stream_set(pf_device(PF_DEV_CUDA, DEVICE), NULL, NULL));
  OK(pf_cuda_stream_destroy(DEVICE, bc_stream));
  printf("\nbench_cuda: every kernel's output checked; %.1f s\n", (pf_bench_now_ns() - t0) * 1e-9);
  if (bc_md && fclose(bc_md) != 0) {
    perror(bc_cfg.md_path);
    return 1;
  }
  return 0;
}
