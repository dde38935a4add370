//go:build !unix

package testenv

import "testing"

// PGPorts is the range of loopback ports test servers are started on.
var PGPorts = Service{Name: "PostgreSQL test server ports", Env: "IDEM_TEST_PG_PORTS", Default: "15400-15499"}

// PGBinDir is where PostgreSQL's server binaries are found.
var PGBinDir = Service{Name: "PostgreSQL server binaries", Env: "IDEM_TEST_PG_BIN"}

// PGServer is a PostgreSQL server a test started; on this system tests
// cannot start one (they are skipped, or fail under
// IDEM_REQUIRE_SERVICES=1).
type PGServer struct {
	// Port is the loopback port it listens on.
	Port int
	// Data is its data directory.
	Data string
}

// StartPostgres skips t: test servers are started on Unix systems only.
func StartPostgres(t testing.TB, settings ...string) *PGServer {
	t.Helper()
	PGBinDir.unavailable(t, "test servers are started on Unix systems only")
	return nil
}

// StartStandby is not reached: StartPostgres skipped the test.
func (p *PGServer) StartStandby(t testing.TB, addr, name string, settings ...string) *PGServer {
	return StartPostgres(t)
}

// Addr is the server's host:port.
func (s *PGServer) Addr() string { return "" }

// DSN is a postgres:// URL for the server.
func (s *PGServer) DSN() string { return "" }

// Kill does nothing.
func (s *PGServer) Kill() {}

// Promote is not reached.
func (s *PGServer) Promote(t testing.TB) {}

// Log returns nothing.
func (s *PGServer) Log() string { return "" }
