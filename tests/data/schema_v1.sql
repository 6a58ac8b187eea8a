-- mmtune database schema version 1 (as created by the foundation release): a fixture for
-- the upgrade test in test_db.c.  Do not edit.
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta(key, value) VALUES ('application', 'mmtune');
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
                                         'timeout', 'launch_error')),
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
);
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
PRAGMA user_version = 1;
INSERT INTO results(device_name, device_uuid, cc_major, cc_minor, sm_count, driver_version, nvrtc_version, template_name, template_hash, params, dtype, layout, m, n, k, status, ms_median, created_at) VALUES ('GPU A', 'GPU-1', 9, 0, 132, 13000, '13.0', 'naive', '0123456789abcdef', 'bx=16,by=16', 'f32', 'nn', 64, 64, 64, 'ok', 0.25, 1763700000);
