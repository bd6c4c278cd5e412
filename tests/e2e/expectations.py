"""Exact traffic of every test app, as a function of its arguments.

Each app documents its traffic at the top of its source (testapps/*.cpp);
this module is the same table in executable form. run_app.py compares
`cuxfer report --json` against it.

An expectation is a list of processes; each process is a list of Ops (one Op
= one kind of user call: API, direction, host memory kind, calls, bytes) plus
the allocations it makes. Runtime apps name runtime APIs and the runtime copy
kind; in modes where the runtime is invisible to the shim (the static cudart),
the API the report shows is the driver entry point the runtime calls, so
driver_name() maps one to the other for the simulated runtime (see
docs/simcuda.md: the mapping is the simulation's, the real static cudart's
choice of driver calls is its own and is not asserted).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

KIB = 1024
MIB = 1024 * 1024


def parse_size(text: str) -> int:
    """Same syntax as testapp::arg_size: decimal with optional K/M/G suffix."""
    mult = {"k": KIB, "m": MIB, "g": 1024 * MIB}
    t = text.strip()
    if t and t[-1].lower() in mult:
        return int(t[:-1]) * mult[t[-1].lower()]
    return int(t)


@dataclass
class Op:
    api: str            # what the user called (runtime name for runtime apps)
    direction: str      # H2D D2H D2D H2H peer, or "" for memsets
    memory: str         # pageable pinned registered managed device
    calls: int
    bytes: int
    kind: str = "copy"  # copy | memset
    rt_kind: str = ""   # runtime copy kind (HtoD DtoH DtoD Default) for the runtime->driver mapping


@dataclass
class Alloc:
    calls: int
    bytes: Optional[int]  # None: size decided by the device (pitch), not asserted exactly


@dataclass
class Proc:
    ops: list[Op] = field(default_factory=list)
    allocs: dict[str, Alloc] = field(default_factory=dict)  # device managed host_pinned host_registered
    mode: str = ""  # linkage mode of this process's program when it differs from the launched one (exec)


@dataclass
class Expectation:
    processes: list[Proc]
    findings_present: set[str] = field(default_factory=set)
    findings_absent: set[str] = field(default_factory=set)
    # (source device, destination device, calls, bytes) of every peer-copy pair, all processes
    peer_pairs: list[tuple[int, int, int, int]] = field(default_factory=list)
    # device -> (calls, h2d_bytes, d2h_bytes) over all processes (the report's "devices"),
    # for apps that say where each copy runs; None: not asserted
    per_device: Optional[dict[int, tuple[int, int, int]]] = None


# The driver entry point the simulated runtime uses for each runtime call
# (tests/simcuda/runtime.cpp; documented in docs/simcuda.md).
_SIM_DRIVER_NAME = {
    ("cudaMemcpy", "HtoD"): "cuMemcpyHtoD_v2",
    ("cudaMemcpy", "DtoH"): "cuMemcpyDtoH_v2",
    ("cudaMemcpy", "DtoD"): "cuMemcpyDtoD_v2",
    ("cudaMemcpy", "Default"): "cuMemcpy",
    ("cudaMemcpy", "HtoH"): "cuMemcpy",
    ("cudaMemcpyAsync", "HtoD"): "cuMemcpyHtoDAsync_v2",
    ("cudaMemcpyAsync", "DtoH"): "cuMemcpyDtoHAsync_v2",
    ("cudaMemcpyAsync", "DtoD"): "cuMemcpyDtoDAsync_v2",
    ("cudaMemcpyAsync", "Default"): "cuMemcpyAsync",
    ("cudaMemcpy2D", ""): "cuMemcpy2D_v2",
    ("cudaMemcpy2DAsync", ""): "cuMemcpy2DAsync_v2",
    ("cudaMemcpy3D", ""): "cuMemcpy3D_v2",
    ("cudaMemcpyPeer", ""): "cuMemcpyPeer",
    ("cudaMemcpyPeerAsync", ""): "cuMemcpyPeerAsync",
    ("cudaMemset", ""): "cuMemsetD8_v2",
    ("cudaMemsetAsync", ""): "cuMemsetD8Async",
    ("cudaMemset2D", ""): "cuMemsetD2D8_v2",
}


def driver_name(op: Op) -> str:
    api = op.api
    per_thread = api.endswith(("_ptds", "_ptsz"))
    if per_thread:  # cudaMemcpy_ptds -> cuMemcpyHtoD_v2_ptds, cudaMemcpyAsync_ptsz -> ..._ptsz
        api = api[:-5]
    key = (api, op.rt_kind if api in ("cudaMemcpy", "cudaMemcpyAsync") else "")
    name = _SIM_DRIVER_NAME.get(key, api)
    if per_thread:
        name += "_ptsz" if "Async" in name else "_ptds"
    return name


def _h2d(api, memory, calls, nbytes, rt_kind="HtoD"):
    return Op(api, "H2D", memory, calls, nbytes, rt_kind=rt_kind)


def _d2h(api, memory, calls, nbytes, rt_kind="DtoH"):
    return Op(api, "D2H", memory, calls, nbytes, rt_kind=rt_kind)


def _args(args: list[str], defaults: list):
    """Positional args with defaults, parsed like the apps parse them."""
    out = []
    for i, d in enumerate(defaults):
        out.append(parse_size(args[i]) if i < len(args) else d)
    return out


def _round_trips(n, s, memory="pageable"):
    return [_h2d("cudaMemcpy", memory, n, n * s), _d2h("cudaMemcpy", memory, n, n * s)]


def pageable_loop(args):
    n, s = _args(args, [8, MIB])
    return Expectation([Proc(_round_trips(n, s), {"device": Alloc(1, s)})],
                       findings_absent={"tiny_storm", "async_pageable"})


def pinned_loop(args):
    n, s = _args(args, [8, MIB])
    return Expectation([Proc(_round_trips(n, s, "pinned"),
                             {"device": Alloc(1, s), "host_pinned": Alloc(2, 2 * s)})],
                       findings_absent={"tiny_storm", "async_pageable", "large_pageable"})


def async_streams(args):
    n, s = _args(args, [4, MIB])
    ops = [_h2d("cudaMemcpyAsync", "pageable", n, n * s), _d2h("cudaMemcpyAsync", "pageable", n, n * s),
           _h2d("cudaMemcpyAsync", "pinned", n, n * s), _d2h("cudaMemcpyAsync", "pinned", n, n * s)]
    return Expectation([Proc(ops, {"device": Alloc(2, 2 * s), "host_pinned": Alloc(2, 2 * s)})],
                       findings_present={"async_pageable"}, findings_absent={"tiny_storm"})


def tiny_storm(args):
    n, s = _args(args, [5000, 64])
    ops = [_h2d("cudaMemcpy", "pageable", n, n * s), _d2h("cudaMemcpy", "pageable", 1, n * s)]
    return Expectation([Proc(ops, {"device": Alloc(1, n * s)})], findings_present={"tiny_storm"},
                       findings_absent={"async_pageable"})


def copy2d(args):
    w, h, _hp = _args(args, [1000, 64, 1100])
    ops = [Op("cudaMemcpy2D", "H2D", "pageable", 1, w * h), Op("cudaMemcpy2D", "D2H", "pageable", 1, w * h)]
    return Expectation([Proc(ops, {"device": Alloc(1, None)})])


def managed(args):
    n, s = _args(args, [2, MIB])
    ops = [_h2d("cudaMemcpy", "managed", n, n * s, "Default"), _d2h("cudaMemcpy", "managed", n, n * s, "Default")]
    return Expectation([Proc(ops, {"device": Alloc(1, s), "managed": Alloc(2, 2 * s)})])


def memset_app(args):
    s, w, h = _args(args, [MIB, 1000, 32])
    ops = [Op("cudaMemset", "", "device", 1, s, kind="memset"),
           Op("cudaMemsetAsync", "", "device", 1, s // 2, kind="memset"),
           Op("cudaMemset2D", "", "device", 1, w * h, kind="memset"),
           _d2h("cudaMemcpy", "pageable", 1, s),
           Op("cudaMemcpy2D", "D2H", "pageable", 1, w * h)]
    return Expectation([Proc(ops, {"device": Alloc(2, None)})])


def threads(args):
    t, n, s = _args(args, [4, 50, 64 * KIB])
    return Expectation([Proc(_round_trips(t * n, s), {"device": Alloc(t, t * s)})])


def mixed(args):
    n, s = _args(args, [2, MIB])
    ops = _round_trips(n, s, "pageable") + _round_trips(n, s, "pinned") + _round_trips(n, s, "registered")
    allocs = {"device": Alloc(1, s), "host_pinned": Alloc(1, s), "host_registered": Alloc(1, s)}
    return Expectation([Proc(ops, allocs)])


def peer_app(args):
    n, s = _args(args, [3, MIB])
    ops = [_h2d("cudaMemcpy", "pageable", 1, s), Op("cudaMemcpyPeer", "peer", "device", n, n * s),
           _d2h("cudaMemcpy", "pageable", 1, s)]
    return Expectation([Proc(ops, {"device": Alloc(2, 2 * s)})], peer_pairs=[(0, 1, n, n * s)])


def multi_device(args):
    n, s = _args(args, [2, MIB])
    return Expectation([Proc(_round_trips(4 * n, s), {"device": Alloc(4, 4 * s)})],
                       per_device={0: (4 * n, 2 * n * s, 2 * n * s), 1: (4 * n, 2 * n * s, 2 * n * s)})


def soak(args, output: str = ""):
    """How many iterations fit in SECONDS is not known beforehand: the app prints
    what it made ('soak: traffic API DIR MEMORY CALLS BYTES', 'soak: allocations
    device CALLS BYTES'), and that is compared exactly."""
    ops, allocs = [], {}
    for line in output.splitlines():
        w = line.split()
        if w[:2] == ["soak:", "traffic"] and len(w) == 7:
            api, direction, memory, calls, nbytes = w[2], w[3], w[4], int(w[5]), int(w[6])
            ops.append(Op(api, direction, memory, calls, nbytes, rt_kind={"H2D": "HtoD", "D2H": "DtoH"}[direction]))
        elif w[:3] == ["soak:", "allocations", "device"] and len(w) == 5:
            allocs["device"] = Alloc(int(w[3]), int(w[4]))
    if not ops:
        raise ValueError("soak printed no 'soak: traffic' lines")
    return Expectation([Proc([o for o in ops if o.calls], allocs)])


# Apps whose expectation is read from their own output (run_app.py passes their stdout).
FROM_OUTPUT = {"soak"}


def reset_app(args):
    n, s = _args(args, [3, 16 * MIB])
    return Expectation([Proc(_round_trips(2 * n, s), {"device": Alloc(2, 2 * s)})])


def exit_app(args):
    return Expectation([Proc([_h2d("cudaMemcpy", "pageable", 1, 4096)], {"device": Alloc(1, 4096)})])


def fork_app(args):
    parent = Proc(_round_trips(5, 256 * KIB), {"device": Alloc(1, 256 * KIB)})
    if args and args[0] in ("exec", "spawn"):
        child_app = app_name_of(args[1])
        child = EXPECTATIONS[child_app](args[2:]).processes
        for proc in child:
            proc.mode = mode_of(args[1])
    elif args and args[0] == "vfork":
        child = []  # the vforked child ends before any call of its own
    else:
        child = [Proc(_round_trips(3, 128 * KIB), {"device": Alloc(1, 128 * KIB)})]
    return Expectation([parent] + child)


def driver_linked(args):
    n, s = _args(args, [4, MIB])
    ops = [Op("cuMemcpyHtoD_v2", "H2D", "pageable", n, n * s),
           Op("cuMemcpyDtoH_v2", "D2H", "pageable", n + 1, (n + 1) * s),
           Op("cuMemcpyHtoDAsync_v2", "H2D", "pinned", n, n * s),
           Op("cuMemcpyDtoHAsync_v2", "D2H", "pinned", n, n * s),
           Op("cuMemcpyDtoD_v2", "D2D", "device", 1, s)]
    return Expectation([Proc(ops, {"device": Alloc(2, 2 * s), "host_pinned": Alloc(1, s)})])


def driver_dlsym(args):
    n, s = _args(args, [4, MIB])
    ops = [Op("cuMemcpyHtoDAsync_v2", "H2D", "pinned", n, n * s),
           Op("cuMemcpyDtoHAsync_v2", "D2H", "pinned", n, n * s),
           Op("cuMemcpyHtoD_v2", "H2D", "pageable", n, n * s),
           Op("cuMemcpyDtoH_v2", "D2H", "pageable", n, n * s),
           Op("cuMemcpyDtoH_v2_ptds", "D2H", "pageable", 1, s)]
    return Expectation([Proc(ops, {"device": Alloc(1, s), "host_pinned": Alloc(1, s)})],
                       findings_absent={"tiny_storm"})


def driver_reload(args):
    n, s = _args(args, [2, MIB])
    ops = [Op("cuMemcpyHtoD_v2", "H2D", "pageable", 2 * n, 2 * n * s),
           Op("cuMemcpyDtoH_v2", "D2H", "pageable", 2 * n, 2 * n * s)]
    return Expectation([Proc(ops, {"device": Alloc(2, 2 * s)})], findings_absent={"tiny_storm"},
                       per_device={0: (4 * n, 2 * n * s, 2 * n * s)})


def ptds_streams(args):
    n, s = _args(args, [3, 256 * KIB])
    ops = [Op("cudaMemsetAsync_ptsz", "", "device", 1, s, kind="memset"),
           _h2d("cudaMemcpy_ptds", "pageable", n, n * s),
           _d2h("cudaMemcpyAsync_ptsz", "pinned", n, n * s)]
    return Expectation([Proc(ops, {"device": Alloc(1, s), "host_pinned": Alloc(1, s)})])


def kernel_loop(args):
    n, s = _args(args, [8, 4 * MIB])
    return Expectation([Proc(_round_trips(n, s), {"device": Alloc(1, s)})])


def overlap_kernel(args):
    c, s = _args(args, [8, 64 * MIB])
    ops = [_h2d("cudaMemcpyAsync", "pinned", c, s), _d2h("cudaMemcpyAsync", "pinned", 1, s)]
    return Expectation([Proc(ops, {"device": Alloc(2, s + 4), "host_pinned": Alloc(1, s)})],
                       findings_absent={"async_pageable"})


EXPECTATIONS = {f.__name__: f for f in (
    pageable_loop, pinned_loop, async_streams, tiny_storm, copy2d, managed, memset_app, threads, mixed,
    peer_app, reset_app, exit_app, fork_app, ptds_streams, driver_linked, driver_dlsym, kernel_loop, overlap_kernel,
    multi_device, driver_reload, soak)}

_MODE_SUFFIXES = ("-simshared", "-simstatic", "-sim", "-cudart_shared", "-cudart_static", "-cuda",
                  "-nvcc_static", "-nvcc_shared")


def app_name_of(path: str) -> str:
    """testapps/sim/pageable_loop-simstatic -> pageable_loop."""
    base = path.rsplit("/", 1)[-1]
    for suf in _MODE_SUFFIXES:
        if base.endswith(suf):
            return base[: -len(suf)]
    return base


def mode_of(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    for suf in _MODE_SUFFIXES:
        if base.endswith(suf):
            return suf[1:]
    return ""
