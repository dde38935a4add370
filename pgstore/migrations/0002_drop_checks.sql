-- 0002: drop the CHECK constraints on state and fence.
--
-- PostgreSQL rebuilds a table's CHECK expressions from their stored text
-- and plans them again in every INSERT and UPDATE that touches the table
-- (they are not cached across statements). On a first-time request, an
-- INSERT and an UPDATE, these two cost about 20 µs of server CPU at
-- concurrency 64 (pgstore's TestCPUPerRequest), more than everything else
-- idem adds on the server. Only idem writes these columns, and only valid
-- values (fixed states in the SQL or states checked in Go; fence 1 or
-- fence + 1); every read rejects a record with an unknown state or a fence
-- below 1 instead of using it.
ALTER TABLE {{table}} DROP CONSTRAINT IF EXISTS {{state_check}};
ALTER TABLE {{table}} DROP CONSTRAINT IF EXISTS {{fence_check}};
