/* Stands in for a program that links CPython in without exporting it
 * (file_symbols_test.cpp, shim/python/program_symbols.h): a ".PyRuntime"
 * section holding _PyRuntime, and global functions and objects of the names
 * the shim looks up, none in the dynamic symbol table. Never run.
 * With CUXFER_BEFORE_RUNTIME, something else sits at the section's start
 * (built with -fno-toplevel-reorder): _PyRuntime is not the section. */
#ifdef CUXFER_BEFORE_RUNTIME
__attribute__((section(".PyRuntime"), used)) char cuxfer_before_runtime[64];
#endif
__attribute__((section(".PyRuntime"), used)) char _PyRuntime[256];
const unsigned long Py_Version = 0x030b02f0;
char PyCode_Type[400], PyUnicode_Type[400], PyBytes_Type[400], _Py_NoneStruct[16];
int Py_IsInitialized(void) { return _PyRuntime[0]; }
void* PyGILState_GetThisThreadState(void) { return 0; }
void* PyInterpreterState_Main(void) { return 0; }
int _Py_IsFinalizing(void) { return 0; }
static int hidden_helper(void) { return 1; } /* a local symbol: never found */
int main(void) { return Py_IsInitialized() + hidden_helper(); }
