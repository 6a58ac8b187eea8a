-- mmtune database schema version 6 (before op and batch): a fixture for the upgrade test in
-- test_db.c.  Written by commit 5487153's `mmtune db import` (two rows and a search time of
-- another origin), then `sqlite3 .dump` and this file's user_version.  Do not edit.
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES('application','mmtune');
INSERT INTO meta VALUES('origin','a2c68d32c18b5265');
CREATE TABLE results(
  id INTEGER PRIMARY KEY,
  device_name TEXT NOT NULL,
  device_uuid TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  sm_count INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version TEXT NOT NULL,
  template_name TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  params TEXT NOT NULL,
  dtype TEXT NOT NULL,
  layout TEXT NOT NULL,
  m INTEGER NOT NULL CHECK (m >= 0),
  n INTEGER NOT NULL CHECK (n >= 0),
  k INTEGER NOT NULL CHECK (k >= 0),
  status TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'verify_failed', 'fault',
                                         'timeout', 'launch_error', 'pruned')),
  error TEXT NOT NULL DEFAULT '',
  ms_min REAL,
  ms_median REAL CHECK (status <> 'ok' OR ms_median IS NOT NULL),
  ms_max REAL,
  runs INTEGER NOT NULL DEFAULT 0,
  tflops REAL,
  rel_err REAL,
  max_err REAL,
  regs INTEGER NOT NULL DEFAULT -1,
  shared_bytes INTEGER NOT NULL DEFAULT -1,
  local_bytes INTEGER NOT NULL DEFAULT -1,
  created_at INTEGER NOT NULL
, tile_m INTEGER NOT NULL DEFAULT 0, tile_n INTEGER NOT NULL DEFAULT 0, slices INTEGER NOT NULL DEFAULT 0, threads INTEGER NOT NULL DEFAULT 0, per_sm INTEGER NOT NULL DEFAULT 0, kernel_hash TEXT NOT NULL DEFAULT '');
INSERT INTO results VALUES(1,'GPU A','GPU-1',9,0,132,13000,'13.0','naive','0123456789abcdef','bx=16,by=16','f32','nn',64,64,64,'ok','',0.23999999999999999111,0.25,0.26000000000000000888,10,0.0020000000000000000416,9.9999999999999995472e-08,1.9999999999999999094e-07,32,0,0,1763700000,16,16,1,256,0,'fedcba9876543210');
INSERT INTO results VALUES(2,'GPU A','GPU-1',9,0,132,13000,'13.0','naive','0123456789abcdef','bx=32,by=32','f32','nn',64,64,64,'launch_error','too many resources requested',NULL,NULL,NULL,0,NULL,NULL,NULL,40,0,0,1763700001,32,32,1,1024,0,'0011223344556677');
CREATE TABLE searches(
  device_name TEXT NOT NULL,
  dtype TEXT NOT NULL,
  layout TEXT NOT NULL,
  m INTEGER NOT NULL,
  n INTEGER NOT NULL,
  k INTEGER NOT NULL,
  candidates TEXT NOT NULL,
  origin TEXT NOT NULL,
  seconds REAL NOT NULL CHECK (seconds >= 0),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (device_name, dtype, layout, m, n, k, candidates, origin)
);
INSERT INTO searches VALUES('GPU A','f32','nn',64,64,64,'nvrtc 13.0; naive:0123456789abcdef','00112233aabbccdd',2.5,1763700002);
CREATE INDEX results_best ON results(device_name, dtype, layout, m, n, k, status,
                                     ms_median);
CREATE INDEX results_resume ON results(device_name, template_name, template_hash, params,
                                       nvrtc_version, dtype, layout, m, n, k);
CREATE VIEW best AS
  SELECT r.* FROM results AS r
  WHERE r.status = 'ok' AND r.id = (
    SELECT b.id FROM results AS b
    WHERE b.device_name = r.device_name AND b.dtype = r.dtype AND b.layout = r.layout
      AND b.m = r.m AND b.n = r.n AND b.k = r.k AND b.status = 'ok'
    ORDER BY b.ms_median, b.id LIMIT 1);
PRAGMA user_version = 6;
