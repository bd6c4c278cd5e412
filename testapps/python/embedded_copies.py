"""embedded_copies.py: the script testapps/python_embed.cpp runs (it is not
run by a python executable): copies through the embedding program's own
module, from known lines (the "# site:" markers), for tests/e2e/run_python_embed.py.

  upload     3 calls of upload(5):   15 H2D of 4 KiB
  download   1 call of download(4):   4 D2H of 4 KiB
  module     2 H2D of 64 B, at module level
"""
import embedded_cuda


def upload(n):
    embedded_cuda.h2d(4096, n)  # site: upload


def download(n):
    embedded_cuda.d2h(4096, n)  # site: download


for _ in range(3):
    upload(5)
download(4)
embedded_cuda.h2d(64, 2)  # site: module
print("embedded_copies: OK")
