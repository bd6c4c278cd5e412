// elf_lookup (shim/symbols/elf_lookup.h): symbol lookup in loaded objects'
// own dynamic symbol tables, checked on this very process against glibc's
// dlsym. This executable links libcuxfer_elftest_a.so then
// libcuxfer_elftest_b.so (elf_lookup_lib_*.cpp) and exports
// cuxfer_elftest_in_exe and a dlopen that counts its calls.
#include "symbols/elf_lookup.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
int cuxfer_elftest_only_here();
int cuxfer_elftest_dup();
int cuxfer_elftest_only_in_b();
int cuxfer_elftest_weak();
int cuxfer_elftest_ifunc();
extern int cuxfer_elftest_resolver_calls;
extern __thread int cuxfer_elftest_tls;
void* cuxfer_elftest_calls_malloc(size_t n);

__attribute__((visibility("default"), noinline)) int cuxfer_elftest_in_exe() { return 3; }

std::atomic<int> g_dlopen_calls{0};
__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  g_dlopen_calls.fetch_add(1);
  using Fn = void* (*)(const char*, int);
  auto real = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34"));
  if (!real) real = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5"));
  return real ? real(file, mode) : nullptr;
}
}

namespace cuxfer::shim {
namespace {

link_map* map_of(const void* addr) {
  Dl_info info;
  link_map* m = nullptr;
  if (!dladdr1(addr, &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP)) return nullptr;
  return m;
}

link_map* main_map() { return map_of(reinterpret_cast<const void*>(&cuxfer_elftest_in_exe)); }
link_map* lib_a() { return map_of(reinterpret_cast<const void*>(&cuxfer_elftest_only_here)); }
link_map* lib_b() { return map_of(reinterpret_cast<const void*>(&cuxfer_elftest_only_in_b)); }

link_map* map_named(const char* base) {
  for (link_map* m = main_map(); m; m = m->l_next) {
    const char* n = m->l_name ? m->l_name : "";
    const char* slash = std::strrchr(n, '/');
    if (std::strcmp(slash ? slash + 1 : n, base) == 0) return m;
  }
  return nullptr;
}

// What the shim did before (and what dlsym says): the object's handle, dlsym
// on it, kept only if the definition is in that very object. dlsym on
// ld.so's handle finds nothing (its map has no search list of its own), so a
// definition dlsym(RTLD_DEFAULT) finds in the object counts too. Not for
// thread-local symbols: their addresses lie in no object.
void* dlsym_in(link_map* m, const char* name, bool* usable) {
  const bool is_main = m == main_map();
  void* h = dlopen(is_main ? nullptr : m->l_name, RTLD_LAZY | RTLD_NOLOAD);
  *usable = h != nullptr;
  if (!h) return nullptr;
  void* p = dlsym(h, name);
  dlclose(h);
  if (p && map_of(p) == m) return p;
  p = dlsym(RTLD_DEFAULT, name);
  return p && map_of(p) == m ? p : nullptr;
}

TEST(ElfLookup, TheTestLibrariesComeInLinkOrder) {
  ASSERT_NE(main_map(), nullptr);
  ASSERT_NE(lib_a(), nullptr);
  ASSERT_NE(lib_b(), nullptr);
  int a = -1, b = -1, i = 0;
  for (link_map* m = main_map(); m; m = m->l_next, ++i) {
    if (m == lib_a()) a = i;
    if (m == lib_b()) b = i;
  }
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);
}

// glibc's malloc, or a sanitizer runtime's when the tests are built with one
// (ASan/TSan define malloc in an object loaded right after the program).
TEST(ElfLookup, MallocAfterTheProgramIsWhatTheLoaderFinds) {
  void* p = elf_lookup_after(main_map(), "malloc");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, dlsym(RTLD_DEFAULT, "malloc"));
  EXPECT_EQ(p, dlsym(RTLD_NEXT, "malloc"));  // called from the program
  EXPECT_NE(map_of(p), main_map());
  EXPECT_EQ(elf_lookup_after(main_map(), "free"), dlsym(RTLD_DEFAULT, "free"));
}

TEST(ElfLookup, SymbolOnlyInOneLibrary) {
  const auto want = reinterpret_cast<void*>(&cuxfer_elftest_only_here);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cuxfer_elftest_only_here"), want);
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_only_here"), want);
  EXPECT_EQ(elf_lookup_after(main_map(), "cuxfer_elftest_only_here"), want);
  // Nothing after the library defines it; the library itself is not searched.
  EXPECT_EQ(elf_lookup_after(lib_a(), "cuxfer_elftest_only_here"), nullptr);
  EXPECT_EQ(elf_lookup_in(lib_b(), "cuxfer_elftest_only_here"), nullptr);
  EXPECT_EQ(elf_lookup_in(main_map(), "cuxfer_elftest_only_here"), nullptr);
  EXPECT_EQ(cuxfer_elftest_only_here(), 11);
}

TEST(ElfLookup, FirstDefinitionAfterTheCaller) {
  void* a = elf_lookup_in(lib_a(), "cuxfer_elftest_dup");
  void* b = elf_lookup_in(lib_b(), "cuxfer_elftest_dup");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<int (*)()>(a)(), 'A');
  EXPECT_EQ(reinterpret_cast<int (*)()>(b)(), 'B');
  EXPECT_EQ(elf_lookup_after(main_map(), "cuxfer_elftest_dup"), a);
  EXPECT_EQ(elf_lookup_after(lib_a(), "cuxfer_elftest_dup"), b);
  EXPECT_EQ(elf_lookup_after(lib_b(), "cuxfer_elftest_dup"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cuxfer_elftest_dup"), a);
}

TEST(ElfLookup, VersionedSymbolGivesTheDefaultVersionLikeDlsym) {
  void* p = elf_lookup_in(lib_a(), "cuxfer_elftest_versioned");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, dlsym(RTLD_DEFAULT, "cuxfer_elftest_versioned"));
  EXPECT_EQ(p, dlvsym(RTLD_DEFAULT, "cuxfer_elftest_versioned", "VER_2"));
  EXPECT_NE(p, dlvsym(RTLD_DEFAULT, "cuxfer_elftest_versioned", "VER_1"));
  EXPECT_EQ(reinterpret_cast<int (*)()>(p)(), 2);
  // glibc's own: pthread_create@@GLIBC_2.34 over pthread_create@GLIBC_2.2.5.
  EXPECT_EQ(elf_lookup_after(main_map(), "pthread_create"), dlsym(RTLD_DEFAULT, "pthread_create"));
}

TEST(ElfLookup, IfuncGivesWhatDlsymGives) {
  void* memcpy_p = elf_lookup_after(main_map(), "memcpy");
  ASSERT_NE(memcpy_p, nullptr);
  EXPECT_EQ(memcpy_p, dlsym(RTLD_DEFAULT, "memcpy"));
  EXPECT_EQ(elf_lookup_after(main_map(), "strlen"), dlsym(RTLD_DEFAULT, "strlen"));
  const int before = cuxfer_elftest_resolver_calls;
  void* p = elf_lookup_in(lib_a(), "cuxfer_elftest_ifunc");
  EXPECT_EQ(cuxfer_elftest_resolver_calls, before + 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, dlsym(RTLD_DEFAULT, "cuxfer_elftest_ifunc"));
  EXPECT_EQ(p, dlsym(RTLD_DEFAULT, "cuxfer_elftest_ifunc_impl"));
  EXPECT_EQ(reinterpret_cast<int (*)()>(p)(), 42);
}

TEST(ElfLookup, WeakTlsUndefinedAndLocal) {
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_weak"), reinterpret_cast<void*>(&cuxfer_elftest_weak));
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_tls"), static_cast<void*>(&cuxfer_elftest_tls));
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_tls"), dlsym(RTLD_DEFAULT, "cuxfer_elftest_tls"));
  // malloc is only referenced (undefined) there; the local one is not exported.
  void* q = cuxfer_elftest_calls_malloc(8);
  std::free(q);
  EXPECT_EQ(elf_lookup_in(lib_a(), "malloc"), nullptr);
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_local_only"), nullptr);
  EXPECT_EQ(elf_lookup_in(lib_a(), "cuxfer_elftest_versioned_v1"), nullptr);
  EXPECT_EQ(elf_lookup_after(main_map(), "cuxfer_elftest_no_such_symbol"), nullptr);
  EXPECT_EQ(elf_lookup_in(nullptr, "malloc"), nullptr);
  EXPECT_EQ(elf_lookup_after(main_map(), nullptr), nullptr);
}

TEST(ElfLookup, TheProgramsOwnTable) {
  // The main program's l_ld pointers, relocated in place by the loader (PIE).
  EXPECT_EQ(elf_lookup_in(main_map(), "cuxfer_elftest_in_exe"), reinterpret_cast<void*>(&cuxfer_elftest_in_exe));
  EXPECT_EQ(elf_lookup_in(main_map(), "dlopen"), reinterpret_cast<void*>(&dlopen));
  EXPECT_EQ(cuxfer_elftest_in_exe(), 3);
}

// A copy of libcuxfer_elftest_a.so's dynamic section with the DT_* pointers
// as link-time values (as glibc leaves a read-only dynamic section), in a
// link_map of its own.
TEST(ElfLookup, UnrelocatedDynamicSection) {
  link_map* a = lib_a();
  ASSERT_NE(a->l_addr, 0u);
  std::vector<ElfW(Dyn)> dyn;
  for (const ElfW(Dyn)* d = a->l_ld;; ++d) {
    ElfW(Dyn) e = *d;
    switch (e.d_tag) {
      case DT_SYMTAB: case DT_STRTAB: case DT_VERSYM: case DT_GNU_HASH: case DT_HASH:
        ASSERT_GE(e.d_un.d_ptr, a->l_addr);
        e.d_un.d_ptr -= a->l_addr;
        break;
      default: break;
    }
    dyn.push_back(e);
    if (d->d_tag == DT_NULL) break;
  }
  link_map fake{};
  fake.l_addr = a->l_addr;
  fake.l_name = a->l_name;
  fake.l_ld = dyn.data();
  EXPECT_EQ(elf_lookup_in(&fake, "cuxfer_elftest_only_here"), reinterpret_cast<void*>(&cuxfer_elftest_only_here));
  EXPECT_EQ(elf_lookup_in(&fake, "cuxfer_elftest_versioned"), dlsym(RTLD_DEFAULT, "cuxfer_elftest_versioned"));
  EXPECT_EQ(elf_lookup_in(&fake, "malloc"), nullptr);
}

// glibc leaves the vDSO's DT_* pointers unrelocated (its dynamic section is
// read-only): the lookup finds them inside the object only with l_addr added.
TEST(ElfLookup, Vdso) {
  link_map* v = map_named("linux-vdso.so.1");
  if (!v) GTEST_SKIP() << "no vDSO in the link map";
  void* p = elf_lookup_in(v, "__vdso_clock_gettime");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(map_of(p), v);
  bool usable = false;
  void* want = dlsym_in(v, "__vdso_clock_gettime", &usable);
  if (usable) {
    EXPECT_EQ(p, want);
  }
  timespec ts{};
  EXPECT_EQ(reinterpret_cast<int (*)(clockid_t, timespec*)>(p)(CLOCK_MONOTONIC, &ts), 0);
  EXPECT_GT(ts.tv_sec + ts.tv_nsec, 0);
}

// Every object of this process, for names of every kind: the same answer as
// dlsym on the object's handle, restricted to the object itself.
TEST(ElfLookup, AgreesWithDlsymOnEveryObject) {
  const char* names[] = {"malloc", "free", "calloc", "realloc", "memcpy", "memmove", "strlen", "strchr",
                         "pthread_create", "dlsym", "dlopen", "clock_gettime", "__vdso_clock_gettime",
                         "environ", "__libc_start_main", "_r_debug", "__tls_get_addr", "_dl_find_object",
                         "_ZSt4cout", "_ZNSt8ios_base4InitC1Ev", "__cxa_finalize", "__gxx_personality_v0",
                         "cuxfer_elftest_dup", "cuxfer_elftest_only_here", "cuxfer_elftest_only_in_b",
                         "cuxfer_elftest_versioned", "cuxfer_elftest_in_exe",
                         "cuxfer_elftest_no_such_symbol"};
  int objects = 0, compared = 0;
  for (link_map* m = main_map(); m; m = m->l_next) {
    ++objects;
    for (const char* n : names) {
      bool usable = false;
      void* want = dlsym_in(m, n, &usable);
      if (!usable) continue;
      ++compared;
      void* got = elf_lookup_in(m, n);
      if (!want && got) {
        // dlsym cannot see a definition in m that an earlier object interposes
        // (the sanitizer runtimes' __tls_get_addr over ld.so's): then the
        // loader's own address-to-symbol lookup must name it, in m.
        Dl_info di{};
        EXPECT_TRUE(dladdr(got, &di) && map_of(got) == m && di.dli_sname && std::strcmp(di.dli_sname, n) == 0)
            << n << " in " << (m->l_name && m->l_name[0] ? m->l_name : "(program)");
        continue;
      }
      EXPECT_EQ(got, want) << n << " in " << (m->l_name && m->l_name[0] ? m->l_name : "(program)");
    }
  }
  EXPECT_GT(objects, 5);
  EXPECT_GT(compared, 5 * static_cast<int>(sizeof(names) / sizeof(names[0])));
}

// The walk holds the loader's list lock (dl_iterate_phdr); called from inside
// another dl_iterate_phdr callback (an unwinder's, say) it must not deadlock.
TEST(ElfLookup, InsideADlIteratePhdrCallback) {
  struct Out {
    void* p = nullptr;
    int calls = 0;
  } out;
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* data) {
        auto* o = static_cast<Out*>(data);
        ++o->calls;
        o->p = elf_lookup_after(main_map(), "malloc");
        return 1;
      },
      &out);
  EXPECT_EQ(out.calls, 1);
  EXPECT_EQ(out.p, dlsym(RTLD_DEFAULT, "malloc"));
}

TEST(ElfLookup, NeverOpensAHandle) {
  const int before = g_dlopen_calls.load();
  for (const char* n : {"malloc", "memcpy", "cuxfer_elftest_dup", "cuxfer_elftest_no_such_symbol", "pthread_create"})
    for (link_map* m = main_map(); m; m = m->l_next) elf_lookup_after(m, n);
  EXPECT_EQ(g_dlopen_calls.load(), before);
  // The counter works.
  void* h = dlopen(nullptr, RTLD_LAZY);
  if (h) dlclose(h);
  EXPECT_EQ(g_dlopen_calls.load(), before + 1);
}

}  // namespace
}  // namespace cuxfer::shim
