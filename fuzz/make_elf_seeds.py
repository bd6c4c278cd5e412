#!/usr/bin/env python3
"""Writes the seeds of fuzz/corpus/fuzz_elf_sections/ (run by hand; stdlib only):

  embedder.bin  structured mode (fuzz_elf_sections.cpp: first byte odd): 5 sections, the
                names' table, a .PyRuntime of 64 bytes, a .symtab naming _PyRuntime (at
                the section's start) and Py_IsInitialized (global), and its .strtab
  raw.bin       raw mode (first byte even): the same file with its header, as read from disk

  python3 fuzz/make_elf_seeds.py fuzz/corpus/fuzz_elf_sections
"""
import struct
import sys
from pathlib import Path

SHDR = "<IIQQQQIIQQ"  # Elf64_Shdr
SYM = "<IBBHQQ"       # Elf64_Sym
EHDR_SIZE, SHDR_SIZE, SYM_SIZE = 64, 64, 24


def sections_and_data(base: int):
    """The section header table (5 entries) and the data after it; offsets from the file's start."""
    names = b"\0.shstrtab\0.PyRuntime\0.symtab\0.strtab\0"
    strtab = b"\0_PyRuntime\0Py_IsInitialized\0"
    runtime = bytes(64)
    syms = struct.pack(SYM, 0, 0, 0, 0, 0, 0)
    syms += struct.pack(SYM, 1, (1 << 4) | 1, 0, 2, 0x4000, 64)      # _PyRuntime: GLOBAL OBJECT, section 2
    syms += struct.pack(SYM, 12, (1 << 4) | 2, 0, 2, 0x4100, 16)     # Py_IsInitialized: GLOBAL FUNC
    data_off = base + 5 * SHDR_SIZE
    blobs, offsets = [names, runtime, syms, strtab], []
    for b in blobs:
        offsets.append(data_off)
        data_off += len(b)
    shdrs = struct.pack(SHDR, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    shdrs += struct.pack(SHDR, 1, 3, 0, 0, offsets[0], len(names), 0, 0, 1, 0)                  # .shstrtab
    shdrs += struct.pack(SHDR, 11, 1, 3, 0x4000, offsets[1], len(runtime), 0, 0, 32, 0)         # .PyRuntime
    shdrs += struct.pack(SHDR, 22, 2, 0, 0, offsets[2], len(syms), 4, 1, 8, SYM_SIZE)           # .symtab -> 4
    shdrs += struct.pack(SHDR, 30, 3, 0, 0, offsets[3], len(strtab), 0, 0, 1, 0)                # .strtab
    return shdrs + b"".join(blobs)


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    # Structured: byte 1 % 32 + 1 = 5 sections, byte 2 % 6 = 1 (.shstrtab); table right after the header.
    (out / "embedder.bin").write_bytes(bytes([1, 4, 1]) + sections_and_data(EHDR_SIZE))
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", ident, 2, 62, 1, 0, 0, EHDR_SIZE, 0, EHDR_SIZE, 0, 0,
                       SHDR_SIZE, 5, 1)
    (out / "raw.bin").write_bytes(bytes([0]) + ehdr + sections_and_data(EHDR_SIZE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
