//go:build race

package sim

// raceEnabled: the race detector slows the simulation about tenfold, so
// the race build runs a smaller seed set (see seedSet).
const raceEnabled = true
