// libstdc++'s inline code calls these helpers to throw (a vector grown past
// max_size, .at() out of range, an empty std::function called, a mutex that
// reports an error). In the shim each is a bug, never a state to recover
// from, and an exception must not unwind through the app's frames with the
// shim's locks held: the shim's own definitions (local to libcuxfer.so by its
// version script) say which one and abort. Out of memory is not among them:
// the shim's operator new never fails (core/allocation.cpp).
#include <unistd.h>

#include <bits/functexcept.h>  // their declarations: the definitions below must match
#include <cstdlib>
#include <cstring>

namespace {

[[noreturn]] void internal_error(const char* what) {
  static const char kHead[] = "cuxfer: internal error in the shim (std::";
  static const char kTail[] = "): aborting; please report it\n";
  ssize_t ignored = ::write(STDERR_FILENO, kHead, sizeof kHead - 1);
  ignored = ::write(STDERR_FILENO, what, std::strlen(what));
  ignored = ::write(STDERR_FILENO, kTail, sizeof kTail - 1);
  (void)ignored;
  std::abort();
}

}  // namespace

namespace std {

void __throw_bad_alloc() { internal_error("bad_alloc"); }
void __throw_bad_array_new_length() { internal_error("bad_array_new_length"); }
void __throw_length_error(const char*) { internal_error("length_error"); }
void __throw_logic_error(const char*) { internal_error("logic_error"); }
void __throw_out_of_range(const char*) { internal_error("out_of_range"); }
void __throw_out_of_range_fmt(const char*, ...) { internal_error("out_of_range"); }
void __throw_invalid_argument(const char*) { internal_error("invalid_argument"); }
void __throw_system_error(int) { internal_error("system_error"); }
void __throw_bad_function_call() { internal_error("bad_function_call"); }
void __throw_runtime_error(const char*) { internal_error("runtime_error"); }
void __throw_bad_cast() { internal_error("bad_cast"); }

}  // namespace std
