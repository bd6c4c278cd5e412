// python_embed SCRIPT [ARGS...]
// A C++ program that embeds CPython and runs SCRIPT, the way a simulator or
// an engine scripts itself: the script copies through the program's own API
// (a built-in module, embedded_cuda), not through ctypes. Built four ways
// (testapps/CMakeLists.txt): against a shared libpython (the interpreter's
// symbols exported by it), against libpython3.X.a without --export-dynamic
// (the symbols hidden, named only by the program's symbol table), that
// build stripped (named nowhere), as a plugin that links the shared
// libpython, which plugin_host.cpp loads RTLD_LOCAL (the symbols exported,
// but outside the global scope), and its module alone as an extension
// module (embedded_cuda.<soabi>.so) for a plain python to import.
//
// Exact traffic:
//   cudaMalloc                          1 call   64 KiB
//   cudaMemcpy H2D pageable             1 call   4 KiB    from main(), before the interpreter starts
//   cudaMemcpy D2H pageable             1 call   64 B     from main(), after the interpreter finalized
//                                                         (checked against the script's last h2d: >= 64 B)
//   and, in between, what SCRIPT asks, through
//     embedded_cuda.h2d(bytes, count)   count calls of `bytes` (<= 64 KiB), H2D pageable
//     embedded_cuda.d2h(bytes, count)   the same, D2H pageable
//   each function releases the GIL around its copies, as a framework's would;
//   d2h checks what it read against the last h2d's pattern (so its bytes must
//   not exceed the last h2d's): a copy the shim changed fails the script.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <vector>

#include "common.h"

namespace {

constexpr size_t kDeviceBytes = 64 << 10;
void* g_device = nullptr;
std::vector<unsigned char> g_host(kDeviceBytes);
uint32_t g_seed = 1;

// Copies `count` times; false with the CUDA error set as a Python exception.
bool copy(size_t bytes, long count, bool to_device) {
  cudaError_t e = cudaSuccess;
  Py_BEGIN_ALLOW_THREADS for (long i = 0; i < count && e == cudaSuccess; ++i) {
    if (to_device) {
      testapp::fill(g_host.data(), bytes, ++g_seed);
      e = cudaMemcpy(g_device, g_host.data(), bytes, cudaMemcpyHostToDevice);
    } else {
      std::memset(g_host.data(), 0, bytes);
      e = cudaMemcpy(g_host.data(), g_device, bytes, cudaMemcpyDeviceToHost);
      if (e == cudaSuccess && !testapp::matches(g_host.data(), bytes, g_seed)) e = cudaErrorUnknown;
    }
  }
  Py_END_ALLOW_THREADS if (e != cudaSuccess)
      PyErr_Format(PyExc_RuntimeError, "python_embed: CUDA error %d", static_cast<int>(e));
  return e == cudaSuccess;
}

PyObject* copies(PyObject* args, bool to_device) {
  Py_ssize_t bytes = 0;
  long count = 0;
  if (!PyArg_ParseTuple(args, "nl", &bytes, &count)) return nullptr;
  if (bytes <= 0 || static_cast<size_t>(bytes) > kDeviceBytes || count < 0) {
    PyErr_SetString(PyExc_ValueError, "python_embed: 0 < bytes <= 64 KiB, count >= 0");
    return nullptr;
  }
  if (!copy(static_cast<size_t>(bytes), count, to_device)) return nullptr;
  return PyLong_FromLong(count);
}

PyObject* h2d(PyObject*, PyObject* args) { return copies(args, true); }
PyObject* d2h(PyObject*, PyObject* args) { return copies(args, false); }

PyMethodDef kMethods[] = {
    {"h2d", h2d, METH_VARARGS, "h2d(bytes, count): count pageable host-to-device copies"},
    {"d2h", d2h, METH_VARARGS, "d2h(bytes, count): count pageable device-to-host copies, checked"},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "embedded_cuda", nullptr, -1, kMethods, nullptr, nullptr, nullptr, nullptr};
PyObject* init_module() { return PyModule_Create(&kModule); }

}  // namespace

#ifdef PYTHON_EMBED_EXTENSION
// embedded_cuda as an extension module that links libcudart.so, which python
// imports with its default dlopen flags (RTLD_LOCAL): the runtime outside the
// global scope, as for a pybind11 CUDA extension built against CUDA::cudart.
// Its device buffer is allocated at import; the script's copies are all.
PyMODINIT_FUNC PyInit_embedded_cuda() {
  if (!g_device && cudaMalloc(&g_device, kDeviceBytes) != cudaSuccess) {
    PyErr_SetString(PyExc_ImportError, "embedded_cuda: cudaMalloc failed (no GPU?)");
    return nullptr;
  }
  return init_module();
}
#else
int run_embedded(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: python_embed SCRIPT [ARGS...]\n");
    return 2;
  }
  testapp::require_gpu("python_embed");
  TA_CHECK(cudaMalloc(&g_device, kDeviceBytes));
  testapp::fill(g_host.data(), 4096, g_seed);
  TA_CHECK(cudaMemcpy(g_device, g_host.data(), 4096, cudaMemcpyHostToDevice));  // before Python runs

  PyImport_AppendInittab("embedded_cuda", init_module);
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;  // the host program's signals stay its own
  std::vector<wchar_t*> wargv;
  for (int i = 1; i < argc; ++i) wargv.push_back(Py_DecodeLocale(argv[i], nullptr));
  PyStatus status = PyConfig_SetArgv(&config, static_cast<Py_ssize_t>(wargv.size()), wargv.data());
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  for (wchar_t* w : wargv) PyMem_RawFree(w);
  if (PyStatus_Exception(status)) {
    std::fprintf(stderr, "python_embed: the interpreter did not start: %s\n",
                 status.err_msg ? status.err_msg : "?");
    return 1;
  }
  FILE* f = std::fopen(argv[1], "r");
  if (!f) {
    std::fprintf(stderr, "python_embed: cannot open %s\n", argv[1]);
    return 1;
  }
  const int rc = PyRun_SimpleFileExFlags(f, argv[1], 1, nullptr);  // closes f
  if (Py_FinalizeEx() < 0 || rc != 0) return 1;
  // After the interpreter is gone: a native site again, from a thread whose
  // Python state no longer exists.
  std::memset(g_host.data(), 0, 64);
  TA_CHECK(cudaMemcpy(g_host.data(), g_device, 64, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(g_host.data(), 64, g_seed));
  TA_CHECK(cudaFree(g_device));
  testapp::done("python_embed");
  return 0;
}

#endif  // PYTHON_EMBED_EXTENSION

#if defined(PYTHON_EMBED_PLUGIN)
// libpython_embed_plugin.so: the same program as a plugin, which
// python_embed_host.cpp loads with dlopen's default RTLD_LOCAL.
extern "C" __attribute__((visibility("default"))) int python_embed_run(int argc, char** argv) {
  return run_embedded(argc, argv);
}
#elif !defined(PYTHON_EMBED_EXTENSION)
int main(int argc, char** argv) { return run_embedded(argc, argv); }
#endif
