#!/usr/bin/env python3
"""node_compare.py: the checks of issue 15's node targets on the databases of
`scripts/gpu-check.sh node` (docs/history/node-and-cluster.md).

  node_compare.py best A.db B.db DIR
      Every problem's best kernel in A and in B, side by side; for the problems whose best
      differs, DIR/retime-DTYPE-LAYOUT.txt (MxNxK lines) for `mmtune bench --shapes`.
  node_compare.py retime DIR
      The bench CSVs DIR/retime-{a,b}-gpuG-DTYPE-LAYOUT.csv: each differing problem's two bests
      timed on the same GPU, B's time over A's.
  node_compare.py rows A.db B.db
      Whether A and B hold the same measurements: the same problems searched, the same
      (problem, kernel) keys, no key twice, and the row counts.
  node_compare.py kept LOG DB
      Every measurement a log printed ("[gpu G] ... SHAPE DTYPE TEMPLATE PARAMS: X ms") has its
      row in DB (the finished measurements of a killed run were kept).
"""
import csv
import glob
import os
import re
import sqlite3
import sys

KEY = "device_name, template_name, params, dtype, layout, m, n, k"


def best(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT dtype, layout, m, n, k, template_name, params, ms_median "
                      "FROM best").fetchall()
    return {r[:5]: r[5:] for r in rows}


def cmd_best(a_path, b_path, out_dir):
    a, b = best(a_path), best(b_path)
    same = differ = 0
    files = {}
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        dtype, layout, m, n, k = key
        shape = f"{m}x{n}x{k}"
        if ra is None or rb is None:
            print(f"{dtype} {layout} {shape}: only in {'B' if ra is None else 'A'}")
            differ += 1
            continue
        if ra[:2] == rb[:2]:
            same += 1
            continue
        differ += 1
        print(f"{dtype} {layout} {shape}: A {ra[0]} {ra[1]} {ra[2]:.4f} ms | "
              f"B {rb[0]} {rb[1]} {rb[2]:.4f} ms (B/A {rb[2] / ra[2]:.3f})")
        files.setdefault((dtype, layout), []).append(shape)
    for (dtype, layout), shapes in files.items():
        with open(os.path.join(out_dir, f"retime-{dtype}-{layout}.txt"), "w") as f:
            f.write("\n".join(shapes) + "\n")
    print(f"best kernels: {same} problems the same, {differ} differ")


def cmd_retime(out_dir):
    times = {}
    for path in glob.glob(os.path.join(out_dir, "retime-*-gpu*-*-*.csv")):
        side, gpu, dtype, layout = re.search(r"retime-(\w)-gpu(\d+)-(\w+)-(\w+)\.csv$",
                                             path).groups()
        with open(path) as f:
            for r in csv.DictReader(f):
                shape = f"{r['m']}x{r['n']}x{r['k']}"
                times[(dtype, layout, shape, gpu, side)] = (float(r["tuned_ms"]), r["params"])
    ratios = []
    for (dtype, layout, shape, gpu, side) in sorted(times):
        if side != "a" or (dtype, layout, shape, gpu, "b") not in times:
            continue
        ta = times[(dtype, layout, shape, gpu, "a")][0]
        tb = times[(dtype, layout, shape, gpu, "b")][0]
        ratios.append(tb / ta)
        print(f"gpu {gpu} {dtype} {layout} {shape}: A's best {ta:.4f} ms, B's best {tb:.4f} ms, "
              f"B/A {tb / ta:.3f}")
    if ratios:
        print(f"B/A over {len(ratios)} re-timings: min {min(ratios):.3f}, max {max(ratios):.3f}")


def cmd_rows(a_path, b_path):
    def load(path):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        keys = db.execute(f"SELECT {KEY}, status FROM results").fetchall()
        dup = db.execute(f"SELECT COUNT(*) FROM (SELECT {KEY} FROM results GROUP BY {KEY} "
                         "HAVING COUNT(*) > 1)").fetchone()[0]
        problems = set(db.execute("SELECT dtype, layout, m, n, k FROM searches").fetchall())
        return keys, dup, problems

    (ka, da, pa), (kb, db_, pb) = load(a_path), load(b_path)
    sa, sb = {k[:-1] for k in ka}, {k[:-1] for k in kb}
    print(f"A: {len(ka)} rows, {da} keys twice, {len(pa)} problems searched; "
          f"B: {len(kb)} rows, {db_} keys twice, {len(pb)} problems searched")
    print(f"problems: {len(pa & pb)} in both, {len(pa - pb)} only in A, {len(pb - pa)} only in B")
    print(f"kernel keys: {len(sa & sb)} in both, {len(sa - sb)} only in A, {len(sb - sa)} only in B")


def cmd_kept(log_path, db_path):
    line = re.compile(r"^\[gpu \d+\] \[[^]]*\] (\d+)x(\d+)x(\d+) (\w+) (\w+) (\S+): [0-9.]+ ms")
    printed = set()
    with open(log_path) as f:
        for text in f:
            mt = line.match(text)
            if mt:
                m, n, k, dtype, tmpl, params = mt.groups()
                printed.add((tmpl, params, dtype, int(m), int(n), int(k)))
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = set(db.execute("SELECT template_name, params, dtype, m, n, k FROM results "
                          "WHERE status = 'ok'").fetchall())
    lost = printed - rows
    print(f"{len(printed)} measurements printed, {len(printed) - len(lost)} in the database, "
          f"{len(lost)} lost")


if __name__ == "__main__":
    cmds = {"best": (cmd_best, 3), "retime": (cmd_retime, 1), "rows": (cmd_rows, 2),
            "kept": (cmd_kept, 2)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 != cmds[sys.argv[1]][1]:
        sys.exit(__doc__.strip().splitlines()[0] + " (see the file's docstring for usage)")
    fn, _ = cmds[sys.argv[1]]
    fn(*sys.argv[2:])
