// libcuxfer_elftest_b.so, for elf_lookup_test: unversioned definitions, one of
// a name libcuxfer_elftest_a.so (before it in the link map) defines too.
extern "C" {
int cuxfer_elftest_dup() { return 'B'; }
int cuxfer_elftest_only_in_b() { return 22; }
}
