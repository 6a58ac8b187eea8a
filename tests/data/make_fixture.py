#!/usr/bin/env python3
"""Writes a fixture's export: ok rows of an H200 as an earlier commit's tuner wrote them, for a
database "tuned" with that commit (tests/data/fixture_COMMIT.json, in that commit's export
format).

Each row's config is the first one of its template that the commit's own `mmtune explain
--device-name "NVIDIA H200" --top` ranks usable for the problem on a database without rows (so
it is valid there), the problem is the one its dispatcher runs ("computes:", e.g. a GEMV's
transposition), the launch columns come from its `mmtune emit --info` (as rt_launch_of reads
the kernel), and regs, shared and local bytes from the NVRTC 13 cubin of that emitted source
(the tuner's options: --gpu-architecture, -std=c++17, -default-device) via cuobjdump.  Times
are typical H200 figures (a throughput per template and dtype below), not measurements.  The
rows, device and dates are the same whatever the commit; the commit decides the configs, launch
columns, registers, template hashes and the export's version.  tests/data/README.md has the
commands.

Usage: make_fixture.py --mmtune OLD_MMTUNE --hash NAME=HEX... > fixture_COMMIT.json
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

DEVICE = {"device_name": "NVIDIA H200", "device_uuid": "GPU-5d2f3b8e-7c41-4a9e-9f3a-2b6c1d8e4f70",
          "cc_major": 9, "cc_minor": 0, "sm_count": 132, "driver_version": 13000,
          "nvrtc_version": "13.0"}
CREATED_AT = 1764590400  # 2025-12-01 12:00 UTC, then a minute a row
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
# rel_err, max_err against float64, typical of each dtype at these sizes
ERRORS = {"f32": (1.2e-7, 9.5e-7), "f16": (2.4e-4, 1.9e-3), "bf16": (1.9e-3, 1.5e-2)}

# (template, dtype, M, N, K, B transposed, TFLOP/s; or GB/s for skinny, a GEMV that streams B)
ROWS = [
    ("wgmma", "f16", 4096, 4096, 4096, False, 650),
    ("wgmma", "f16", 4096, 4096, 4096, True, 640),
    ("wgmma", "f16", 2048, 2048, 2048, False, 520),
    ("wgmma", "f16", 1000, 1000, 1000, False, 150),
    ("wgmma", "bf16", 4096, 4096, 4096, False, 640),
    ("wgmma", "bf16", 1000, 1000, 1000, False, 145),
    ("mma_sync", "f16", 4096, 4096, 4096, False, 380),
    ("mma_sync", "f16", 1000, 1000, 1000, False, 120),
    ("mma_sync", "bf16", 4096, 4096, 4096, False, 370),
    ("mma_sync", "bf16", 1000, 1000, 1000, False, 115),
    ("reg_tiled", "f32", 4096, 4096, 4096, False, 38),
    ("reg_tiled", "f32", 2048, 2048, 2048, False, 34),
    ("reg_tiled", "f32", 1000, 1000, 1000, False, 22),
    ("smem_tiled", "f32", 4096, 4096, 4096, False, 9),
    ("smem_tiled", "f32", 1000, 1000, 1000, False, 6),
    ("smem_tiled", "f32", 256, 256, 256, False, 1.5),
    ("skinny", "f32", 1, 4096, 4096, False, 3500),
    ("skinny", "f32", 16, 4096, 4096, False, 3300),
    ("skinny", "f16", 1, 4096, 4096, False, 3300),
    ("skinny", "f16", 16, 4096, 4096, False, 3100),
]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def empty_db(mmtune, folder):
    """A database without rows, as mmtune writes one: what explain ranks for (5089791's refuses a
    database that does not exist); and the version of mmtune's export format (its export of
    that database's)."""
    export, db = os.path.join(folder, "empty.json"), os.path.join(folder, "empty.db")
    with open(export, "w") as f:
        f.write('{"format": "mmtune-results", "version": 1, "results": [], "searches": []}\n')
    run([mmtune, "db", "import", export, "--into", db])
    return db, json.loads(run([mmtune, "db", "export", "--db", db]))["version"]


def choose(mmtune, db, template, dtype, m, n, k, trans_b):
    """The kernel problem (m, n, k, layout) and the first usable config of template."""
    cmd = [mmtune, "explain", str(m), str(n), str(k), "--dtype", dtype, "--device-name",
           DEVICE["device_name"], "--db", db, "--top", "1000"]
    out = run(cmd + (["--trans-b"] if trans_b else []))
    comp = re.search(r"computes:\s+row-major (\d+)x(\d+)x(\d+), layout (\w\w)", out)
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[0].isdigit() and f[4] == template and "not usable" not in line:
            return (int(comp[1]), int(comp[2]), int(comp[3]), comp[4]), f[5]
    sys.exit(f"no usable {template} config for {dtype} {m}x{n}x{k}")


def launch(mmtune, template, dtype, layout, params):
    """The emitted source, the kernel's name, the launch columns (rt_launch_of's reading of the
    kernel) and its dynamic shared bytes."""
    out = run([mmtune, "emit", template, *params.split(","), "--dtype", dtype, "--layout", layout,
               "--info"])
    info = out[out.rindex("/* mmtune emit"):]
    values = dict(p.split("=") for p in params.split(","))
    block = [int(x) for x in re.search(r"block:\s+(\d+) x (\d+) x (\d+)", info).groups()]
    grid = re.search(r"grid:\s+(.*)", info)[1].split(" x ")
    col = {"tile_m": 0, "tile_n": 0, "slices": 1, "threads": block[0] * block[1] * block[2],
           "per_sm": 0}
    for g in grid:
        if g.endswith("per SM"):
            col.update(per_sm=int(g.split()[0]), tile_m=int(values["bm"]),
                       tile_n=int(values["bn"]), slices=max(1, int(values.get("split", 1))))
        elif g.startswith("ceil(M/"):
            col["tile_m"] = int(g[7:-1])
        elif g.startswith("ceil(N/"):
            col["tile_n"] = int(g[7:-1])
        elif g.isdigit():
            col["slices"] *= int(g)
    dynamic = int(re.search(r"shared bytes:\s+(\d+)", info)[1])
    kernel = re.search(r"kernel:\s+(\w+)", info)[1]
    return out[:out.rindex("/* mmtune emit")], kernel, col, dynamic


def resources(source, kernel, arch):
    """regs, static shared bytes, local bytes of kernel in source compiled as the tuner does."""
    nvrtc = ctypes.CDLL("libnvrtc.so.13")
    prog = ctypes.c_void_p()
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-default-device"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    size = ctypes.c_size_t()
    if (nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None)
            or nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
            or nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))):
        sys.exit(f"NVRTC failed on {kernel}")
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin.raw)
        f.flush()
        usage = run(["cuobjdump", "--dump-resource-usage", f.name])
    m = re.search(r"Function " + kernel + r":\s*REG:(\d+) STACK:\d+ SHARED:(\d+) LOCAL:(\d+)", usage)
    if not m:
        sys.exit(f"no resource usage of {kernel} in cuobjdump's output")
    return int(m[1]), int(m[2]), int(m[3])


def fixture_row(mmtune, db, i, template, dtype, m, n, k, trans_b, rate, hashes):
    """Row i of ROWS as the commit of mmtune tuned it."""
    (km, kn, kk, layout), params = choose(mmtune, db, template, dtype, m, n, k, trans_b)
    source, kernel, col, dynamic = launch(mmtune, template, dtype, layout, params)
    # wgmma is the template whose kernels name an architecture (sm_90a), in 7934a61 and 5089791
    regs, static, local = resources(source, kernel, "sm_90a" if template == "wgmma" else "sm_90")
    flop = 2.0 * km * kn * kk
    if template == "skinny":
        moved = (km * kk + kk * kn + km * kn) * ELEM[dtype]
        ms = moved / (rate * 1e9) * 1e3
    else:
        ms = flop / (rate * 1e12) * 1e3
    rel, mx = ERRORS[dtype]
    row = dict(DEVICE)
    row.update(template_name=template, template_hash=hashes[template], params=params,
               dtype=dtype, layout=layout, m=km, n=kn, k=kk, status="ok", error="",
               ms_min=round(ms * 0.985, 6), ms_median=round(ms, 6),
               ms_max=round(ms * 1.03, 6), runs=100 if ms < 1 else 20,
               tflops=round(flop / (ms * 1e-3) / 1e12, 3), rel_err=rel, max_err=mx,
               regs=regs, shared_bytes=static + dynamic, local_bytes=local,
               created_at=CREATED_AT + 60 * i, **col)
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mmtune", required=True, help="the earlier commit's mmtune binary")
    p.add_argument("--hash", action="append", default=[],
                   help="NAME=HEX: the commit's hash of template NAME (emit_all --hashes)")
    args = p.parse_args()
    hashes = dict(h.split("=") for h in args.hash)
    with tempfile.TemporaryDirectory() as folder:
        db, version = empty_db(args.mmtune, folder)
        rows = [fixture_row(args.mmtune, db, i, *r, hashes) for i, r in enumerate(ROWS)]
    text = ",\n    ".join(json.dumps(r) for r in rows)
    print('{"format": "mmtune-results", "version": %d,\n  "results": [\n    ' % version + text +
          '\n  ],\n  "searches": []\n}')


if __name__ == "__main__":
    main()
