#!/usr/bin/env python3
"""grow_db.py SRC DST [COPIES]: a database of about 10^5 rows for timing the performance
model's fit and its cache (docs/history/performance-model.md): SRC (a main job's database)
copied to DST, then its ok rows added again COPIES times (default 82) onto other shapes
(M + 7 j) with times 1% apart.
The rows are not measurements: use DST for timing only."""
import shutil
import sqlite3
import sys

if len(sys.argv) not in (3, 4):
    sys.exit("usage: grow_db.py SRC DST [COPIES]")
src, dst = sys.argv[1], sys.argv[2]
copies = int(sys.argv[3]) if len(sys.argv) == 4 else 82
shutil.copy(src, dst)
db = sqlite3.connect(dst)
cols = [r[1] for r in db.execute("PRAGMA table_info(results)") if r[1] != "id"]
changed = {"m": "m + j * 7", "ms_median": "ms_median * (1 + j * 0.01)"}
select = ", ".join(changed.get(c, c) for c in cols)
db.execute(f"WITH RECURSIVE s(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM s WHERE j < ?) "
           f"INSERT INTO results({', '.join(cols)}) SELECT {select} FROM results, s "
           f"WHERE status = 'ok'", (copies,))
db.commit()
print(dst, "ok rows:", db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone()[0])
db.close()
