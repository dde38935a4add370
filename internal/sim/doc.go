// Package sim is a seeded, deterministic simulation of the engine, a store
// and a provider, for idem's own tests: one seed gives one history.
//
// A world (see [Config]) runs clients that retry with timeouts against
// several engine processes over one store, on one simulated clock, while
// processes are killed at every phase of claim → effect → record, store
// answers are lost after commit, the store restarts, effects outlive their
// lease, the provider times out and tells the truth later to an operator
// who resolves with a fence, and the sweeper runs. Every client call is
// recorded as invoke / ok / fail / indeterminate, and [Run] checks the
// history: at most one effect per (scope, key), exactly one when a caller
// saw success, replays identical to the first answer, no answer across
// scopes or for another request, no unknown without a fault that made it
// unknowable.
//
// Determinism: every actor that calls the engine is a goroutine that runs
// only while it holds the world's baton, handed out by an event loop in
// simulated-time order; fault decisions come from per-intent PRNGs seeded
// from the world's seed. The engine's own wall-clock timers (background
// heartbeats, effect timeout, replay-cache age) are set out of reach.
// docs/testing.md describes what is modelled, what is not, and how to run
// a long seed or replay a failing one.
//
// The package uses the standard library only; it is in the root module so
// that any store module's tests can run a world on their store
// ([Config].NewStore).
package sim
