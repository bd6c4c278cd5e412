// Where libcupti is looked for, in order, as a pure function of what the
// process has loaded and what it was told: unit-tested without a GPU.
//
// Users who installed CUDA from pip wheels (PyTorch, CuPy, JAX) have no
// toolkit: their libcupti.so.13 sits in the nvidia packages beside the
// runtime the process loaded (nvidia/cu13/lib for CUDA 13 wheels). The
// toolkit's paths come after those, so that the CUPTI matching the runtime in
// use wins over whatever /usr/local/cuda holds.
#pragma once

#include <string>
#include <vector>

namespace cuxfer::shim {

struct CuptiCandidate {
  std::string path;  // what dlopen is given: a file, or a bare soname
  std::string why;   // for the report: "beside the loaded .../libcudart.so.13"
};

struct CuptiSearch {
  std::string override_path;             // CUXFER_CUPTI_LIB: the only candidate when set
  std::vector<std::string> loaded;       // paths of the process's loaded objects, link-map order
  std::string search_path;               // CUXFER_CUPTI_SEARCH_PATH: ':'-separated folders
  std::vector<std::string> toolkit_roots;  // CUDA_HOME, CUDA_PATH, /usr/local/cuda
};

// Every place to try, first first, without duplicates.
std::vector<CuptiCandidate> cupti_candidates(const CuptiSearch& s);

}  // namespace cuxfer::shim
