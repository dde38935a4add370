package bench

import "testing"

func TestParseRedisInfo(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_set:calls=10,usec=20,usec_per_call=2.00\r\n" +
		"cmdstat_info:calls=99,usec=1\r\ncmdstat_hset:calls=5,usec=9\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\n"
	calls, cpu := parseRedisInfo(info)
	if calls != 15 || cpu != 1_750_000 {
		t.Errorf("parseRedisInfo = %d calls, %d µs; want 15 (INFO left out), 1750000", calls, cpu)
	}
	if calls, cpu := parseRedisInfo("# Server\r\nredis_version:7.0.0\r\n"); calls != -1 || cpu != -1 {
		t.Errorf("parseRedisInfo without the sections = %d, %d; want -1, -1", calls, cpu)
	}
}

// A cell is metered only when all its slices were; per-request figures
// divide by the metered requests.
func TestCellMetering(t *testing.T) {
	var r cellResult
	r.add(&cellResult{ops: 10, use: usage{stmts: 20, cpu: 1000, wal: -1}, metered: true})
	r.add(&cellResult{ops: 30, use: usage{stmts: 60, cpu: 3000, wal: -1}, metered: true})
	c := toCell(ScenarioFirst, sideRaw, 1, &r)
	if c.StmtsPerReq == nil || *c.StmtsPerReq != 2 || c.ServerCPUPerReq == nil || *c.ServerCPUPerReq != 100 || c.WALPerReq != nil {
		t.Errorf("metered cell: stmts %v, cpu %v, wal %v; want 2, 100, n/a", c.StmtsPerReq, c.ServerCPUPerReq, c.WALPerReq)
	}
	r.add(&cellResult{ops: 5})
	r.add(&cellResult{ops: 5, use: usage{stmts: 10, cpu: 10, wal: 10}, metered: true})
	if c := toCell(ScenarioFirst, sideRaw, 1, &r); c.StmtsPerReq != nil || c.ServerCPUPerReq != nil {
		t.Errorf("a cell with an unmetered slice reports %v statements, %v CPU; want n/a", c.StmtsPerReq, c.ServerCPUPerReq)
	}
}
