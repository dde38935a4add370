package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Footprint is what one side's table (or key space) holds after a run:
// its records, the bytes they take (table and indexes; Redis: MEMORY
// USAGE), and, on PostgreSQL, how many of the run's updates were HOT —
// written on the row's page without new index entries.
type Footprint struct {
	Side           string  `json:"side"`
	Records        int64   `json:"records"`
	Bytes          int64   `json:"bytes"`
	BytesPerRecord float64 `json:"bytes_per_record"`
	// How is how Bytes was measured.
	How string `json:"how"`
	// Updates and HOTUpdates are pg_stat_user_tables' n_tup_upd and
	// n_tup_hot_upd over the run (PostgreSQL only).
	Updates    int64 `json:"updates,omitempty"`
	HOTUpdates int64 `json:"hot_updates,omitempty"`
}

// HOTRatio is HOTUpdates/Updates, 0 without updates.
func (f Footprint) HOTRatio() float64 {
	if f.Updates == 0 {
		return 0
	}
	return float64(f.HOTUpdates) / float64(f.Updates)
}

// footprinter measures a target's two sides; counters (HOT updates) are
// absolute, Run takes their difference over the run.
type footprinter func(ctx context.Context) ([]Footprint, error)

func perRecord(fs []Footprint) []Footprint {
	for i := range fs {
		if fs[i].Records > 0 {
			fs[i].BytesPerRecord = float64(fs[i].Bytes) / float64(fs[i].Records)
		}
	}
	return fs
}

// postgresFootprint reads both tables of schema. The counters a backend
// keeps are flushed to pg_stat_user_tables at most once a second and when
// it exits, so the raw pool is reset first (idem's store is closed by
// then) and the counters are read until two reads agree.
func postgresFootprint(pool *pgxpool.Pool, schema string) footprinter {
	tables := []struct{ side, table string }{{sideRaw, "raw_records"}, {sideIdem, "idem_records"}}
	return func(ctx context.Context) ([]Footprint, error) {
		var out []Footprint
		read := func() ([]Footprint, error) {
			out = out[:0]
			for _, t := range tables {
				f := Footprint{Side: t.side, How: "pg_total_relation_size"}
				q := pgx.Identifier{schema, t.table}.Sanitize()
				err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q+`), pg_total_relation_size($1::regclass),
					COALESCE((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = $1::regclass), 0),
					COALESCE((SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = $1::regclass), 0)`, q).
					Scan(&f.Records, &f.Bytes, &f.Updates, &f.HOTUpdates)
				if err != nil {
					return nil, err
				}
				out = append(out, f)
			}
			return out, nil
		}
		pool.Reset()
		var last []Footprint
		for i := 0; i < 20; i++ {
			cur, err := read()
			if err != nil {
				return nil, err
			}
			if last != nil && cur[0].Updates == last[0].Updates && cur[1].Updates == last[1].Updates {
				break
			}
			last = append([]Footprint(nil), cur...)
			time.Sleep(300 * time.Millisecond)
		}
		return perRecord(out), nil
	}
}

// sqliteFootprint sums the pages of each table and its indexes (dbstat).
func sqliteFootprint(db *sql.DB) footprinter {
	tables := []struct{ side, table string }{{sideRaw, "raw_records"}, {sideIdem, "idem_records"}}
	return func(ctx context.Context) ([]Footprint, error) {
		var out []Footprint
		for _, t := range tables {
			f := Footprint{Side: t.side, How: "dbstat pages"}
			err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM `+t.table+`),
				(SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = ?))`, t.table).
				Scan(&f.Records, &f.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.table, err)
			}
			out = append(out, f)
		}
		return perRecord(out), nil
	}
}

// mysqlFootprint reads data_length + index_length after ANALYZE TABLE.
func mysqlFootprint(db *sql.DB, name string) footprinter {
	tables := []struct{ side, table string }{{sideRaw, name + "_raw"}, {sideIdem, name}}
	return func(ctx context.Context) ([]Footprint, error) {
		var out []Footprint
		for _, t := range tables {
			f := Footprint{Side: t.side, How: "data_length+index_length after ANALYZE"}
			rows, err := db.QueryContext(ctx, "ANALYZE TABLE `"+t.table+"`")
			if err != nil {
				return nil, err
			}
			_ = rows.Close()
			err = db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM `"+t.table+"`), data_length + index_length "+
				"FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?", t.table).Scan(&f.Records, &f.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.table, err)
			}
			out = append(out, f)
		}
		return perRecord(out), nil
	}
}

// redisSample is how many keys of each side MEMORY USAGE is asked about.
const redisSample = 2000

// redisFootprint counts each side's records (its ":rec" keys) and every key
// under its prefix, samples MEMORY USAGE over up to redisSample of those
// keys and scales the mean to all of them.
func redisFootprint(c redis.UniversalClient, name string) footprinter {
	sides := []struct{ side, pattern string }{{sideRaw, name + "_raw:*"}, {sideIdem, name + ":*"}}
	return func(ctx context.Context) ([]Footprint, error) {
		var out []Footprint
		for _, s := range sides {
			f := Footprint{Side: s.side, How: fmt.Sprintf("MEMORY USAGE, mean of up to %d keys", redisSample)}
			var keys, sampled, sampleBytes int64
			it := c.Scan(ctx, 0, s.pattern, 1000).Iterator()
			pipe := c.Pipeline()
			var cmds []*redis.IntCmd
			for it.Next(ctx) {
				k := it.Val()
				keys++
				if strings.HasSuffix(k, ":rec") {
					f.Records++
				}
				if len(cmds) < redisSample {
					cmds = append(cmds, pipe.MemoryUsage(ctx, k))
				}
			}
			if err := it.Err(); err != nil {
				return nil, err
			}
			if len(cmds) > 0 {
				if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
					return nil, err
				}
			}
			for _, cmd := range cmds {
				if n, err := cmd.Result(); err == nil {
					sampled++
					sampleBytes += n
				}
			}
			if sampled > 0 {
				f.Bytes = sampleBytes * keys / sampled
			}
			out = append(out, f)
		}
		return perRecord(out), nil
	}
}

// footprintDelta is after with the counters of before subtracted.
func footprintDelta(before, after []Footprint) []Footprint {
	for i := range after {
		for _, b := range before {
			if b.Side == after[i].Side {
				after[i].Updates -= b.Updates
				after[i].HOTUpdates -= b.HOTUpdates
			}
		}
	}
	return after
}
