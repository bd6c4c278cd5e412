#include "symbols/elf_lookup.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cuxfer::shim {
namespace {

// Where an object lies ([lo, hi): its PT_LOAD segments) and this thread's
// block of its PT_TLS segment, from the loader's program-header list
// (dl_iterate_phdr: a walk under the loader's list lock, no handle, no
// initialiser, no allocation).
struct Mapping {
  const link_map* map;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  void* tls = nullptr;
  bool found = false;
};

int find_mapping(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<Mapping*>(data);
  if (info->dlpi_addr != out->map->l_addr) return 0;
  bool same_dynamic = false;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t at = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_DYNAMIC && at == reinterpret_cast<uintptr_t>(out->map->l_ld)) {
      same_dynamic = true;
    } else if (ph.p_type == PT_LOAD && ph.p_memsz) {
      if (at < lo) lo = at;
      if (at + ph.p_memsz > hi) hi = at + ph.p_memsz;
    }
  }
  if (!same_dynamic || lo >= hi) return 0;
  out->lo = lo;
  out->hi = hi;
  out->tls = info->dlpi_tls_data;
  out->found = true;
  return 1;
}

// The parts of an object's dynamic section a lookup needs, as addresses.
struct Table {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  const ElfW(Half)* versym = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const ElfW(Word)* sysv_hash = nullptr;
};

// glibc adds l_addr to the DT_* pointers of l_ld in place when the dynamic
// section is writable (most objects, the main program included) and leaves
// them as link-time addresses when it is read-only (the vDSO, some targets):
// a value is taken as it is if it lies inside the object, else with l_addr
// added if that does; otherwise it is not trusted.
uintptr_t to_address(const Mapping& where, const link_map* m, ElfW(Addr) v) {
  if (!where.found) return m->l_addr == 0 || v >= m->l_addr ? v : v + m->l_addr;
  if (v >= where.lo && v < where.hi) return v;
  const uintptr_t moved = v + m->l_addr;
  return moved >= where.lo && moved < where.hi ? moved : 0;
}

bool read_table(const link_map* m, const Mapping& where, Table& t) {
  if (!m->l_ld) return false;
  for (const ElfW(Dyn)* d = m->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: t.symtab = reinterpret_cast<const ElfW(Sym)*>(to_address(where, m, d->d_un.d_ptr)); break;
      case DT_STRTAB: t.strtab = reinterpret_cast<const char*>(to_address(where, m, d->d_un.d_ptr)); break;
      case DT_STRSZ: t.strsz = d->d_un.d_val; break;
      case DT_VERSYM: t.versym = reinterpret_cast<const ElfW(Half)*>(to_address(where, m, d->d_un.d_ptr)); break;
      case DT_GNU_HASH: t.gnu_hash = reinterpret_cast<const uint32_t*>(to_address(where, m, d->d_un.d_ptr)); break;
      case DT_HASH: t.sysv_hash = reinterpret_cast<const ElfW(Word)*>(to_address(where, m, d->d_un.d_ptr)); break;
      default: break;
    }
  }
  return t.symtab && t.strtab && (t.gnu_hash || t.sysv_hash);
}

uint32_t gnu_hash_of(const char* s) {
  uint32_t h = 5381;
  for (auto c = reinterpret_cast<const unsigned char*>(s); *c; ++c) h = h * 33 + *c;
  return h;
}

uint32_t sysv_hash_of(const char* s) {
  uint32_t h = 0;
  for (auto c = reinterpret_cast<const unsigned char*>(s); *c; ++c) {
    h = (h << 4) + *c;
    const uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// glibc's check for dlsym (no version asked, DL_LOOKUP_RETURN_NEWEST): a
// defined code/data symbol of global or weak binding whose name matches; an
// unversioned one (version index 0 or 1) is taken at once, a versioned one
// only if it is not hidden (the default version, name@@V) and is the only
// such. Hidden versions (name@V) are never taken.
struct Search {
  const Table& t;
  const char* name;
  const ElfW(Sym)* found = nullptr;
  const ElfW(Sym)* versioned = nullptr;
  unsigned versions = 0;

  // true: stop (found).
  bool consider(size_t index) {
    const ElfW(Sym)& s = t.symtab[index];
    if (t.strsz && s.st_name >= t.strsz) return false;
    if (s.st_shndx == SHN_UNDEF) return false;
    const unsigned type = ELF64_ST_TYPE(s.st_info);
    if (s.st_value == 0 && s.st_shndx != SHN_ABS && type != STT_TLS) return false;
    constexpr unsigned kAllowed = (1u << STT_NOTYPE) | (1u << STT_OBJECT) | (1u << STT_FUNC) |
                                  (1u << STT_COMMON) | (1u << STT_TLS) | (1u << STT_GNU_IFUNC);
    if (type > 31 || !((1u << type) & kAllowed)) return false;
    const unsigned bind = ELF64_ST_BIND(s.st_info);
    if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) return false;
    if (std::strcmp(t.strtab + s.st_name, name) != 0) return false;
    if (t.versym) {
      const ElfW(Half) v = t.versym[index];
      if ((v & 0x7fff) >= 2) {
        if ((v & 0x8000) == 0 && versions++ == 0) versioned = &s;
        return false;
      }
    }
    found = &s;
    return true;
  }

  const ElfW(Sym)* result() const { return found ? found : (versions == 1 ? versioned : nullptr); }
};

const ElfW(Sym)* find_gnu(const Table& t, const char* name) {
  const uint32_t* h = t.gnu_hash;
  const uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2], bloom_shift = h[3];
  if (nbuckets == 0 || bloom_size == 0) return nullptr;
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(h + 4);
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  constexpr uint32_t kBits = sizeof(ElfW(Addr)) * 8;
  const uint32_t h1 = gnu_hash_of(name);
  const ElfW(Addr) word = bloom[(h1 / kBits) % bloom_size];
  const ElfW(Addr) mask = (ElfW(Addr){1} << (h1 % kBits)) | (ElfW(Addr){1} << ((h1 >> bloom_shift) % kBits));
  if ((word & mask) != mask) return nullptr;
  uint32_t i = buckets[h1 % nbuckets];
  if (i == 0 || i < symoffset) return nullptr;
  Search s{t, name};
  for (;; ++i) {
    const uint32_t h2 = chain[i - symoffset];
    if ((h1 | 1) == (h2 | 1) && s.consider(i)) break;
    if (h2 & 1) break;  // end of this bucket's chain
  }
  return s.result();
}

const ElfW(Sym)* find_sysv(const Table& t, const char* name) {
  const ElfW(Word)* h = t.sysv_hash;
  const ElfW(Word) nbucket = h[0], nchain = h[1];
  if (nbucket == 0) return nullptr;
  const ElfW(Word)* bucket = h + 2;
  const ElfW(Word)* chain = bucket + nbucket;
  Search s{t, name};
  ElfW(Word) steps = 0;
  for (ElfW(Word) i = bucket[sysv_hash_of(name) % nbucket]; i != STN_UNDEF && i < nchain && steps <= nchain;
       i = chain[i], ++steps)
    if (s.consider(i)) break;
  return s.result();
}

// glibc's elf_ifunc_invoke: how the loader calls an IFUNC resolver here.
uintptr_t call_resolver(uintptr_t resolver) {
#if defined(__x86_64__) || defined(__i386__)
  return reinterpret_cast<uintptr_t (*)()>(resolver)();
#elif defined(__aarch64__)
  struct IfuncArg {
    unsigned long size, hwcap, hwcap2;
  } arg{sizeof(IfuncArg), getauxval(AT_HWCAP), getauxval(AT_HWCAP2)};
  constexpr uint64_t kIfuncArgHwcap = 1ULL << 62;  // _IFUNC_ARG_HWCAP
  return reinterpret_cast<uintptr_t (*)(uint64_t, const IfuncArg*)>(resolver)(arg.hwcap | kIfuncArgHwcap, &arg);
#else
  return reinterpret_cast<uintptr_t (*)(unsigned long)>(resolver)(getauxval(AT_HWCAP));
#endif
}

}  // namespace

void* elf_lookup_in(const link_map* m, const char* name) {
  if (!m || !name || !m->l_ld) return nullptr;
  Mapping where{m};
  dl_iterate_phdr(find_mapping, &where);
  Table t;
  if (!read_table(m, where, t)) return nullptr;
  const ElfW(Sym)* s = t.gnu_hash ? find_gnu(t, name) : find_sysv(t, name);
  if (!s) return nullptr;
  const unsigned type = ELF64_ST_TYPE(s->st_info);
  if (type == STT_TLS) return where.tls ? static_cast<char*>(where.tls) + s->st_value : nullptr;
  // An absolute symbol's value is its address (glibc's SYMBOL_ADDRESS).
  const uintptr_t at = s->st_shndx == SHN_ABS ? s->st_value : m->l_addr + s->st_value;
  return reinterpret_cast<void*>(type == STT_GNU_IFUNC ? call_resolver(at) : at);
}

namespace {

struct After {
  const link_map* after;
  const char* name;
  void* found = nullptr;
};

// Called once by dl_iterate_phdr, so that the walk runs under the loader's
// list lock (taken recursively by the inner dl_iterate_phdr calls): a
// concurrent dlclose cannot unlink and unmap an object while it is read.
int walk_after(dl_phdr_info*, size_t, void* data) {
  auto* a = static_cast<After*>(data);
  for (const link_map* m = a->after->l_next; m; m = m->l_next)
    if ((a->found = elf_lookup_in(m, a->name))) break;
  return 1;
}

}  // namespace

void* elf_lookup_after(const link_map* after, const char* name) {
  if (!after || !name) return nullptr;
  After a{after, name};
  dl_iterate_phdr(walk_after, &a);
  return a.found;
}

const link_map* elf_object_defining(const char* name) {
  if (!name) return nullptr;
  struct Search {
    const char* name;
    const link_map* found = nullptr;
  } search{name};
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        for (const link_map* m = _r_debug.r_map; m; m = m->l_next)
          if (elf_lookup_in(m, s->name)) {
            s->found = m;
            break;
          }
        return 1;  // one callback: the walk runs under the list lock (see walk_after)
      },
      &search);
  return search.found;
}

uint64_t loader_generation() {
  uint64_t g = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
          *static_cast<uint64_t*>(data) = info->dlpi_adds + info->dlpi_subs;
        return 1;  // the counters are the same in every entry: the first is enough
      },
      &g);
  return g;
}

uint64_t loader_unloads() {
  static std::atomic<uint64_t> calls{0};  // a fresh value each time where the loader does not count
  uint64_t n = 0;
  const bool counted = dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) -> int {
        if (size < offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 2;
        *static_cast<uint64_t*>(data) = info->dlpi_subs;
        return 1;
      },
      &n) == 1;
  return counted ? n : ~(calls.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace cuxfer::shim
